"""Grader and judge models on OpenAI-compatible endpoints: the client (``client``) that
graded tasks' scorers and the judge stage share, and the judge's checks (``judge``).
Imports nothing of the harness above ``core``, so a scorer can import it alone."""
