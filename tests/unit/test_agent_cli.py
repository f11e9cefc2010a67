"""The pinned agent CLIs: the lock's pins, the install check and its cache stamp (no npm run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ptb_harness.core.errors import HarnessError
from ptb_harness.runtime.agent_cli import (
    STAMP,
    install,
    is_installed,
    lock_digest,
    lock_mismatches,
    pinned_versions,
)

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "agents" / "cli"
CLIS = {"@anthropic-ai/claude-code", "@openai/codex", "@google/gemini-cli", "opencode-ai", "@qwen-code/qwen-code"}


def test_every_shipped_cli_is_pinned_exactly_and_locked():
    pins = pinned_versions(LOCK)
    assert set(pins) == CLIS
    lock = json.loads((LOCK / "package-lock.json").read_text())
    for pkg, version in pins.items():
        assert version[0].isdigit() and not any(c in version for c in "^~<>*x "), (pkg, version)
        assert lock["packages"][f"node_modules/{pkg}"]["version"] == version
        assert lock["packages"][f"node_modules/{pkg}"]["integrity"].startswith("sha512-")


def _fake_install(prefix: Path, versions: dict[str, str]) -> None:
    for pkg, v in versions.items():
        d = prefix / "node_modules" / pkg
        d.mkdir(parents=True, exist_ok=True)
        (d / "package.json").write_text(json.dumps({"name": pkg, "version": v}))


def test_lock_mismatches_names_wrong_and_missing_packages(tmp_path):
    lock_dir = tmp_path / "lock"
    lock_dir.mkdir()
    (lock_dir / "package.json").write_text(json.dumps({"dependencies": {"a": "1.0.0", "b": "2.0.0"}}))
    (lock_dir / "package-lock.json").write_text(
        json.dumps(
            {
                "packages": {
                    "": {},
                    "node_modules/a": {"version": "1.0.0"},
                    "node_modules/b": {"version": "2.0.0"},
                    "node_modules/c-darwin": {"version": "2.0.0", "optional": True},
                }
            }
        )
    )
    prefix = tmp_path / "prefix"
    _fake_install(prefix, {"a": "1.0.0", "b": "2.0.1"})
    assert lock_mismatches(lock_dir, prefix) == ["b: want 2.0.0, have 2.0.1"]
    shutil.rmtree(prefix / "node_modules" / "b")
    assert lock_mismatches(lock_dir, prefix) == ["b: want 2.0.0, not installed"]
    # the cache: a stamp with the lock's digest means installed; a changed lock does not
    (prefix / STAMP).write_text(lock_digest(lock_dir))
    assert is_installed(lock_dir, prefix)
    assert "already installed" in install(lock_dir, prefix, npm="no-such-npm")
    (lock_dir / "package.json").write_text(json.dumps({"dependencies": {"a": "1.0.1"}}))
    assert not is_installed(lock_dir, prefix)
    with pytest.raises(HarnessError, match="npm .'no-such-npm'. not found"):
        install(lock_dir, prefix, npm="no-such-npm")


def test_runtime_none_puts_the_pinned_clis_first_on_the_agents_path_only(tmp_path, monkeypatch):
    from ptb_harness.runtime.sandbox import LaunchRequest, RuntimeSettings, Sandbox

    monkeypatch.chdir(tmp_path)  # a relative prefix is relative to the working directory
    site = RuntimeSettings(runtime="none", agent_cli_prefix="clis")
    box = Sandbox(site, {"PATH": "/usr/bin:/bin"})
    kw = {"command": ["true"], "job_home": tmp_path, "job_tmp": tmp_path, "workdir": "task", "env": {}}
    agent_path = box.launch(LaunchRequest(role="agent", **kw)).env["PATH"].split(":")
    assert agent_path[0] == str(tmp_path / "clis" / "node_modules" / ".bin") and agent_path[-2:] == ["/usr/bin", "/bin"]
    assert str(tmp_path / "clis") not in box.launch(LaunchRequest(role="scorer", **kw)).env["PATH"]
