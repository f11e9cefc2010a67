"""The campaign's report, status and tables from a real Snakemake run: the HTML report is
rendered in headless Chromium (Debian's `chromium`, driven by Playwright) and must show
the leaderboard table and the plots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import campaign_config, cell_dir, make_workdir, snakemake, write_agent

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def scored_campaign(tmp_path_factory):
    """2 agents (one the `noop` base reference) x 2 models x 2 repeats, all scored."""
    root = tmp_path_factory.mktemp("report") / "campaign"
    models = [{"name": "m1", "path": "models/m1"}, {"name": "m2", "path": "models/m2"}]
    make_workdir(root, campaign_config(agents=["exit0", "noop"], models=models, runs=[1, 2]))
    write_agent(root, "noop", "mkdir -p final_model && echo '{\"score\": 0.1}' > final_model/config.json")
    res = snakemake(root)
    assert res.returncode == 0, res.stderr[-3000:]
    return root


def status(workdir, *args):
    return subprocess.run(
        [sys.executable, "-m", "ptb_harness", "status", "--workdir", str(workdir), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_status_grid_json_and_targets_without_snakemake(scored_campaign):
    out = status(scored_campaign)
    assert "8 cells" in out and "8 scored, 0 agent_failed, 0 infra_failed, 0 pending, 0 running" in out
    assert any(line.startswith("exit0 / m1") and line.split()[-1] == "SS" for line in out.splitlines())
    assert status(scored_campaign, "--targets").strip() == ""
    # a cell edited by hand: its metrics.json removed -> pending, named as a target
    victim = cell_dir(scored_campaign, "noop", model="m2")
    (victim / "metrics.json").unlink()
    try:
        data = json.loads(status(scored_campaign, "--json"))
        assert data["counts"] == {"scored": 7, "agent_failed": 0, "infra_failed": 0, "pending": 1, "running": 0}
        [pending] = [c for c in data["cells"] if c["outcome"] == "pending"]
        assert pending["evidence"].startswith("solved (agent exited with code 0); not scored yet")
        targets = status(scored_campaign, "--targets").split()
        assert targets == ["results/cells/noop/fake/m2/0.0005h-0gpu-run1/metrics.json"]
        # the one-liner: Snakemake given just those targets rescores just that cell
        res = snakemake(scored_campaign, "-n", *targets)
        assert "evaluate        1" in res.stdout and "solve " not in res.stdout, res.stdout
    finally:
        assert snakemake(scored_campaign).returncode == 0
    assert (victim / "metrics.json").exists()


def test_a_metrics_json_made_by_hand_is_listed_and_the_one_liner_redoes_it(scored_campaign):
    victim = cell_dir(scored_campaign, "noop", model="m1")
    honest = (victim / "metrics.json").read_bytes()
    (victim / "metrics.json").write_text('{"accuracy": 1.0}')  # valid JSON, newer than its inputs
    data = json.loads(status(scored_campaign, "--json"))
    [bad] = [c for c in data["cells"] if c["outcome"] != "scored"]
    assert bad["outcome"] == "infra_failed"
    assert bad["evidence"] == (
        "records disagree (tampered or edited by hand): metrics.json is not the file the evaluate stage wrote "
        "(sha256 differs)"
    )
    target = "results/cells/noop/fake/m1/0.0005h-0gpu-run1/metrics.json"
    assert status(scored_campaign, "--targets").split() == [target, "--forcerun", target]
    # the documented one-liner: Snakemake alone would say "Nothing to be done"
    res = snakemake(scored_campaign, *status(scored_campaign, "--targets").split())
    assert res.returncode == 0, res.stderr[-2000:]
    assert "evaluate" in res.stderr and "rule solve" not in res.stderr
    assert (victim / "metrics.json").read_bytes() == honest
    assert status(scored_campaign, "--targets").strip() == ""


def test_tables_and_plots(scored_campaign):
    tables = scored_campaign / "results" / "tables"
    md = (tables / "leaderboard.md").read_text()
    assert "| exit0 | 0.750 ± 0.000 (4/4) | 0.750 ± 0.000 (4/4) |" in md
    assert "| base model: noop | 0.100 ± 0.000 (4/4) | 0.100 ± 0.000 (4/4) |" in md
    prov = json.loads((cell_dir(scored_campaign, "exit0") / "provenance.json").read_text())
    assert len(prov["harness"]["workflow_digest"]) == 64 and prov["config"]["model_to_train"].endswith("models/m1")
    assert prov["scorer_packages"]["python"] and prov["evaluate"]["host"] and prov["cell"]["agent"] == "exit0"
    for name in ("leaderboard.png", "heatmap.png", "time_vs_budget.png"):
        assert (scored_campaign / "results" / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="needs Debian's chromium")
def test_report_opens_in_chromium_with_the_leaderboard_and_images(scored_campaign, tmp_path):
    from playwright.sync_api import sync_playwright

    report = scored_campaign / "report.html"
    res = snakemake(scored_campaign, "--report", str(report))
    assert res.returncode == 0, res.stderr[-3000:]
    shot = scored_campaign / "results" / "report_screenshot.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(report.as_uri())
        page.get_by_text("Leaderboard", exact=True).first.click()
        page.locator("tr", has_text="leaderboard").filter(has_not_text="table").filter(
            has_not_text="plot"
        ).first.locator("a").first.click()
        page.wait_for_timeout(1000)
        frames = [f for f in page.frames if f.locator("table#leaderboard").count()]
        assert frames, "the leaderboard table is not shown"
        board = frames[0].locator("table#leaderboard").inner_text()
        assert "exit0" in board and "0.750 ± 0.000 (4/4)" in board and "base model: noop" in board
        images = frames[0].locator("img")
        assert images.count() >= 1
        assert images.first.evaluate("img => img.complete && img.naturalWidth > 100")
        page.screenshot(path=str(shot))
        browser.close()
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
