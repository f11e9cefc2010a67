"""The shared Hugging Face cache through a real fuse-overlayfs overlay: the agent reads the
shared copy and may download into "the cache", and the shared copy is never written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO, campaign_config, cell_dir, snakemake, write_agent, write_config

pytestmark = pytest.mark.slow

OVERLAY_AGENT = """
    set -eu
    echo "hub cache: $HF_HUB_CACHE"
    cat "$HF_HUB_CACHE/models--org--m/snapshots/abc/config.json"
    echo downloaded > "$HF_HUB_CACHE/models--org--new/weights.bin" 2>/dev/null || {
        mkdir -p "$HF_HUB_CACHE/models--org--new"; echo downloaded > "$HF_HUB_CACHE/models--org--new/weights.bin"; }
    echo tampered >> "$HF_HUB_CACHE/models--org--m/snapshots/abc/config.json"
    mkdir -p final_model && echo '{}' > final_model/config.json
    cp "$HF_HUB_CACHE/models--org--m/snapshots/abc/config.json" final_model/seen_in_cache.txt
"""


def overlay_available() -> bool:
    return shutil.which("fuse-overlayfs") is not None and Path("/dev/fuse").exists()


@pytest.mark.skipif(not overlay_available() and not os.environ.get("CI"), reason="needs fuse-overlayfs and /dev/fuse")
def test_overlay_protects_the_shared_cache(workdir, tmp_path):
    shared = tmp_path / "shared-hf"
    snap = shared / "hub" / "models--org--m" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text('{"score": 0.5}\n')
    before = {p: p.read_bytes() for p in shared.rglob("*") if p.is_file()}

    write_agent(workdir, "overlay", OVERLAY_AGENT)
    write_config(workdir, campaign_config(agents=["overlay"]))
    profile = tmp_path / "profile"
    profile.mkdir()
    shutil.copy(REPO / "profiles/local/config.yaml", profile / "config.yaml")
    site = {"site": {"hf_home": str(shared), "hf_cache_mode": "overlay", "tmp_root": str(tmp_path / "scratch")}}
    (tmp_path / "scratch").mkdir()
    (profile / "site.yaml").write_text(yaml.safe_dump(site))

    run = snakemake(workdir, profile_dir=profile)
    assert run.returncode == 0, run.stderr
    cdir = cell_dir(workdir, "overlay")
    trace = (cdir / "solve_out.txt").read_text()
    assert "hf_merged/hub" in trace and '{"score": 0.5}' in trace
    # the agent's view had its writes (the model it copied carries them)...
    assert "tampered" in (cdir / "final_model" / "seen_in_cache.txt").read_text()
    # ...and the shared copy has none of them
    after = {p: p.read_bytes() for p in shared.rglob("*") if p.is_file()}
    assert after == before
    assert "hf_merged" not in Path("/proc/mounts").read_text(), "the overlay is unmounted after the cell"
    assert list((tmp_path / "scratch").iterdir()) == [], "the job dir is removed after a successful solve"
