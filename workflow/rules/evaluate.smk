# evaluate: the task's evaluate.py under the task's retry ladder. No valid metrics.json
# after the last attempt fails the job; solve's outputs are inputs here, never touched.


rule evaluate:
    input:
        solve_json=f"{CELL}/{SOLVE}",
        final_model=f"{CELL}/{FINAL_MODEL}",
    output:
        metrics=f"{CELL}/{METRICS}",
    log:
        f"{CELL}/{stage_log('evaluate')}",
    benchmark:
        f"{CELL}/{stage_benchmark('evaluate')}"
    threads: job_threads(CAMPAIGN.settings, "evaluate")
    resources:
        **rule_resources(CAMPAIGN, "evaluate"),
    script:
        "../scripts/evaluate.py"
