# parse_trace: the raw timestamped trace -> a readable transcript, with sanitized
# companions of both (secrets redacted); `ptb-harness parse-trace` does the work.


rule parse_trace:
    input:
        raw_trace=f"{CELL}/solve_out.txt",
    output:
        parsed=f"{CELL}/solve_parsed.txt",
        raw_sanitized=f"{CELL}/solve_out_sanitized.txt",
        parsed_sanitized=f"{CELL}/solve_parsed_sanitized.txt",
    log:
        f"{CELL}/logs/parse_trace.log",
    localrule: True
    params:
        python=PYTHON,
        agent_dir=lambda wc: CAMPAIGN.agent_dir(wc.agent),
        task_dir=lambda wc: CAMPAIGN.task_dir(wc.task),
    shell:
        "{params.python:q} -m ptb_harness parse-trace {input.raw_trace:q} {output.parsed:q}"
        " --sanitized-raw {output.raw_sanitized:q} --sanitized-parsed {output.parsed_sanitized:q}"
        " --agent-dir {params.agent_dir:q} --task-dir {params.task_dir:q} > {log:q} 2>&1"
