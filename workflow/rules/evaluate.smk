# evaluate: the task's evaluate.py under the task's retry ladder. No valid metrics.json
# after the last attempt fails the job; solve's outputs are inputs here, never touched.


rule evaluate:
    input:
        solve_json=f"{CELL}/solve.json",
        final_model=f"{CELL}/final_model",
    output:
        metrics=f"{CELL}/metrics.json",
    log:
        f"{CELL}/logs/evaluate.log",
    threads: job_threads(CAMPAIGN.settings, "evaluate")
    resources:
        **rule_resources(CAMPAIGN, "evaluate"),
    script:
        "../scripts/evaluate.py"
