"""The one snapshot resolver against huggingface_hub's own offline lookup
(``try_to_load_from_cache``), on hand-made caches of each shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import try_to_load_from_cache

from ptb_harness.core.hf_snapshots import repo_dir, resolve_snapshot

A, B = "a" * 40, "b" * 40  # B sorts after A: "the last snapshot" would be B
REPO = "org/name"


def cache(hub: Path, snapshots: list[str], refs: dict[str, str]) -> None:
    root = repo_dir(hub, REPO)
    for commit in snapshots:
        (root / "snapshots" / commit).mkdir(parents=True)
        (root / "snapshots" / commit / "config.json").write_text(f'{{"commit": "{commit}"}}')
    for name, commit in refs.items():
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / name).write_text(commit)


LAYOUTS = {
    "main names the older of two snapshots": ([A, B], {"main": A}, None, A),
    "main names the newer": ([A, B], {"main": B}, None, B),
    "no refs: main is not cached": ([A, B], {}, None, None),
    "main names a snapshot not downloaded": ([A], {"main": B}, None, None),
    "an explicit commit without a ref": ([A, B], {"main": B}, A, A),
    "a branch ref": ([A, B], {"main": A, "v2": B}, "v2", B),
    "a ref with a newline (unusable for huggingface_hub too)": ([A], {"main": A + "\n"}, None, None),
}


@pytest.mark.parametrize("case", LAYOUTS)
def test_resolver_agrees_with_huggingface_hub(case, tmp_path):
    snapshots, refs, revision, expected = LAYOUTS[case]
    cache(tmp_path, snapshots, refs)
    snap = resolve_snapshot(tmp_path, REPO, revision)
    hub = try_to_load_from_cache(REPO, "config.json", cache_dir=tmp_path, revision=revision)
    assert (snap.commit if snap else None) == expected
    assert (str(snap.file("config.json")) if snap else None) == (hub if isinstance(hub, str) else None)


def test_not_a_repo_id_is_never_a_path(tmp_path):
    cache(tmp_path, [A], {"main": A})
    for bad in ("../x", "org/../..", "org", "/abs/path", "a/b/c"):
        assert resolve_snapshot(tmp_path, bad) is None
