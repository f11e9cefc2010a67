"""Regenerate docs/evidence/viewer_grid.png and viewer_cell.png: the campaign viewer of a
synthetic 1,000-cell campaign (bench/synthetic.py: 90% scored, 1,200-row GPU monitors) in
headless Chromium (Debian's `chromium`, driven by Playwright).

    .venv/bin/python scripts/viewer_screenshots.py [--workdir /tmp/ptb-campaign]

The campaign is built in --workdir, a neutral path (the cell page shows its cell dir, so a
screenshot must not show a developer's checkout or home), which must not exist yet and is
removed afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from synthetic import build_campaign  # noqa: E402

EVIDENCE = REPO / "docs" / "evidence"
VIEWPORT = {"width": 1300, "height": 900}
#: the first cell of the campaign, one whose agent left no model
CELL_PAGE = "cells/agent0.task0.model0.10h-1gpu-run1.html"


def screenshots(viewer: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport=VIEWPORT)
        page.goto((viewer / "index.html").as_uri())
        page.screenshot(path=str(EVIDENCE / "viewer_grid.png"))
        page.goto((viewer / CELL_PAGE).as_uri())
        assert page.locator("#outcome").inner_text() == "agent_failed"
        page.screenshot(path=str(EVIDENCE / "viewer_cell.png"))
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default="/tmp/ptb-campaign", help="where the campaign is built (must not exist)")
    workdir = Path(parser.parse_args().workdir)
    workdir.mkdir(parents=True)  # fails when it exists: never write into someone's dir
    try:
        build_campaign(workdir, 1000, scored=0.9, monitor_rows=1200)
        collect = [sys.executable, "-m", "ptb_harness", "collect", "--workdir", str(workdir)]
        subprocess.run(collect, check=True, cwd=workdir)
        screenshots(workdir / "results" / "viewer")
    finally:
        shutil.rmtree(workdir)
    print(f"wrote {EVIDENCE / 'viewer_grid.png'} and {EVIDENCE / 'viewer_cell.png'} (campaign in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
