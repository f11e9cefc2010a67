"""The judge's logic, pure (no files, no network): the deterministic checks (``checks``:
model identity; ``lookups``: PTB lookups and hosted-LLM API calls in the agent's tool
calls; ``evidence_signals``: the n-gram overlap of every file the agent wrote, from the
evidence recorder's record, and the lookups, as signals; ``sources``: the test set's own
places in a job dir), the judge model's prompt (``prompt``) and the verdict (``verdict``:
the answer parsed, combined with the checks); ``signals``: every deterministic check's
result in one shape (``Signal``: flagged, failed, summary, findings, details), what the
judges and the leaderboard consume; ``judges``: the judges as PostTrainBench v1.2 has them
(contamination with the model identity, API usage, PTB lookup, general anomaly), each a
system prompt and its verdict fields; ``vote``: a judge's runs and the per-field quorum;
the prompt's data blocks keep agent text as data. The n-gram check itself and the decoding
of files are ``ptb_scorer.contamination`` (with ``ngrams`` and ``decode``), which the agent
is handed too. The judge stage (``ptb_harness.stages.judge``) gathers the evidence and asks
the model, through the scorer library's LLM client (``ptb_scorer.llm_client``), the one the
graded tasks use too."""
