"""`ptb-harness`: campaign commands that need no Snakemake DAG.

    ptb-harness run [--workdir D] SNAKEMAKE_ARGS...
        Run the workflow from a frozen snapshot of the harness (editing the checkout
        mid-campaign changes nothing); e.g. `ptb-harness run --profile profiles/slurm`.

ptb-harness collect [--workdir D] [--profile P] [--campaign FILE]
    Write the tables and plots from whatever exists (unscored cells shown as such).
ptb-harness status [--workdir D] [--profile P] [--campaign FILE] [--json | --targets [--include-agent-failed]]
                   [--all] [--spend]
    The campaign's grid and its unscored cells with their evidence, read from the cell
    dirs without building the Snakemake DAG; with --spend, the LLM spend so far per entry.
ptb-harness plot-cell CELL_DIR [-o PNG]
    One cell's GPU memory and utilisation over time, from its gpu_monitor.csv.
ptb-harness parse-trace RAW OUT
    Turn a raw agent trace into a readable transcript.
ptb-harness setup-agents [--workdir D] [--profile P] [--prefix DIR] [--force]
    Install the pinned agent CLIs (agents/cli/package-lock.json) with npm into the
    prefix the `none` runtime puts on the agent's PATH (cached: a second run does nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ptb_harness.core.cell_files import GPU_PLOT, METRICS, RAW_TRACE, SOLVE, USAGE
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.schema import site_knob
from ptb_harness.core.text import TerminalLogFormatter, terminal_line


def _campaign_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default=".", help="the campaign's working directory (default: .)")
    p.add_argument("--profile", help="profile dir whose site.yaml applies (as with snakemake --profile)")
    p.add_argument("--campaign", help="campaign file (as with snakemake --config campaign=FILE)")


def _collect(args: argparse.Namespace) -> int:
    from ptb_harness.campaign.config import load_config_files
    from ptb_harness.core.layout import collect_outputs
    from ptb_harness.results.campaign_outputs import write_campaign_outputs

    campaign = load_config_files(args.workdir, args.profile, args.campaign)
    paths = collect_outputs(campaign.results_dir)
    written = write_campaign_outputs(campaign, paths)
    summary = ", ".join(f"{n} {k}" for k, n in written.outcome_counts().items())
    tables, plots = paths["cells"].parent, paths["time_png"].parent
    print(terminal_line(f"{len(written.table)} cells ({summary}); tables in {tables}, plots in {plots}"))
    print(terminal_line(f"viewer: {paths['viewer']} ({written.views.summary()})"))
    print(terminal_line(written.hours_line()))
    for line in written.held_lines():  # entries the judges' verdicts keep off the ranking
        print(terminal_line(line))
    return 0


def _plot_cell(args: argparse.Namespace) -> int:
    from ptb_harness.results.gpu_figures import gpu_over_time
    from ptb_harness.results.gpu_usage import monitor_of

    cell_dir = Path(args.cell_dir)
    monitor = monitor_of(cell_dir)
    if not monitor.is_file():
        raise HarnessError(f"{monitor}: no GPU monitor (the cell ran without GPUs, or not yet)")
    out = Path(args.output) if args.output else cell_dir / GPU_PLOT
    if not gpu_over_time(monitor, out, str(cell_dir)):
        raise HarnessError(f"{monitor}: no samples")
    print(out)
    return 0


def _status(args: argparse.Namespace) -> int:
    from ptb_harness.campaign.config import load_config_files
    from ptb_harness.results.status import as_json, campaign_status, render, targets

    campaign = load_config_files(args.workdir, args.profile, args.campaign)
    statuses = campaign_status(campaign, spend=args.spend)
    if args.targets:
        print("\n".join(targets(statuses, include_agent_failed=args.include_agent_failed)))
    elif args.json:
        print(as_json(campaign, statuses, spend=args.spend))
    else:
        print(render(campaign, statuses, show_pending=args.all, spend=args.spend))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from ptb_harness.campaign.config import load_config_files
    from ptb_harness.doctor import run_checks

    checks = run_checks(load_config_files(args.workdir, args.profile, args.campaign))
    for check in checks:
        print(check.line())
    failed = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(failed)} OK, {len(failed)} FAIL")
    return 1 if failed else 0


def _prefetch(args: argparse.Namespace) -> int:
    from ptb_harness.campaign.config import load_config_files
    from ptb_harness.prefetch import prefetch

    missing = prefetch(load_config_files(args.workdir, args.profile, args.campaign), dry_run=args.dry_run)
    if missing:
        print(terminal_line(f"missing from the HF cache: {'; '.join(missing)}"))
        return 1
    print("the HF cache holds everything the campaign's scoring reads")
    return 0


def _reap(args: argparse.Namespace) -> int:
    import logging

    from ptb_harness.gpu.cellset import resolve_gpu_set
    from ptb_harness.gpu.reap import ReapPolicy, reap

    handler = logging.StreamHandler()
    handler.setFormatter(TerminalLogFormatter("%(message)s"))  # a victim's command line is its owner's text
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    policy = ReapPolicy(args.mode, args.scope, args.wait)
    gpu_set = resolve_gpu_set(os.environ, args.gpus)
    report = reap(gpu_set, policy, dry_run=args.dry_run)
    if report.note:
        print(terminal_line(f"reap {args.mode}: {report.note}"))
        return 0
    verb = "would kill" if args.dry_run else "killed"
    print(
        f"reap {args.mode} on {', '.join(report.scope)} ({gpu_set.request.source}): {verb} "
        f"{len(report.victims)}: {' '.join(str(v.pid) for v in report.victims) or '-'}"
        + (f"; still on the GPU: {report.survivors}" if report.survivors else "")
    )
    return 1 if report.survivors else 0


def _parse_trace(args: argparse.Namespace) -> int:
    from ptb_harness.campaign.agents import load_agent
    from ptb_harness.campaign.tasks import load_task
    from ptb_harness.stages.parse_trace import run_parse_trace

    def path(value: str | None) -> Path | None:
        return Path(value) if value else None

    stats = run_parse_trace(
        Path(args.raw),
        Path(args.out),
        agent=load_agent(Path(args.agent_dir)) if args.agent_dir else None,
        required_api_keys=load_task(Path(args.task_dir)).required_api_keys if args.task_dir else (),
        sanitized_raw=path(args.sanitized_raw),
        sanitized_parsed=path(args.sanitized_parsed),
        usage=path(args.usage),
        solve_json=path(args.solve_json),
        raw_only=args.raw_only,
    )
    # one line for the harness's log, however many lines could not be parsed
    print(terminal_line(stats.summary()), file=sys.stderr)
    return 0


def _setup_agents(args: argparse.Namespace) -> int:
    from ptb_harness.core.records import read_yaml_mapping
    from ptb_harness.runtime.agent_cli import install

    workdir = Path(args.workdir).resolve()
    prefix = args.prefix
    if prefix is None and args.profile and (Path(args.profile) / "site.yaml").is_file():
        prefix = (read_yaml_mapping(Path(args.profile) / "site.yaml", "profile").get("site") or {}).get(
            "agent_cli_prefix"
        )
    prefix_path = workdir / (prefix or "resources/agent-cli")
    print(install(workdir / "agents" / "cli", prefix_path, force=args.force))
    return 0


def _run(argv: list[str]) -> int:
    """`ptb-harness run [--workdir D] SNAKEMAKE_ARGS...`: Snakemake from a frozen snapshot."""
    from ptb_harness.runtime.snapshot import GIT_ENV, SNAPSHOT_ENV, git_state, make_snapshot

    parser = argparse.ArgumentParser(prog="ptb-harness run", description=_run.__doc__)
    parser.add_argument("--workdir", default=".", help="the campaign's working directory (default: .)")
    args, snakemake_args = parser.parse_known_args(argv)
    workdir = Path(args.workdir).resolve()
    snap = make_snapshot(workdir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(snap / "src"), env.get("PYTHONPATH", "")) if p)
    env[GIT_ENV] = git_state() or ""
    env[SNAPSHOT_ENV] = str(snap)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snap / "Snakefile"), "--directory", str(workdir)]
    print(f"ptb-harness run: harness {snap.name} (git {env[GIT_ENV] or 'n/a'}) from {snap}", file=sys.stderr)
    os.execve(sys.executable, [*cmd, *snakemake_args], env)
    return 0  # not reached


def _add_status(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="the campaign's grid and unscored cells, from its files (no DAG)")
    _campaign_args(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="every cell's outcome and evidence as JSON")
    out.add_argument(
        "--targets",
        action="store_true",
        help=f"the {METRICS} of every unscored, not running cell whose agent did not fail, one per "
        "line: `snakemake --profile P $(ptb-harness status --targets)` reruns just those",
    )
    p.add_argument(
        "--include-agent-failed",
        action="store_true",
        help="with --targets, also list agent_failed cells (an agent's failure is final: they are left out)",
    )
    p.add_argument("--all", action="store_true", help="also list pending cells one by one")
    p.add_argument(
        "--spend",
        action="store_true",
        help="also what the agents spent on their models so far, per entry, from their cells' LLM gateway logs "
        "(running cells and earlier attempts included; reads every cell's logs)",
    )
    p.set_defaults(func=_status)


def _add_reap(sub: argparse._SubParsersAction, reaping: bool) -> None:
    p = sub.add_parser("reap", help="kill leftover processes on this job's GPUs (scoped; see docs/clusters.md)")
    # the knobs' values and defaults as the schema has them (site.gpu_reap, gpu_scope,
    # reap_wait_seconds); read only for `reap` itself (parse-trace runs once per cell)
    knob = site_knob if reaping else lambda name: {"enum": None, "default": None}
    mode, scope, wait = knob("gpu_reap"), knob("gpu_scope"), knob("reap_wait_seconds")
    p.add_argument("--mode", choices=mode["enum"], default=mode["default"])
    p.add_argument("--scope", choices=scope["enum"], default=scope["default"])
    p.add_argument("--gpus", help="GPU ids (default: from the scheduler's or CUDA's variables)")
    p.add_argument("--dry-run", action="store_true", help="print what would be killed, kill nothing")
    p.add_argument("--wait", type=float, default=wait["default"], help="seconds to wait for killed processes to leave")
    p.set_defaults(func=_reap)


def _add_parse_trace(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "parse-trace", help="raw agent trace -> readable transcript (format declared in agent.json, else detected)"
    )
    p.add_argument("raw", help=f"the raw trace (e.g. a cell's {RAW_TRACE})")
    p.add_argument("out", help="where the transcript goes")
    p.add_argument("--sanitized-raw", help="also write the raw trace with secrets redacted here")
    p.add_argument("--sanitized-parsed", help="also write the transcript with secrets redacted here")
    p.add_argument(
        "--agent-dir", help="the agent's dir: its passthrough/API-key names are secrets; agent.json settings"
    )
    p.add_argument("--task-dir", help="the task's dir: its required API keys are secrets")
    p.add_argument("--raw-only", action="store_true", help="copy verbatim (still sanitized) instead of parsing")
    p.add_argument(
        "--usage", help=f"also write {USAGE} here (tokens, cost, turns, tool calls, resumes; null = unknown)"
    )
    p.add_argument(
        "--solve-json",
        help=f"the cell's {SOLVE}: with an LLM gateway's meter in it, {USAGE}'s tokens and cost are the gateway's",
    )
    p.set_defaults(func=_parse_trace)


def _add_small_commands(sub: argparse._SubParsersAction) -> None:
    """plot-cell, doctor, prefetch."""
    p = sub.add_parser("plot-cell", help="one cell's GPU memory and utilisation over time (PNG)")
    p.add_argument("cell_dir", help="the cell's directory (results/cells/<agent>/<task>/<model>/<setting>)")
    p.add_argument("-o", "--output", help=f"where the PNG goes (default: <cell_dir>/{GPU_PLOT})")
    p.set_defaults(func=_plot_cell)
    p = sub.add_parser("doctor", help="check this site before a campaign (non-zero exit on any FAIL)")
    _campaign_args(p)
    p.set_defaults(func=_doctor)
    p = sub.add_parser("prefetch", help="download base models and task data into site.hf_home (needs internet)")
    _campaign_args(p)
    p.add_argument("--dry-run", action="store_true", help="only say what the cache lacks")
    p.set_defaults(func=_prefetch)


def _add_setup_agents(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("setup-agents", help="install the pinned agent CLIs with npm (cached)")
    p.add_argument("--workdir", default=".", help="the checkout whose agents/cli lock is installed (default: .)")
    p.add_argument("--profile", help="profile dir whose site.agent_cli_prefix is the prefix")
    p.add_argument("--prefix", help="install here instead (default: site.agent_cli_prefix, else resources/agent-cli)")
    p.add_argument("--force", action="store_true", help="reinstall even when the lock's install is present")
    p.set_defaults(func=_setup_agents)


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """Every command but `run` (which hands its arguments to Snakemake)."""
    parser = argparse.ArgumentParser(prog="ptb-harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="write the campaign's tables from what exists")
    _campaign_args(p)
    p.set_defaults(func=_collect)
    _add_status(sub)
    _add_small_commands(sub)
    _add_reap(sub, reaping=argv[:1] == ["reap"])
    _add_parse_trace(sub)
    _add_setup_agents(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        return _run(argv[1:])
    args = _parser(argv).parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as e:
        print(terminal_line(f"ptb-harness {args.command}: {e}"), file=sys.stderr)
        return 1
    except OSError as e:
        print(terminal_line(f"ptb-harness {args.command}: {e.filename or ''}: {e.strerror}"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
