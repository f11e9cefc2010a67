"""Records on disk: atomic writes and tolerant reads.

Every file the harness writes for a user is written to a temporary file in the same
directory, flushed, fsynced and renamed over the target, so a reader (or a crash) never
sees half a record.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path: str | Path, obj: Any, mode: int = 0o644) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", mode)


def read_json_dict(path: str | Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when the file is missing, unreadable (a
    directory, no permission) or not a JSON object: records edited or broken by hand
    must not turn a status into a traceback."""
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def read_yaml_mapping(path: str | Path, key: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping; errors name the config key it was given as."""
    import yaml

    from ptb_harness.core.errors import ConfigError

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{key}: file {p} not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{key}: {p} is not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{key}: {p} must hold a mapping")
    return data


def read_json_file(path: Path, default: Any) -> Any:
    """An optional hand-written JSON file (``default`` when absent); errors name the file.
    The one reader of the files of agent and task directories (api_keys.json, agent.json,
    info.json)."""
    from ptb_harness.core.errors import ConfigError

    if not path.exists():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """An optional JSON file that must hold an object ({} when absent); errors name the file."""
    from ptb_harness.core.errors import ConfigError

    data = read_json_file(path, {})
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a JSON object")
    return data


def check_metrics(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(metrics, '') when data is a valid metrics.json, else (None, why not)."""
    try:
        obj = json.loads(data)
    except ValueError as e:
        return None, f"not valid JSON ({e.msg} at byte {e.pos})"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    acc = obj.get("accuracy")
    if isinstance(acc, bool) or not isinstance(acc, (int, float)):
        return None, "no numeric 'accuracy'"
    if not math.isfinite(acc) or not 0.0 <= acc <= 1.0:
        return None, f"'accuracy' {acc!r} is outside [0, 1]"
    return obj, ""
