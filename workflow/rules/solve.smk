# solve: the agent's run under its budget. Succeeds whenever the harness did its part;
# solve.json says what the agent did.


rule solve:
    input:
        unpack(base_model_input),
    output:
        solve_json=f"{CELL}/solve.json",
        raw_trace=f"{CELL}/solve_out.txt",
        final_model=directory(f"{CELL}/final_model"),
    log:
        f"{CELL}/logs/solve.log",
    threads: job_threads(CAMPAIGN.settings, "solve")
    resources:
        **rule_resources(CAMPAIGN, "solve"),
    script:
        "../scripts/solve.py"
