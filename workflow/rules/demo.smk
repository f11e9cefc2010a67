# The demo's tiny base model, built locally (no downloads): see ptb_harness.demo.


rule tiny_base_model:
    output:
        model=directory(TINY_MODEL),
    log:
        TINY_MODEL_LOG,
    script:
        "../scripts/tiny_base_model.py"
