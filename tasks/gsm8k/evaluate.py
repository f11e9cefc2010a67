"""GSM8K with inspect_evals' gsm8k task (10-shot from the train split, numeric match of the last number).

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default 150)] [--max-tokens N (default 4000)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The scoring code is ptb_scorer (next to this file), on inspect_ai + inspect_evals.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("gsm8k")
