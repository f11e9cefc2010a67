"""AIME 2026 with inspect_evals' aime2026 task (integer answer on the last line, \\boxed{} accepted).

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default -1)] [--max-tokens N (default 16000)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The scoring code is ptb_scorer (next to this file), on inspect_ai + inspect_evals.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("aime2026")
