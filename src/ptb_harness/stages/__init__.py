"""The stages of one cell (solve, evaluate, their preflight and provenance) and the glue
that runs each as a Snakemake job with a state record."""
