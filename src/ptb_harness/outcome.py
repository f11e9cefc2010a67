"""The outcome of a cell, decided from its records alone (no Snakemake DAG needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ptb_harness.evaluate import check_metrics
from ptb_harness.records import read_json

#: Every cell has exactly one of these.
OUTCOMES = ("scored", "agent_failed", "infra_failed", "pending", "running")


@dataclass(frozen=True)
class CellRecords:
    solve: dict | None
    evaluate: dict | None
    metrics: dict | None
    metrics_problem: str | None
    preflight: dict | None = None


def read_cell(cell_dir: Path) -> CellRecords:
    solve = read_json(cell_dir / "solve.json")
    evaluate = read_json(cell_dir / "evaluate.json")
    metrics = problem = None
    try:
        data = (cell_dir / "metrics.json").read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        data = None
    if data is not None:
        metrics, problem = check_metrics(data)
    preflight = read_json(cell_dir / "preflight.json")
    return CellRecords(
        solve if isinstance(solve, dict) else None,
        evaluate if isinstance(evaluate, dict) else None,
        metrics,
        problem or None,
        preflight if isinstance(preflight, dict) else None,
    )


def classify(rec: CellRecords) -> tuple[str, str]:
    """(outcome, evidence): one of OUTCOMES and a short quote of the record that decided it."""
    if rec.metrics is not None:
        return "scored", f"accuracy {rec.metrics['accuracy']}"
    if rec.metrics_problem:
        return "infra_failed", f"metrics.json is invalid: {rec.metrics_problem}"
    if rec.solve is None:
        if (rec.preflight or {}).get("status") == "failed":
            return "infra_failed", f"CUDA preflight failed, agent not started: {rec.preflight.get('reason', '?')}"
        return "pending", "not solved yet"
    if not rec.solve.get("final_model_files"):
        return "agent_failed", f"agent {rec.solve.get('description', '?')}; no final model"
    ev = rec.evaluate or {}
    if ev.get("status") == "failed":
        return "infra_failed", f"scorer: {ev.get('reason', '?')}"
    if ev.get("status") == "running":
        return "running", "evaluating"
    return "pending", f"solved ({rec.solve.get('description', '?')}); not scored yet"
