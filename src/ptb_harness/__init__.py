"""Campaign harness for PostTrainBench-style benchmarks.

The public API is small: load and validate a campaign (``config.load_config``), run one
cell's stages (``solve.run_solve``, ``evaluate.run_evaluate``) and tabulate results
(``collect``). Everything else is internal.
"""

__version__ = "0.1.0"
