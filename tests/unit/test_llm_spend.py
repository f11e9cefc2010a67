"""The campaign's LLM spend from its cells' gateway logs (results.llm_spend), on logs the
gateway's own writer wrote (RequestLog, Meter totals), and what status shows of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ptb_harness.core.cell_files import LLM_LOG, llm_log_of
from ptb_harness.gateway.meter import Meter
from ptb_harness.gateway.protocols import TokenUsage
from ptb_harness.gateway.request_log import RequestLog
from ptb_harness.results.llm_spend import TAIL_BYTES, Spend, cell_spend, log_totals, spend_line
from ptb_harness.traces.redact import Redactor


def write_log(path: Path, calls: list[tuple[int, int, float | None]], attempt: int = 1, body: int = 100) -> None:
    """A request log as the gateway writes it: one line per call (input, output, cost),
    each with a request body of ``body`` bytes, its running totals last."""
    log, meter = RequestLog(path, Redactor({}), 64 * 1024, attempt), Meter()
    for i, o, cost in calls:
        meter.add(200, 1.0, TokenUsage(input_tokens=i, output_tokens=o), cost)
        entry = {"status": 200, "request": {"body": '"totals":{"requests":999} ' + "x" * body}}
        log.write({**entry, "totals": meter.totals()})
    log.close()


def test_a_cells_spend_is_the_last_totals_of_each_of_its_attempts_logs(tmp_path):
    write_log(tmp_path / llm_log_of("1"), [(1000, 10, 0.002)], attempt=1)
    # this attempt's last line holds a big body, and its totals come after it
    write_log(tmp_path / LLM_LOG, [(100, 5, 0.0005), (200, 7, 0.001)], attempt=2, body=300_000)
    spend = cell_spend(str(tmp_path))
    assert spend == Spend(cells=1, cost_usd=pytest.approx(0.0035), requests=3, input_tokens=1300, output_tokens=22)
    assert cell_spend(str(tmp_path / "none")) is None and cell_spend(str(tmp_path / LLM_LOG)) is None


def test_a_line_being_written_counts_the_last_whole_one(tmp_path):
    """A running gateway appends; status may read a line half-written."""
    path = tmp_path / LLM_LOG
    write_log(path, [(100, 5, 0.0005)])
    with open(path, "ab") as f:
        f.write(b'{"n":2,"attempt":1,"status":200,"request":{"body":"' + b"y" * (TAIL_BYTES // 2))
    assert log_totals(str(path))["requests"] == 1


@pytest.mark.parametrize(
    "tail",
    [
        b"",  # empty
        b"not a log\n",
        b'{"n":1,"totals":{"requests":-1,"input_tokens":5,"output_tokens":1,"cost_usd":1.0}}\n',  # negative
        b'{"n":1,"totals":{"requests":1,"input_tokens":5,"output_tokens":1,"cost_usd":1.0}\n',  # cut
        b'{"n":1,"totals":{"requests":"1","input_tokens":5,"output_tokens":1}}\n',  # not a count
        b'{"n":1,"totals":{"requests":1,"input_tokens":5,"output_tokens":1}}\n' + b"z" * (TAIL_BYTES + 1),
    ],
    ids=["empty", "not a log", "negative", "cut", "string", "a partial line past the tail"],
)
def test_a_log_that_does_not_state_its_totals_is_of_unknown_cost(tmp_path, tail):
    (tmp_path / LLM_LOG).write_bytes(tail)
    write_log(tmp_path / llm_log_of("1"), [(100, 5, 0.25)])
    spend = cell_spend(str(tmp_path))
    assert (spend.cost_usd, spend.unknown_cells, spend.requests) == (0.25, 1, 1)
    assert spend_line(spend) == "$0.25 in 1 cell (1 of unknown cost, not in the sum), 1 requests, 100 tokens in, 5 out"


def test_an_unpriced_answer_makes_the_cells_cost_unknown_and_a_link_is_not_followed(tmp_path):
    write_log(tmp_path / LLM_LOG, [(100, 5, None)])  # the meter's cost_usd is null
    outside = tmp_path / "outside.jsonl"
    write_log(outside, [(10**6, 10**6, 1000.0)])
    os.symlink(outside, tmp_path / llm_log_of("1"))
    spend = cell_spend(str(tmp_path))
    assert (spend.cost_usd, spend.unknown_cells, spend.requests, spend.input_tokens) == (0.0, 1, 1, 100)
    assert json.loads(json.dumps(spend.record()))["unknown_cells"] == 1


def test_spend_lines_add_up_per_entry():
    a = Spend(cells=1, cost_usd=1.5, requests=10, input_tokens=1_234_000, output_tokens=30_000)
    b = Spend(cells=1, cost_usd=0.004, unknown_cells=1, requests=2, input_tokens=900, output_tokens=12)
    assert spend_line(a + b) == (
        "$1.50 in 2 cells (1 of unknown cost, not in the sum), 12 requests, 1.2M tokens in, 30k out"
    )
