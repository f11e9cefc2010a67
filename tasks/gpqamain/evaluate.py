"""GPQA main (gated HF Idavidrein/gpqa, gpqa_main): multiple choice with chain of thought,
choices shuffled with a fixed seed (recorded in metrics.json).

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default 50)] [--max-tokens N (default 16000)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The scoring code is ptb_scorer (next to this file), on inspect_ai + inspect_evals.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("gpqamain")
