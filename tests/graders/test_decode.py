"""The contamination check's reading of files (ptb_scorer.decode, ptb_scorer.ngrams): every
container and encoding an agent could hide a test-set copy in is decoded and the copy
found; weights are read for their text only; a pickle is never executed; every bound
cuts the read and says why (the judge then fails closed)."""

from __future__ import annotations

import base64
import bz2
import csv
import gzip
import io
import json
import lzma
import pickle
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from ptb_scorer.contamination import field_text, scan_stream
from ptb_scorer.decode import Budget, decode, sniff
from ptb_scorer.ngrams import NgramIndex, Piece, scan_text

_WORDS = [f"{a}{b}" for a in ("sold", "clip", "farm", "tree", "lamp", "road", "milk", "coin") for b in range(40)]
#: 60 questions of 24 words each, drawn apart (no two share a 13-gram)
QUESTIONS = [" ".join(_WORDS[(i * 7 + j * j * 13 + j) % len(_WORDS)] for j in range(24)) + "?" for i in range(60)]
INDEX = NgramIndex(QUESTIONS, 13)
ROWS = [{"question": q, "answer": "72"} for q in QUESTIONS]
JSONL = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
TEXT = "\n".join(QUESTIONS).encode()


def _zip(members: dict[str, bytes], **kw) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data, **kw)
    return buf.getvalue()


def _tar_gz(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _table(write) -> bytes:
    buf = io.BytesIO()
    write(pa.Table.from_pylist(ROWS), buf)
    return buf.getvalue()


def _arrow_stream(table: pa.Table, buf: io.BytesIO) -> None:
    with ipc.new_stream(buf, table.schema) as w:
        w.write_table(table)


def _arrow_file(table: pa.Table, buf: io.BytesIO) -> None:
    with ipc.new_file(buf, table.schema) as w:
        w.write_table(table)


def _csv() -> bytes:
    s = io.StringIO()
    w = csv.writer(s)
    for r in ROWS:
        w.writerow([r["question"], r["answer"]])
    return s.getvalue().encode()


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=True)
    return buf.getvalue()


def _safetensors(tensors: dict[str, tuple[str, bytes]], metadata: dict | None = None) -> bytes:
    header, data, offset = {}, b"", 0
    for name, (dtype, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": [len(raw)], "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    head = json.dumps(header).encode()
    return len(head).to_bytes(8, "little") + head + data


def _torch(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


CONTAINERS = {
    "text": (TEXT, "text"),
    "JSON lines": (JSONL, "jsonl"),
    "JSON, every character \\u-escaped": (
        json.dumps(ROWS).replace("a", "\\u0061").replace("e", "\\u0065").encode(),
        "json",
    ),
    "UTF-16 with a BOM": (TEXT.decode().encode("utf-16"), "text"),
    "UTF-16LE without a BOM": (TEXT.decode().encode("utf-16-le"), "text"),
    "UTF-32": (TEXT.decode().encode("utf-32"), "text"),
    "CSV": (_csv(), "csv"),  # told by its name alone (CSV is text either way)
    "Parquet": (_table(pq.write_table), "parquet"),
    "Arrow stream (datasets' cache)": (_table(_arrow_stream), "arrow_stream"),
    "Arrow file": (_table(_arrow_file), "arrow"),
    "pickle of plain data": (pickle.dumps(ROWS), "pickle"),
    "pickle, protocol 2": (pickle.dumps(ROWS, protocol=2), "pickle"),
    "gzip": (gzip.compress(JSONL), "gzip>jsonl"),
    "bzip2": (bz2.compress(JSONL), "bz2>jsonl"),
    "xz": (lzma.compress(JSONL), "xz>jsonl"),
    "zip of gzip": (_zip({"a/b.jsonl.gz": gzip.compress(JSONL)}), "zip>gzip>jsonl"),
    "tar.gz": (_tar_gz("d/train.jsonl", JSONL), "gzip>tar>jsonl"),
    "base64 in a Python file": (b"DATA = '" + base64.b64encode(JSONL) + b"'\n", "text>jsonl"),
    "NumPy array of strings": (_npy(np.array(QUESTIONS)), "npy"),
    "NumPy array of objects": (_npy(np.array(QUESTIONS, dtype=object)), "npy"),
    "binary junk around it": (b"\x00\x01\xfe" * 100 + TEXT + b"\x00\xff" * 100, "binary"),
    "safetensors: a uint8 tensor": (_safetensors({"w": ("F32", bytes(16)), "stash": ("U8", TEXT)}), "safetensors"),
    "safetensors: its metadata": (_safetensors({"w": ("F32", bytes(16))}, {"notes": TEXT.decode()}), "safetensors"),
    "torch.save of plain data": (_torch({"rows": ROWS}), "zip>pickle"),
}


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_a_copy_is_found_in_every_container(name):
    data, kind = CONTAINERS[name]
    scan = scan_stream(io.BytesIO(data), "data.csv" if kind == "csv" else "f", INDEX)
    assert scan.budget.cut == [], scan.budget.cut
    assert scan.budget.kind.startswith(kind)
    assert scan.result.found(INDEX, 0.5) == list(range(len(QUESTIONS)))


def test_a_uint8_torch_tensor_is_read_and_float_storages_are_not():
    import torch

    data = _torch({"stash": torch.tensor(list(TEXT), dtype=torch.uint8), "w": torch.zeros(1000)})
    scan = scan_stream(io.BytesIO(data), "f", INDEX)
    assert scan.result.found(INDEX, 0.5) == list(range(len(QUESTIONS)))
    assert scan.budget.weights_bytes == 4000  # the float storage: weights, never read


def test_weights_are_read_for_their_header_only():
    weights = _safetensors({"model.layers.0.w": ("BF16", bytes(8 << 20))})
    scan = scan_stream(io.BytesIO(weights), "model.safetensors", INDEX)
    assert scan.budget.kind == "safetensors" and scan.budget.cut == []
    assert scan.budget.used < 1000 and scan.budget.weights_bytes == 8 << 20


def test_the_kind_comes_from_the_content_not_the_name():
    assert sniff(JSONL, "model.safetensors") == "text"
    assert sniff(pickle.dumps(ROWS), "notes.txt") == "pickle"
    assert sniff(_zip({"x": b"y"}), "weights.bin") == "zip"


def test_a_pickle_is_read_never_executed(tmp_path: Path):
    marker = tmp_path / "executed"

    class Boom:
        def __reduce__(self):
            return (Path.touch, (marker,))

    data = pickle.dumps([Boom(), *ROWS])
    # the check runs in a child (as in the recorder), so a stray import or unpickling would show
    code = (
        "import io, sys; from ptb_scorer.contamination import scan_stream; from ptb_scorer.ngrams import NgramIndex;"
        f"s = scan_stream(io.BytesIO(sys.stdin.buffer.read()), 'p', NgramIndex({QUESTIONS!r}, 13));"
        "print(len(s.result.found(NgramIndex([], 13), 0.5)) if False else len(s.result.hits))"
    )
    res = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == len(QUESTIONS)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (gzip.compress(b"a" * (3 << 20)), "over the 2097152-byte bound"),
        (_zip({"secret.jsonl": JSONL}), None),
        (gzip.compress(gzip.compress(gzip.compress(gzip.compress(gzip.compress(gzip.compress(JSONL)))))), "deeper"),
        (pickle.dumps(ROWS)[:-200], "not a whole pickle"),
        (_table(pq.write_table)[:-30], "not readable as parquet"),
    ],
    ids=["gzip bomb", "plain zip (control)", "nested past the depth", "a cut pickle", "a cut parquet"],
)
def test_a_file_not_read_in_full_says_why(data, why):
    scan = scan_stream(io.BytesIO(data), "f", INDEX, max_bytes=2 << 20)
    if why is None:
        assert scan.budget.cut == []
    else:
        assert any(why in c for c in scan.budget.cut), scan.budget.cut


def test_an_encrypted_zip_member_is_not_read_and_says_so():
    data = bytearray(_zip({"secret.jsonl": JSONL}))
    # set the encryption bit in the local and central headers (what zip -e leaves)
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.find(sig)
        flag = 6 if sig == b"PK\x03\x04" else 8
        data[at + flag] |= 1
    scan = scan_stream(io.BytesIO(bytes(data)), "f", INDEX)
    assert any("is encrypted" in c for c in scan.budget.cut)


def test_records_and_purity():
    own = [
        f"my own question number {i} is about apples and pears and how many of them a farmer sells" for i in range(5)
    ]
    mixed = JSONL + b"".join(json.dumps({"q": q}).encode() + b"\n" for q in own)
    pure = scan_stream(io.BytesIO(JSONL), "f", INDEX).result
    impure = scan_stream(io.BytesIO(mixed), "f", INDEX).result
    assert pure.pure and pure.records == len(QUESTIONS)
    assert not impure.pure and impure.records == len(QUESTIONS) + 5 and impure.records_matched == len(QUESTIONS)


def test_grams_never_span_records_but_do_span_pieces_of_one():
    words = QUESTIONS[0].split()
    half = len(words) // 2
    one = [Piece(" ".join(words[:half]), True), Piece(" ".join(words[half:]), False)]
    two = [Piece(" ".join(words[:half]), True), Piece(" ".join(words[half:]), True)]
    assert scan_text(INDEX, one).found(INDEX, 0.5) == [0]
    assert scan_text(INDEX, two).found(INDEX, 0.5) == []


def test_a_field_of_messages_reads_as_its_strings_in_order():
    value = [[{"role": "user", "content": "Find the probability of five heads"}]]
    assert field_text(value) == "role user content Find the probability of five heads"


def test_a_streamed_decode_of_a_big_text_keeps_grams_across_chunks():
    big = (b"filler words here " * 70000) + TEXT  # past one 1 MiB chunk
    budget = Budget(1 << 30)
    result = scan_text(INDEX, decode(io.BytesIO(big), "f", budget))
    assert result.found(INDEX, 0.5) == list(range(len(QUESTIONS)))


def test_the_agents_own_check(tmp_path: Path, capsys):
    """contamination_check.py (ptb_scorer.contamination.main) as the agent runs it: the
    judge's samples from test_set.json, any files and dirs, exit 1 past the tolerance."""
    from ptb_scorer.contamination import main, samples_sha256

    (tmp_path / "test.jsonl").write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    identity = {"spec": {"path": "test.jsonl", "fields": ["question"]}, "sha256": samples_sha256(QUESTIONS)}
    (tmp_path / "test_set.json").write_text(json.dumps({**identity, "n": 13, "sample_overlap": 0.5, "tolerated": 3}))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.jsonl").write_text('{"q": "what is two plus two"}\n')
    args = ["--test-set", str(tmp_path / "test_set.json")]
    assert main([*args, str(tmp_path / "data")]) == 0
    (tmp_path / "data" / "copy.pkl").write_bytes(pickle.dumps(ROWS[:4]))
    assert main([*args, str(tmp_path / "data")]) == 1
    out = capsys.readouterr().out
    assert "copy.pkl: 4 test samples (pickle)" in out and "4 of 60 test samples found in all (3 tolerated)" in out
    identity["sha256"] = "0" * 64  # the samples loaded here are not the judge's: said so
    (tmp_path / "test_set.json").write_text(json.dumps(identity))
    main([*args, str(tmp_path / "data")])
    assert "differ from the judge's" in capsys.readouterr().err
