"""A campaign run with a payload agent and planted secrets: the agent sees what it is
allowed to, and no secret value lands anywhere on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, campaign_config, cell_dir, write_agent, write_config

pytestmark = pytest.mark.slow

SECRETS = {
    "CLOUD_CRED": "cloud-cred-7f3a9c1e5b",  # named in env_passthrough.txt
    "MY_API_KEY": "sk-test-2b8d4f6a0c9e",  # allowlisted in api_keys.json
    "UNLISTED_SECRET": "never-passed-91c3e5",  # set on the host, named nowhere
}

PAYLOAD_AGENT = """
    set -eu
    test -x "$HOME/agent/run.sh"
    echo "benchmark=$BENCHMARK_ID hours=$NUM_HOURS model=$MODEL_TO_TRAIN"
    echo "cloud cred: ${#CLOUD_CRED} chars; api key: ${#MY_API_KEY} chars"
    echo "unlisted: ${UNLISTED_SECRET:-absent}"
    test "$HF_HUB_CACHE" = "$HUGGINGFACE_HUB_CACHE"
    exec "$HOME/agent/run.sh"
"""


def test_payload_agent_secrets_and_a_clean_results_tree(workdir, tmp_path):
    write_agent(workdir, "payload", PAYLOAD_AGENT)
    adir = workdir / "agents" / "payload"
    (adir / "payload").mkdir()
    (adir / "payload" / "run.sh").write_text("#!/bin/sh\nmkdir -p final_model && echo '{}' > final_model/config.json\n")
    (adir / "payload" / "run.sh").chmod(0o755)
    (adir / "env_passthrough.txt").write_text("# ambient cloud credentials\nCLOUD_CRED\nNOT_SET_ANYWHERE\n")
    (adir / "api_keys.json").write_text('["MY_API_KEY"]')
    write_config(workdir, campaign_config(agents=["payload"]))

    env = {**os.environ, **SECRETS, "CONDOR_CONFIG": os.devnull}
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--profile", str(REPO / "profiles" / "local")]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr

    cdir = cell_dir(workdir, "payload")
    trace = (cdir / "solve_out.txt").read_text()
    assert "benchmark=fake hours=0.0005 model=" + str(workdir / "models" / "m1") in trace
    assert f"cloud cred: {len(SECRETS['CLOUD_CRED'])} chars; api key: {len(SECRETS['MY_API_KEY'])} chars" in trace
    assert "unlisted: absent" in trace
    solve = json.loads((cdir / "solve.json").read_text())
    assert solve["env_passed"] == ["CLOUD_CRED", "MY_API_KEY"] and solve["env_missing"] == ["NOT_SET_ANYWHERE"]
    assert "CLOUD_CRED" in solve["sandbox_env_names"]

    # no secret value in any file of the campaign: results, logs, Snakemake's own records
    hits = []
    for path in workdir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {name}" for name, value in SECRETS.items() if value.encode() in data]
    assert not hits, hits
    assert oct((cdir / "solve_out.txt").stat().st_mode & 0o777) == "0o600"
