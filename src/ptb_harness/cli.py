"""`ptb-harness`: campaign commands that need no Snakemake DAG.

ptb-harness collect [--workdir D] [--profile P] [--campaign FILE]
    Write the tables from whatever exists (unscored cells shown as such).
ptb-harness parse-trace RAW OUT
    Turn a raw agent trace into a readable transcript.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ptb_harness.errors import HarnessError


def _campaign_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default=".", help="the campaign's working directory (default: .)")
    p.add_argument("--profile", help="profile dir whose site.yaml applies (as with snakemake --profile)")
    p.add_argument("--campaign", help="campaign file (as with snakemake --config campaign=FILE)")


def _collect(args: argparse.Namespace) -> int:
    from ptb_harness.collect import write_tables
    from ptb_harness.config import load_config_files

    campaign = load_config_files(args.workdir, args.profile, args.campaign)
    tables = campaign.results_dir / "tables"
    table = write_tables(campaign, tables / "cells.csv", tables / "leaderboard.csv", tables / "leaderboard.md")
    counts = table["outcome"].value_counts().to_dict()
    print(f"{len(table)} cells ({', '.join(f'{n} {k}' for k, n in counts.items())}); tables in {tables}")
    return 0


def _parse_trace(args: argparse.Namespace) -> int:
    from ptb_harness.traces import parse_trace_file

    parse_trace_file(Path(args.raw), Path(args.out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptb-harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="write the campaign's tables from what exists")
    _campaign_args(p)
    p.set_defaults(func=_collect)
    p = sub.add_parser("parse-trace", help="raw agent trace -> readable transcript")
    p.add_argument("raw")
    p.add_argument("out")
    p.set_defaults(func=_parse_trace)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"ptb-harness {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ptb-harness {args.command}: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
