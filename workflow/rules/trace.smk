# parse_trace: the raw timestamped trace -> a readable transcript, with sanitized
# companions of both (secrets redacted) and usage.json; `ptb-harness parse-trace` calls
# the same library.


rule parse_trace:
    input:
        raw_trace=f"{CELL}/{RAW_TRACE}",
        solve_json=f"{CELL}/{SOLVE}",
    output:
        parsed=f"{CELL}/{TRANSCRIPT}",
        raw_sanitized=f"{CELL}/{RAW_TRACE_SANITIZED}",
        parsed_sanitized=f"{CELL}/{TRANSCRIPT_SANITIZED}",
        usage=f"{CELL}/{USAGE}",
    log:
        f"{CELL}/{stage_log('parse_trace')}",
    localrule: True
    script:
        "../scripts/parse_trace.py"
