# parse_trace: the raw timestamped trace -> a human-readable transcript.


rule parse_trace:
    input:
        raw_trace=f"{CELL}/solve_out.txt",
    output:
        parsed=f"{CELL}/solve_parsed.txt",
    log:
        f"{CELL}/logs/parse_trace.log",
    localrule: True
    script:
        "../scripts/parse_trace.py"
