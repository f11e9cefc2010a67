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
6. ``stages``: one cell's stages (solve, parse_trace, evaluate, judge), their preflight and
   provenance; nothing of Snakemake.
7. ``results``: outcomes from the records, status, tables, leaderboard and plots, and the
   collect pipeline that writes them all (``results.campaign_outputs``).
8. on top: the ``cli``, ``doctor``, the job wrapper every rule's script runs in
   (``workflow_job``: lock, state record, logging, exit codes) and the ``demo`` model builder.

The public API is small: load a campaign (``campaign.config.load_config``), run one cell's
stages (``stages.solve.run_solve``, ``stages.parse_trace.run_parse_trace``,
``stages.evaluate.run_evaluate``, ``stages.judge.run_judge``) and write the campaign's
results (``results.campaign_outputs.write_campaign_outputs``). Everything else is internal.
"""

__version__ = "0.1.0"
