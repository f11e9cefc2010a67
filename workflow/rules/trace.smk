# parse_trace: the raw timestamped trace -> a readable transcript, with sanitized
# companions of both (secrets redacted); `ptb-harness parse-trace` does the work.


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
    # plain values where possible: Snakemake inspects every function once per job, which
    # adds up over a 20,000-cell plan; agent_dir is one dict lookup (an entry's name need
    # not be its directory: agents: [{name, dir, ...}])
    params:
        python=PYTHON,
        agent_dir=agent_dir,
        tasks_dir=str(CAMPAIGN.tasks_dir),
    shell:
        "{params.python:q} -m ptb_harness parse-trace {input.raw_trace:q} {output.parsed:q}"
        " --sanitized-raw {output.raw_sanitized:q} --sanitized-parsed {output.parsed_sanitized:q} --usage {output.usage:q}"
        " --solve-json {input.solve_json:q}"
        " --agent-dir {params.agent_dir:q} --task-dir {params.tasks_dir:q}/{wildcards.task:q}"
        " > {log:q} 2>&1"
