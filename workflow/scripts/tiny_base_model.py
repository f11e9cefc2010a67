# Snakemake job: build the demo's tiny base model locally (see ptb_harness.demo.tiny_model).
from pathlib import Path

from ptb_harness.demo.tiny_model import build_tiny_model
from ptb_harness.workflow_job import stage

with stage(snakemake.log[0], "tiny_base_model"):
    build_tiny_model(Path(snakemake.output.model))
