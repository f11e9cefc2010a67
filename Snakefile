# PostTrainBench campaign harness: solve -> parse_trace -> evaluate -> collect, one cell
# per agent x task x model x hours x num_gpus x run. See README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/solve.smk"
include: "workflow/rules/trace.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/judge.smk"
include: "workflow/rules/collect.smk"


rule all:
    default_target: True
    input:
        cells=every_cell(METRICS, TRANSCRIPT, RAW_TRACE_SANITIZED, *JUDGED),
        collected=OUT.values(),
