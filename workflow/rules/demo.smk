# The demo's tiny base model, built locally (no downloads): see ptb_harness.demo.


rule tiny_base_model:
    output:
        model=directory("resources/models/tiny-{name}"),
    log:
        "resources/models/logs/tiny-{name}.log",
    script:
        "../scripts/tiny_base_model.py"
