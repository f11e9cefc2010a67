"""The HTCondor profile. No HTCondor pool can run on these machines (no daemons in
Debian or PyPI), so the submission test replaces the schedd with a STAND-IN, in-process:
the plugin's real code builds the real htcondor2.Submit description, and the stand-in
records it instead of sending it to a pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, campaign_config, snakemake, write_config

pytestmark = pytest.mark.slow

SCHEDD_STAND_IN = textwrap.dedent(
    """
    # HTCondor schedd STAND-IN for tests (no pool can run here): records what the
    # plugin submits, then refuses, so that the run ends.
    import json, os
    import htcondor2

    class StandInSchedd:
        def submit(self, description, *args, **kwargs):
            with open(os.environ["PTB_TEST_SUBMITTED"], "a") as f:
                f.write(json.dumps(dict(description)) + "\\n")
            raise RuntimeError("schedd stand-in: submission recorded, not run")

    htcondor2.Schedd = StandInSchedd
    """
)


def test_dry_run_with_the_htcondor_profile(workdir):
    res = snakemake(workdir, "-n", profile="htcondor")
    assert res.returncode == 0, res.stderr
    assert "solve" in res.stdout and "This was a dry-run" in res.stdout


def test_submit_description_from_the_plugins_real_code(workdir, tmp_path):
    write_config(workdir, campaign_config(num_gpus=[2], hours=[1.5], name="campaign-42"))
    (tmp_path / "stand_in").mkdir()
    (tmp_path / "stand_in" / "sitecustomize.py").write_text(SCHEDD_STAND_IN)
    submitted = tmp_path / "submitted.jsonl"
    env = {
        **os.environ,
        "CONDOR_CONFIG": os.devnull,
        "PYTHONPATH": f"{tmp_path / 'stand_in'}:{os.environ.get('PYTHONPATH', '')}",
        "PTB_TEST_SUBMITTED": str(submitted),
    }
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--profile", str(REPO / "profiles" / "htcondor"), "--htcondor-jobdir", str(tmp_path / "jobs")]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "schedd stand-in" in res.stdout + res.stderr
    desc = json.loads(submitted.read_text().splitlines()[0])
    print(json.dumps(desc, indent=1))
    assert desc["request_gpus"] == "2"
    assert desc["request_cpus"] == "8"
    assert desc["request_memory"] == "64GB"  # the site's 65,536 MB
    assert desc["request_disk"] == str(400000 * 1024)  # KiB of the site's 400,000 MB
    # walltime: 90 min budget + 0 margin + 1 s grace + 30 min overhead, rounded up, in seconds
    assert desc["allowed_job_duration"] == str(121 * 60)
    assert "PATH" in desc["getenv"].split(",")
    assert desc["MY.PtbCampaign"] == '"campaign-42"'
    assert desc["MY.PtbCell"].startswith('"exit0.fake.m1.1.5h-2gpu-run1')
    assert "environment" not in desc or "CONDOR" not in desc["environment"]
    assert "solve" in desc["arguments"] and "--target-jobs" in desc["arguments"]
