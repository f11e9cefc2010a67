"""doctor: each check on this machine, and the command's table and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO, make_workdir

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.campaign.settings import Site
from ptb_harness.doctor import (
    check_cgroup,
    check_evidence_recorder,
    check_hf_cache,
    check_host_cache_vars,
    check_images,
    check_nvccli,
    check_rlimits,
    check_runtime,
    check_sandbox,
    check_sandbox_namespaces,
    check_sandbox_privileges,
    check_tmp_root,
)

SITE = {
    "runtime": "none",
    "apptainer": "apptainer",
    "agent_image": None,
    "scorer_image": None,
    "isolate_gpus": False,
    "hf_home": None,
    "hf_cache_mode": "overlay",
    "tmp_root": None,
    "min_tmp_free_gb": 0,
}


def typed(site: dict) -> Site:
    """The typed site the checks take, from these knobs (the schema's defaults for the rest)."""
    return campaign_with_defaults({"site": site}).settings.site


def test_the_evidence_recorder_check(monkeypatch):
    judged = campaign_with_defaults({"judge": {"enabled": True, "endpoint": {"base_url": "http://x/v1", "model": "m"}}})
    check = check_evidence_recorder(judged)
    assert check.ok and "inotify" in check.detail and "watches per user" in check.detail
    assert check_evidence_recorder(campaign_with_defaults({})).detail == "the judge is off: no recorder runs"

    def refused(self):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr("ptb_harness.runtime.inotify.Inotify.__init__", refused)
    check = check_evidence_recorder(judged)
    assert not check.ok and "walks the job dir every 30 s only" in check.detail


def test_runtime_none_needs_no_apptainer_and_apptainer_is_missing_here():
    assert check_runtime(typed(SITE)).ok
    missing = check_runtime(typed({**SITE, "runtime": "apptainer", "apptainer": "apptainer-not-installed-here"}))
    assert not missing.ok and "install apptainer" in missing.line()


def test_runtime_apptainer_found(tmp_path):
    # a stand-in for apptainer (none can be installed here): prints a version like the real one
    fake = tmp_path / "apptainer"
    fake.write_text("#!/bin/sh\necho 'apptainer version 1.3.4'\n")
    fake.chmod(0o755)
    check = check_runtime(typed({**SITE, "runtime": "apptainer", "apptainer": str(fake)}))
    assert check.ok and "1.3.4" in check.detail


def test_images(tmp_path):
    site = {**SITE, "runtime": "apptainer", "agent_image": str(tmp_path / "agent.sif"), "scorer_image": None}
    (tmp_path / "agent.sif").write_bytes(b"SIF")
    agent, scorer = check_images(typed(site))
    assert agent.ok and not scorer.ok and "site.scorer_image" in scorer.fix
    assert not check_images(typed({**site, "agent_image": str(tmp_path / "gone.sif")}))[0].ok
    for runtime in ("none", "bwrap"):
        (check,) = check_images(typed({**SITE, "runtime": runtime}))
        assert check.ok and check.detail == f"runtime {runtime} uses no image"


def test_nvccli_only_matters_when_isolating():
    assert check_nvccli(typed(SITE)).ok
    assert not check_nvccli(typed({**SITE, "isolate_gpus": True})).ok  # no nvidia-container-cli on this machine
    assert "only each cell's cards" in check_nvccli(typed({**SITE, "runtime": "bwrap"})).detail


def test_hf_cache_modes(tmp_path):
    assert check_hf_cache(typed(SITE)).ok
    assert not check_hf_cache(typed({**SITE, "hf_home": str(tmp_path / "nope")})).ok
    overlay = check_hf_cache(typed({**SITE, "hf_home": str(tmp_path), "hf_cache_mode": "overlay"}))
    assert overlay.ok == (Path("/dev/fuse").exists() and bool(__import__("shutil").which("fuse-overlayfs")))


def test_tmp_root_space_and_writability(tmp_path):
    assert check_tmp_root(typed({**SITE, "tmp_root": str(tmp_path)})).ok
    too_small = check_tmp_root(typed({**SITE, "tmp_root": str(tmp_path), "min_tmp_free_gb": 10**9}))
    assert not too_small.ok and "min_tmp_free_gb" in too_small.detail
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.geteuid() != 0:  # root writes anywhere: the permission case needs a normal user
            assert not check_tmp_root(typed({**SITE, "tmp_root": str(ro)})).ok
    finally:
        ro.chmod(0o700)
    assert not check_tmp_root(typed({**SITE, "tmp_root": "/proc/no-such-dir"})).ok


def test_host_cache_variables(tmp_path):
    checks = check_host_cache_vars({"HUGGINGFACE_HUB_CACHE": "/x", "XDG_CACHE_HOME": str(tmp_path / "missing")})
    by_name = {c.name: c for c in checks}
    # never bound or passed: the sandbox's caches live in its own HOME
    assert by_name["host HUGGINGFACE_HUB_CACHE"].ok and by_name["host XDG_CACHE_HOME"].ok


def test_runtime_none_says_trusted_only_and_ro_cache_is_not_enforced_there(tmp_path):
    assert "TRUSTED agents only" in check_runtime(typed(SITE)).detail
    unenforced = check_hf_cache(typed({**SITE, "hf_home": str(tmp_path), "hf_cache_mode": "ro"}))
    assert not unenforced.ok and "not enforced" in unenforced.detail
    assert check_hf_cache(typed({**SITE, "runtime": "bwrap", "hf_home": str(tmp_path), "hf_cache_mode": "ro"})).ok


def test_runtime_bwrap_really_makes_a_sandbox_here():
    site = {**SITE, "runtime": "bwrap", "bwrap": "bwrap"}
    check = check_runtime(typed(site))
    assert check.ok, check.line()
    missing = check_runtime(typed({**site, "bwrap": "bwrap-not-installed"}))
    assert not missing.ok and "apt-get install -y bubblewrap" in missing.fix
    # a bwrap the kernel refuses: a stand-in that fails as bwrap does without user namespaces
    refused = check_runtime(typed({**site, "bwrap": "false"}))
    assert not refused.ok and len(refused.line().splitlines()) == 1 and "user namespace" in refused.line()


def run_doctor(workdir: Path, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ptb_harness", "doctor", "--workdir", str(workdir), "--profile", str(profile)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(workdir / "no-such-cache")},
    )


def test_doctor_command_passes_for_local_and_fails_for_an_apptainer_site(tmp_path):
    workdir = make_workdir(tmp_path / "w")
    ok = run_doctor(workdir, REPO / "profiles" / "local")
    lines = ok.stdout.splitlines()
    assert any(line.startswith("OK   runtime: none") for line in lines)
    assert ok.returncode == 0, ok.stdout

    profile = tmp_path / "cluster"
    profile.mkdir()
    site = {"site": {"runtime": "apptainer", "agent_image": "/no/agent.sif", "isolate_gpus": True}}
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    bad = run_doctor(workdir, profile)
    assert bad.returncode == 1
    for expected in ("FAIL runtime: apptainer", "FAIL agent_image", "FAIL scorer_image", "FAIL isolate_gpus"):
        assert expected in bad.stdout, bad.stdout
    assert bad.stdout.splitlines()[-1].endswith("FAIL")


def test_doctor_starts_a_real_bwrap_sandbox_and_reports_it_from_inside():
    checks = {c.name: c for c in check_sandbox(typed({**SITE, "runtime": "bwrap", "bwrap": "bwrap"}))}
    assert set(checks) == {"sandbox privileges", "sandbox namespaces", "sandbox network", "sandbox limits"}
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values()]
    privileges = checks["sandbox privileges"].detail
    assert "CapEff 0000000000000000" in privileges and "NoNewPrivs 1" in privileges
    assert "/proc/sys read-only" in privileges and "nested user namespaces: refused" in privileges
    assert "own user, mnt, pid, ipc, uts, cgroup, net" in checks["sandbox namespaces"].detail
    network = checks["sandbox network"].detail
    assert network.startswith("internet: own namespace, through slirp4netns") and network.endswith(": unreachable")
    assert "host name ptb-sandbox" in checks["sandbox namespaces"].detail
    assert "open files" in checks["sandbox limits"].detail
    # a sandbox that kept a capability, or shared the host's PID namespace, fails its line
    inside = {"status": {"CapEff": "0000000000200000", "CapBnd": "0", "NoNewPrivs": "1"}, "uid": 0}
    assert not check_sandbox_privileges({**inside, "nested_userns": "refused", "proc_sys_writable": False}).ok
    host = {"namespaces": {"user": "user:[1]", "pid": "pid:[2]"}}
    shared = {"namespaces": {"user": "user:[9]", "pid": "pid:[2]"}, "hostname": "h"}
    line = check_sandbox_namespaces(shared, host)
    assert not line.ok and "shared with the host: pid" in line.detail
    # runtime none starts no sandbox to probe
    assert check_sandbox(typed(SITE)) == []


def test_doctor_makes_a_real_cell_cgroup_and_says_plainly_when_none_can_be_made():
    here = check_cgroup(typed(SITE))
    if os.geteuid() == 0 and "none can be made" not in here.detail:  # CI: root, cgroup v1
        assert here.ok and "a cell's cgroup was made, joined and removed: memory: v" in here.detail
        assert "pids: v" in here.detail and "pids.max = 16384" in here.detail
    bad = {"agent_limits": {"cgroup_parent": "/no-such-cgroup"}}
    line = check_cgroup(typed({**SITE, "runtime": "bwrap", **bad}))
    assert not line.ok and "none can be made here (memory: site.agent_limits.cgroup_parent /no-such" in line.detail
    assert "the agents get no memory or process cap" in line.detail and "cgroup: none" in line.fix
    assert check_cgroup(typed({**SITE, **bad})).ok  # runtime none: trusted agents; said, not failed
    off = check_cgroup(typed({**SITE, "agent_limits": {"cgroup": "none"}}))
    assert off.ok and off.detail.startswith("site.agent_limits.cgroup is none: agents get rlimits only")
    limits = check_rlimits(typed({**SITE, "agent_limits": {"nofile": 1024, "file_max_gb": 2}}))
    assert limits.detail.startswith("NOFILE 1024, FSIZE 2 GB, CORE 0; NPROC ")
