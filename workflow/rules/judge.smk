# judge (campaign key judge.enabled): contamination, disallowed model and hosted-API use
# of one cell, after solve and parse_trace; judgement.json, fail closed. Runs on the
# submit host, which reaches the judge's endpoint.


rule judge:
    input:
        solve_json=f"{CELL}/{SOLVE}",
        transcript=f"{CELL}/{TRANSCRIPT_SANITIZED}",
        final_model=f"{CELL}/{FINAL_MODEL}",
    output:
        judgement=f"{CELL}/{JUDGEMENT}",
    log:
        f"{CELL}/{stage_log('judge')}",
    benchmark:
        f"{CELL}/{stage_benchmark('judge')}"
    localrule: True
    script:
        "../scripts/judge.py"
