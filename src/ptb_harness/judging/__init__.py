"""The judge's logic, pure (no files, no network): the deterministic checks (``checks``:
n-gram overlap, model identity, hosted-API mentions), the judge model's prompt
(``prompt``) and the verdict (``verdict``: the answer parsed, combined with the checks);
``signals``: every deterministic check's result in one shape (``Signal``: flagged, failed,
summary, findings, details), what the judges and the leaderboard consume; ``judges``: the
judges as PostTrainBench v1.2 has them (contamination with model identity, API usage,
PTB lookup, general anomaly), each a system prompt and its verdict fields; ``vote``: a
judge's runs and the per-field quorum; the prompt's data blocks keep agent text as data.
The judge stage (``ptb_harness.stages.judge``) gathers the evidence and asks the model,
through the scorer library's LLM client (``ptb_scorer.llm_client``), the one the graded
tasks use too."""
