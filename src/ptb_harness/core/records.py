"""Records on disk: atomic writes and tolerant reads.

Every file the harness writes for a user is written to a temporary file in the same
directory, flushed, fsynced and renamed over the target, so a reader (or a crash) never
sees half a record.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import stat
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


def sync_filesystem(path: str | Path) -> None:
    """Flush the filesystem holding ``path`` to disk, once (syncfs: that filesystem only;
    sync where syncfs is missing). One call makes a whole tree written without an fsync
    per file durable: the cost of delivering 400,000 files is then the walk, not 400,000
    round trips to the disk."""
    syncfs = _syncfs()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Any:
    import ctypes  # here: most commands never sync a tree

    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    except OSError:
        return None


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path: str | Path, obj: Any, mode: int = 0o644) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", mode)


#: The most a record (solve.json, evaluate.json, state records) may hold.
MAX_RECORD_BYTES = 16 * 2**20
#: The most a metrics file may hold (a few numbers and per-category scores).
MAX_METRICS_BYTES = 2**20
#: How deeply any JSON the harness reads from an agent, a scorer or a record may nest.
MAX_JSON_DEPTH = 64


def json_too_deep(obj: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether obj nests deeper than max_depth (iteratively: no recursion to exhaust)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def loads_bounded(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> tuple[Any, str]:
    """(object, '') or (None, what is wrong): never raises on any input."""
    try:
        obj = json.loads(data)
    except RecursionError:
        return None, f"JSON nested deeper than {max_depth} levels"
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg} at byte {e.pos})"
    except ValueError as e:  # undecodable bytes
        return None, f"not valid JSON ({str(e)[:100]})"
    # a text with no more brackets than the depth allowed cannot nest deeper (most records:
    # counting them is one pass in C, walking the object one in Python)
    if _brackets(data) > max_depth and json_too_deep(obj, max_depth):
        return None, f"JSON nested deeper than {max_depth} levels"
    return obj, ""


def _brackets(data: bytes | str) -> int:
    """How many '[' and '{' the text holds (an upper bound of how deeply it nests)."""
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def read_record_head(path: str | Path, limit: int) -> tuple[bytes | None, str, int]:
    """(its first `limit` bytes, '', its size) of a regular file, or (None, why not, 0).

    A link is not followed and a device or FIFO is not opened for reading (a writer
    could point it at /dev/zero or make it block); '' as the reason means no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, "", 0
    except OSError as e:
        return None, f"cannot be read ({e.strerror})", 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file", 0
        data = _read_up_to(fd, limit, st.st_size)
    except OSError as e:
        return None, f"cannot be read ({e.strerror})", 0
    finally:
        os.close(fd)
    return data, "", st.st_size


def _read_up_to(fd: int, limit: int, size: int) -> bytes:
    """Up to ``limit`` bytes from fd, asking first for the ``size`` fstat gave and one more
    (a file that grew since is read on, up to the limit): one read and the one that finds
    the end, where a buffered read of ``limit`` would allocate all of it first (status
    reads tens of thousands of small records)."""
    chunks, got = [], 0
    ask = min(limit, size + 1)
    while got < limit:
        chunk = os.read(fd, min(limit - got, max(ask - got, 1 << 16)))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_record_tail(path: str | Path, limit: int) -> tuple[bytes | None, str]:
    """(its last `limit` bytes, '') of a regular file, or (None, why not), opened as
    read_record_head opens it (no link followed, no device or FIFO read); '' as the
    reason means no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        return os.pread(fd, limit, max(0, st.st_size - limit)), ""
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    finally:
        os.close(fd)


def read_record_bytes(path: str | Path, limit: int) -> tuple[bytes | None, str]:
    """(data, '') of a regular file of at most `limit` bytes, or (None, why not), read as
    read_record_head reads (no link followed, no device opened)."""
    data, why, size = read_record_head(path, limit + 1)
    if data is None:
        return None, why
    if size > limit:
        return None, f"{size} bytes, more than the {limit} it may have"
    if len(data) > limit:
        return None, f"more than the {limit} bytes it may have"
    return data, ""


def read_json_dict(path: str | Path, limit: int = MAX_RECORD_BYTES) -> dict[str, Any] | None:
    """A JSON object from a file, or None when the file is missing, unreadable (a
    directory, a link, no permission), too big, nested too deep or not a JSON object:
    records edited or broken by hand must not turn a status into a traceback."""
    return read_json_dict_present(path, limit)[0]


def read_json_dict_present(path: str | Path, limit: int = MAX_RECORD_BYTES) -> tuple[dict[str, Any] | None, bool]:
    """read_json_dict's object, and whether anything is there by that name (a link, a
    directory or an unreadable file included, as ``os.path.lexists`` says): one open
    answers both."""
    data, why = read_record_bytes(path, limit)
    if data is None:
        return None, why != ""
    obj, _ = loads_bounded(data)
    return (obj if isinstance(obj, dict) else None), True


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree_sha256(root: str | Path) -> str:
    """sha256 over a directory's regular files (relative paths and contents, sorted);
    links are hashed as their target's name, never followed."""
    root = Path(root)
    h = hashlib.sha256()
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(root)).encode() + b"\0")
            if p.is_symlink():
                h.update(b"link:" + os.readlink(p).encode() + b"\0")
            elif p.is_file():
                h.update(file_sha256(p).encode() + b"\0")
    return h.hexdigest()


def read_yaml_mapping(path: str | Path, key: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping; errors name the config key it was given as."""
    import yaml

    from ptb_harness.core.errors import ConfigError

    p = Path(path)
    try:
        # libyaml's loader where PyYAML was built with it: the same safe subset, ~10x
        # faster (the config schema alone took 0.14 s of every status)
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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
    if len(data) > MAX_METRICS_BYTES:
        return None, f"{len(data)} bytes, more than the {MAX_METRICS_BYTES} a metrics file may have"
    obj, problem = loads_bounded(data)
    if problem:
        return None, problem
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    acc = obj.get("accuracy")
    if isinstance(acc, bool) or not isinstance(acc, (int, float)):
        return None, "no numeric 'accuracy'"
    if not math.isfinite(acc) or not 0.0 <= acc <= 1.0:
        return None, f"'accuracy' {acc!r} is outside [0, 1]"
    return obj, ""
