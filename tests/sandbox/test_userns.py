"""The bwrap runtime's user-namespace check: which sysctl refuses whom (a table), the one
line a run and doctor print, and the real check on this machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, make_workdir

from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.userns import bwrap_version, check_userns, read_sysctls, refusal_line, refusing_sysctl

AA = "kernel.apparmor_restrict_unprivileged_userns"
OPEN = {
    "user.max_user_namespaces": "15000",
    "kernel.unprivileged_userns_clone": "1",
    "kernel.apparmor_restrict_unprivileged_userns": "0",
}


@pytest.mark.parametrize(
    ("changed", "root", "refused_by"),
    [
        ({}, False, None),
        ({}, True, None),
        ({"user.max_user_namespaces": "0"}, True, "user.max_user_namespaces = 0"),
        ({"user.max_user_namespaces": "0"}, False, "user.max_user_namespaces = 0"),
        ({"kernel.unprivileged_userns_clone": "0"}, False, "kernel.unprivileged_userns_clone = 0"),
        ({"kernel.unprivileged_userns_clone": "0"}, True, None),  # root is not refused by it
        ({AA: "1"}, False, f"{AA} = 1"),
        ({AA: "1"}, True, None),
        ({"kernel.unprivileged_userns_clone": None, AA: None}, False, None),  # sysctls this kernel lacks
    ],
)
def test_which_sysctl_refuses_whom(changed, root, refused_by):
    found = refusing_sysctl({**OPEN, **changed}, root)
    assert (found[0] if found else None) == refused_by


def test_the_refusal_is_one_line_naming_the_sysctl_and_the_fix():
    values = {**OPEN, "kernel.unprivileged_userns_clone": "0"}
    line = refusal_line("bwrap: No permissions to create new namespace", values, False)
    assert "\n" not in line and "kernel.unprivileged_userns_clone = 0" in line
    assert "sysctl -w kernel.unprivileged_userns_clone=1" in line and "site.runtime: apptainer" in line
    # no sysctl explains it: bwrap's own words, and every sysctl to check
    other = refusal_line("bwrap: setting up uid map: Permission denied", OPEN, True)
    assert "\n" not in other and "Permission denied" in other and "user.max_user_namespaces" in other


def test_sysctls_this_kernel_lacks_read_as_none():
    values = read_sysctls(lambda path: (_ for _ in ()).throw(FileNotFoundError(path)))
    assert set(values.values()) == {None}


def test_this_machine_makes_user_namespaces_with_the_real_bwrap():
    check_userns("bwrap")  # raises when the kernel refuses: then runtime bwrap cannot run here
    assert bwrap_version("bwrap") >= (0, 8)


def refusing_bwrap(tmp_path):
    """A stand-in for bwrap on a kernel that refuses user namespaces: fails with bwrap's
    own message (a real refusal cannot be made here without changing the host's sysctls)."""
    fake = tmp_path / "bwrap-refused"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    return str(fake)


def test_a_refusing_kernel_is_one_config_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        check_userns(refusing_bwrap(tmp_path))
    assert "\n" not in str(e.value) and "No permissions to creating new namespace" in str(e.value)


def test_a_run_is_refused_in_one_line_before_any_cell(tmp_path):
    workdir = make_workdir(tmp_path / "w")
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text((REPO / "profiles" / "local" / "config.yaml").read_text())
    site = yaml.safe_load((REPO / "profiles" / "local" / "site.yaml").read_text())
    site["site"].update(runtime="bwrap", bwrap=refusing_bwrap(tmp_path))
    (profile / "site.yaml").write_text(yaml.safe_dump(site))
    cmd = [sys.executable, "-m", "ptb_harness", "run", "--workdir", str(workdir), "--profile", str(profile), "-n"]
    env = {**os.environ, "CONDOR_CONFIG": os.devnull}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir, env=env)
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("config error:")]
    assert len(errors) == 1 and "site.runtime: bwrap" in errors[0] and "user namespace" in errors[0], res.stderr
    assert not (workdir / "results" / "cells").exists()
