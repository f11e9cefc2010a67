"""The scorer's library: what every task's evaluate.py runs on.

It runs inside the scorer sandbox (the harness's interpreter, or containers/scorer.def's
image), so it depends only on the scorer lock (tasks/requirements-scorer.txt) and never
imports ptb_harness. Each task directory carries it (tasks/<t>/ptb_scorer is a link to
this package; copying a task dereferences it), so the agent's copy of a task and the
harness's scoring copy both run it.

- ``model``: checks a final_model (files, architecture family).
- ``chat_template``: the base model's chat template as transformers reads it, the family
  table (tool parser, our tool-calling template where a family has none), the bundle the
  harness hands the scorer.
- ``render``, ``hf_backend``: prompts rendered as vLLM's server renders them, on the
  transformers backend too.
- ``engine``: runs an inspect_ai task on vLLM or transformers and writes metrics.json.
- ``contained``: runs model-written code in a limited child process (namespaces, rlimits, uid).
- ``proxied_check``, ``proxy_runtime``: HumanEval's check, the tests in a checker process and
  the model's code in an answer process, only plain values between them.
- ``tasks``: the five benchmarks as inspect Tasks.
- ``cli``: the evaluate.py command line and its one ``main``, shared by the tasks; ``task_info``:
  what it reads of the task's info.json (its defaults), and what an attempt runs with.
- ``protocol``: the scorer <-> harness protocol: the marker lines, the exit codes, their
  ``emit_*`` helpers, and the one reader of an attempt's log (the harness imports it).
- ``llm_client``: the HTTP client of LLMs on OpenAI-compatible endpoints (the graded tasks'
  grader models, and the harness's judge).
- ``arena``, ``rubric``: pairwise (Arena-Hard) and rubric (HealthBench) grading.
- ``graded``: the graded tasks' scoring: the model answers, a grader model grades.
- ``contamination``: the n-gram check of files against a task's test set (the judge's, and
  the agent's own ``contamination_check.py``), on ``decode`` (every text a file holds, in
  any encoding and container, weights told by content, pickles never executed) and
  ``ngrams`` (word n-gram overlap, vectorised).
"""
