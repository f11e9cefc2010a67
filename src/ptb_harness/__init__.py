"""Campaign harness for PostTrainBench-style benchmarks.

The package is layered; imports only point down (``tests/test_layers.py`` enforces it):

1. ``core``: errors, atomic writes and bounded reads, a cell's files and typed records
   (``cell_files``) and where cells and campaign outputs live (``layout``).
   ``judging``: the judge's logic, pure: deterministic checks, prompt, verdict (its client
   is ptb_scorer.llm_client, the graded tasks').
2. ``runtime``: budgeted processes, the sandbox runtimes, HF cache view, harness snapshot,
   scheduler job.
3. ``gpu``: the cell's GPUs on NVML: ids, the GPU set, leases, scoped reaping, monitor.
4. ``traces``: agent traces parsed by content, redacted.
   ``gateway``: one cell's LLM gateway (the agent's only way to its model): key swap,
   metering, prices, the LLM budget, llm_log.jsonl.
5. ``campaign``: cells (the leaf), agents, tasks, typed settings, the campaign, the one
   reader of the configuration mapping, its checks, the steps in order, resources.
6. ``stages``: solve and evaluate of one cell, their preflight and provenance, and the glue
   that runs each as a Snakemake job.
7. ``results``: outcomes from the records, status, tables, leaderboard and plots.
8. on top: the ``cli`` and ``doctor`` (and the ``demo`` model builder).

The public API is small: load a campaign (``campaign.config.load_config``), run one cell's
stages (``stages.solve.run_solve``, ``stages.evaluate.run_evaluate``) and tabulate results
(``results.collect``). Everything else is internal.
"""

__version__ = "0.1.0"
