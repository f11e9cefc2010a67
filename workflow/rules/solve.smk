# solve: the agent's run under its budget. Succeeds whenever the harness did its part;
# solve.json says what the agent did.


rule solve:
    input:
        unpack(base_model_input),
    output:
        solve_json=f"{CELL}/{SOLVE}",
        raw_trace=f"{CELL}/{RAW_TRACE}",
        final_model=directory(f"{CELL}/{FINAL_MODEL}"),
    log:
        f"{CELL}/{stage_log('solve')}",
    benchmark:
        f"{CELL}/{stage_benchmark('solve')}"
    threads: job_threads(CAMPAIGN.settings, "solve")
    resources:
        **rule_resources(CAMPAIGN, "solve"),
    script:
        "../scripts/solve.py"
