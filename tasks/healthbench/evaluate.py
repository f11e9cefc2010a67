"""HealthBench: the model replies to each health conversation; a grader model checks the
reply against every criterion of the example's rubric; accuracy is the mean rubric
score, with by-theme and by-axis scores.

    python evaluate.py [--model-path final_model] [--json-output-file metrics.json]
                       [--limit N (-1 = all; default 32)] [--max-new-tokens N (default 16384)]
                       [--backend auto|vllm|hf] [--chat-template-from DIR]

The grader is the campaign's (`grader:`), handed over by the harness's evaluate stage
only; run here by hand, it says that no grader is configured. Code: ptb_scorer.graded.
"""

from ptb_scorer.cli import run

if __name__ == "__main__":
    run("healthbench")
