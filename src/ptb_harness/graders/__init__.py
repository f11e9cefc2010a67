"""The judge's checks (``judge``): n-gram overlap, model identity, hosted-API mentions,
the judge model's prompt and verdict. Its client is the scorer library's
(``ptb_scorer.llm_client``), the one the graded tasks use too."""
