# judge (campaign key judge.enabled): contamination, disallowed model and hosted-API use
# of one cell, after solve and parse_trace; judgement.json, fail closed. Runs on the
# submit host, which reaches the judge's endpoint.


rule judge:
    input:
        solve_json=f"{CELL}/solve.json",
        transcript=f"{CELL}/solve_parsed_sanitized.txt",
        final_model=f"{CELL}/final_model",
    output:
        judgement=f"{CELL}/judgement.json",
    log:
        f"{CELL}/logs/judge.log",
    localrule: True
    script:
        "../scripts/judge.py"
