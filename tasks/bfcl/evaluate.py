"""BFCL exec_simple with inspect_evals' bfcl task: native tool calling (vLLM: auto tool choice,
hermes parser); the call's arguments are matched against the ground truth.

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default -1)] [--max-tokens N (default 16000)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The scoring code is ptb_scorer (next to this file), on inspect_ai + inspect_evals.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("bfcl")
