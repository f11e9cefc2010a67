"""The agent CLIs, pinned: install them from the lock and say which versions are present.

``agents/cli/package.json`` names every shipped CLI at an exact version and
``agents/cli/package-lock.json`` (npm's own) pins the whole tree with integrity hashes.
``ptb-harness setup-agents`` installs that tree into a prefix (``site.agent_cli_prefix``,
default ``resources/agent-cli``); the ``none`` runtime puts ``<prefix>/node_modules/.bin``
on the agent's PATH, and ``doctor`` compares what is installed with the pins.

npm ci is tried first. Where the registry does not serve the other platforms' optional
binaries (npm then writes a lock without them and ``npm ci`` rejects it as out of sync,
npm/cli#9846) the install falls back to ``npm install`` from the same lock, which still
takes the locked versions and hashes; every locked package's version is checked after.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from ptb_harness.core.errors import HarnessError

LOCK_FILES = ("package.json", "package-lock.json")
#: Written into the prefix after a verified install: the lock's digest (the cache key).
STAMP = ".ptb-installed"


def bin_dir(prefix: Path) -> Path:
    return Path(prefix) / "node_modules" / ".bin"


def lock_digest(lock_dir: Path) -> str:
    h = hashlib.sha256()
    for name in LOCK_FILES:
        h.update((Path(lock_dir) / name).read_bytes())
    return h.hexdigest()


def pinned_versions(lock_dir: Path) -> dict[str, str]:
    """npm package -> exact version, from package.json's dependencies."""
    data = json.loads((Path(lock_dir) / "package.json").read_text(encoding="utf-8"))
    return dict(data.get("dependencies") or {})


def installed_version(prefix: Path, package: str) -> str | None:
    manifest = Path(prefix) / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lock_mismatches(lock_dir: Path, prefix: Path) -> list[str]:
    """Locked packages (this platform's) whose installed version differs: 'name: want X, have Y'."""
    lock = json.loads((Path(lock_dir) / "package-lock.json").read_text(encoding="utf-8"))
    bad = []
    for key, entry in (lock.get("packages") or {}).items():
        if not key.startswith("node_modules/") or not isinstance(entry, dict) or "version" not in entry:
            continue
        installed = Path(prefix) / key / "package.json"
        if not installed.exists():
            if entry.get("optional"):
                continue  # another platform's binary
            bad.append(f"{key[len('node_modules/') :]}: want {entry['version']}, not installed")
            continue
        have = installed_version(prefix, key[len("node_modules/") :])
        if have != entry["version"]:
            bad.append(f"{key[len('node_modules/') :]}: want {entry['version']}, have {have}")
    return bad


def is_installed(lock_dir: Path, prefix: Path) -> bool:
    stamp = Path(prefix) / STAMP
    return stamp.is_file() and stamp.read_text().strip() == lock_digest(lock_dir)


def install(lock_dir: Path, prefix: Path, npm: str = "npm", force: bool = False) -> str:
    """Install the locked CLIs into prefix (cached: nothing to do when the stamp matches).

    Returns what was done, in one line. Raises HarnessError naming the step that failed.
    """
    lock_dir, prefix = Path(lock_dir), Path(prefix)
    for name in LOCK_FILES:
        if not (lock_dir / name).is_file():
            raise HarnessError(f"{lock_dir / name} not found")
    if not force and is_installed(lock_dir, prefix):
        return f"agent CLIs already installed in {prefix} (lock {lock_digest(lock_dir)[:12]})"
    exe = shutil.which(npm)
    if exe is None:
        raise HarnessError(f"npm ('{npm}') not found: install Node.js and npm first")
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / STAMP).unlink(missing_ok=True)
    for name in LOCK_FILES:
        shutil.copyfile(lock_dir / name, prefix / name)
    flags = ["--no-audit", "--no-fund", "--no-update-notifier"]
    ci = subprocess.run([exe, "ci", *flags], cwd=prefix, capture_output=True, text=True)
    how = "npm ci"
    if ci.returncode != 0:
        if "in sync" not in ci.stderr:
            raise HarnessError(f"npm ci in {prefix} failed: {_last_error(ci.stderr)}")
        # npm/cli#9846: the lock lacks optional binaries this registry does not serve
        shutil.copyfile(lock_dir / "package-lock.json", prefix / "package-lock.json")
        res = subprocess.run([exe, "install", "--no-save", *flags], cwd=prefix, capture_output=True, text=True)
        if res.returncode != 0:
            raise HarnessError(f"npm install in {prefix} failed: {_last_error(res.stderr)}")
        how = "npm install from the lock (npm ci refused it: optional binaries of other platforms)"
    bad = lock_mismatches(lock_dir, prefix)
    if bad:
        raise HarnessError(f"installed tree in {prefix} differs from the lock: {'; '.join(bad[:5])}")
    (prefix / STAMP).write_text(lock_digest(lock_dir) + "\n")
    versions = ", ".join(f"{p}@{installed_version(prefix, p)}" for p in pinned_versions(lock_dir))
    return f"installed with {how} into {prefix}: {versions}"


def _last_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if "error" in ln.lower() and "EBADENGINE" not in ln]
    if lines:
        return " | ".join(lines[-3:])
    tail = stderr.strip().splitlines()
    return tail[-1] if tail else "no output"
