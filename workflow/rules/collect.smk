# collect: tables of every cell. `ptb-harness collect` writes the same tables from
# whatever exists when some cells have no score yet.


rule collect:
    input:
        metrics=all_cell_files("metrics.json"),
    output:
        **TABLES,
    log:
        f"{RESULTS}/logs/collect.log",
    localrule: True
    script:
        "../scripts/collect.py"
