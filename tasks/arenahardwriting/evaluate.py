"""Arena-Hard v2.0 creative writing: the model answers each question; a grader model
compares the answer with a baseline model's, in both orders; accuracy is the win rate.

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default 32)] [--max-new-tokens N (default 16384)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The grader is the campaign's (`grader:`), handed over by the harness's evaluate stage
only; run here by hand, it says that no grader is configured. Code: ptb_scorer.graded.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("arenahardwriting")
