"""Every text a file holds, whatever it is saved as: what the n-gram check reads.

A file's kind is read from its content, never its name (a ``.pkl`` of plain data, a
``.bin`` of JSON lines, a ``.safetensors`` that is a zip): text in any of UTF-8, UTF-16
and UTF-32 (a BOM, or the NUL pattern of UTF-16), JSON and JSON lines (strings decoded,
so ``\\u`` escapes hide nothing), CSV, Parquet and Arrow (file and stream: what
``datasets`` writes), pickle (its strings read opcode by opcode with ``pickletools``:
nothing is executed), gzip, bzip2, xz, zip and tar (members decoded in turn, nested up to
``MAX_DEPTH``), NumPy arrays of text or bytes; escaped (``\\u0041``, ``\\x41``) and
base64 runs inside any text are decoded too. Weights are told by their headers
(safetensors, torch's zip, GGUF) and only their text is read: names, metadata, and byte
tensors (``U8``, ``I8``) up to ``TENSOR_TEXT_MAX``, where text can be stashed. Anything
else is binary and its printable runs are read (``strings``).

Everything is bounded (``Budget``): bytes decoded per file, members, depth, what is held
in memory for formats that need random access. A file that is not read in full (over a
bound, an encrypted or corrupt member, a format that fails to parse partway) says why in
``Budget.cut``: its evidence is incomplete, which the judge counts as a failure, never as
"nothing found".
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import csv
import gzip
import io
import json
import lzma
import pickletools
import re
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ptb_scorer.ngrams import Piece

CHUNK = 1 << 20
HEAD = 1 << 16
MAX_DEPTH = 4
MAX_MEMBERS = 100_000
#: what a format needing random access (zip, Parquet, Arrow file) may hold in memory
#: when it comes out of a compressed stream
MEMORY_MAX = 256 << 20
#: a JSON document parsed whole up to this size (else read line by line)
JSON_WHOLE_MAX = 64 << 20
TENSOR_TEXT_MAX = 64 << 20
SAFETENSORS_HEADER_MAX = 100 << 20
#: GGUF's metadata (its vocabulary included) lies in its first bytes
GGUF_TEXT_MAX = 32 << 20

_STRINGS = re.compile(rb"[\x20-\x7e\t\n\r]{16,}")
_ESCAPES = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")
#: a base64 run (standard or URL-safe), matched from its start only (the look-behind keeps
#: the search linear in the text)
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{80,}={0,2}")
_STR_OPS = frozenset(
    {"UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
)
_BYTES_OPS = frozenset({"BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8"})
#: safetensors dtypes whose bytes may be text
_BYTE_DTYPES = frozenset({"U8", "I8", "BOOL"})


@dataclass
class Budget:
    """What decoding one file may cost, and what it cost."""

    max_bytes: int
    max_members: int = MAX_MEMBERS
    used: int = 0
    members: int = 0
    #: why the file was not read in full (empty: it was)
    cut: list[str] = field(default_factory=list)
    #: what it was read as, outermost first ("gzip", "jsonl")
    kinds: list[str] = field(default_factory=list)
    #: bytes of weights not read (tensors, storages)
    weights_bytes: int = 0
    #: what running out of memory while decoding is called in ``cut`` (a caller that caps
    #: its memory names its cap)
    out_of_memory: str = "out of memory"

    def take(self, n: int, where: str) -> bool:
        """Count n more bytes; False (and why) past the bound."""
        if self.used + n > self.max_bytes:
            self.stop(f"{where}: over the {self.max_bytes}-byte bound of what one file may decode")
            return False
        self.used += n
        return True

    def stop(self, why: str) -> None:
        if why not in self.cut and len(self.cut) < 20:
            self.cut.append(why)

    @property
    def kind(self) -> str:
        return ">".join(self.kinds[:6]) or "empty"


# -- what a file is ------------------------------------------------------------------------


def _is_safetensors(head: bytes) -> bool:
    if len(head) < 10:
        return False
    n = int.from_bytes(head[:8], "little")
    return 2 <= n <= SAFETENSORS_HEADER_MAX and head[8:9] == b"{"


_MAGIC = (
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PAR1", "parquet"),
    (b"ARROW1", "arrow"),
    (b"GGUF", "gguf"),
    (b"\x93NUMPY", "npy"),
    (b"\x89HDF\r\n\x1a\n", "binary"),
)


def sniff(head: bytes, name: str = "") -> str:
    """The kind of a file from its first bytes (and, for CSV only, its name)."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:3] == b"BZh" and head[4:10] == b"1AY&SY":
        return "bz2"
    if _is_safetensors(head):
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if head[:4] == b"\xff\xff\xff\xff" and len(head) >= 8:
        return "arrow_stream"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    encoding = text_encoding(head)
    if encoding is None:
        return "binary"
    return "csv" if name.lower().endswith((".csv", ".tsv")) else "text"


def text_encoding(head: bytes) -> str | None:
    """The text encoding of a file starting with head, or None when it is not text."""
    for bom, enc in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if head.startswith(bom):
            return enc
    if b"\0" not in head[:8192]:
        return "utf-8"
    sample = head[:4096]
    if len(sample) >= 16 and sample[1::2].count(0) > 0.9 * (len(sample) // 2) and sample[0::2].count(0) < 4:
        return "utf-16-le"  # ASCII-range text in UTF-16 without a BOM
    if len(sample) >= 16 and sample[0::2].count(0) > 0.9 * (len(sample) // 2) and sample[1::2].count(0) < 4:
        return "utf-16-be"
    return None


def bytes_text(data: bytes) -> str:
    """Bytes as text: UTF-32 or UTF-16 when their NULs say so (NumPy's string arrays are
    UTF-32), else UTF-8; NULs as spaces."""
    sample = data[:4096]
    high = sample[1::4].count(0) + sample[2::4].count(0) + sample[3::4].count(0)
    if len(sample) >= 16 and sample[0::4].count(0) < len(sample) // 16 and high > 0.9 * 3 * (len(sample) // 4):
        return data.decode("utf-32-le", "replace").replace("\0", " ")
    enc = text_encoding(sample) if b"\0" in sample else "utf-8"
    return data.decode(enc or "utf-8", "replace").replace("\0", " ")


# -- reading -------------------------------------------------------------------------------


class Peeked(io.RawIOBase):
    """A stream whose first bytes were read to sniff it, read again from the start."""

    def __init__(self, head: bytes, rest: IO[bytes]):
        self.head, self.rest, self.pos = head, rest, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos < len(self.head):
            n = min(len(b), len(self.head) - self.pos)
            b[:n] = self.head[self.pos : self.pos + n]
            self.pos += n
            return n
        data = self.rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def _peek(stream: IO[bytes], n: int = HEAD) -> bytes:
    """The stream's next bytes, left unread."""
    if hasattr(stream, "peek"):
        return stream.peek(n)[:n]
    pos = stream.tell()
    head = stream.read(n)
    stream.seek(pos)
    return head


def _chunks(stream: IO[bytes], budget: Budget, where: str) -> Iterator[bytes]:
    while True:
        data = stream.read(CHUNK)
        if not data:
            return
        if not budget.take(len(data), where):
            return
        yield data


def _in_memory(stream: IO[bytes], budget: Budget, where: str) -> io.BytesIO | None:
    """The whole stream in memory (formats that need random access), within bounds."""
    if stream.seekable():
        return stream  # type: ignore[return-value]
    data = stream.read(MEMORY_MAX + 1)
    if len(data) > MEMORY_MAX:
        budget.stop(f"{where}: over {MEMORY_MAX} bytes inside a compressed stream (a format read at random)")
        return None
    if not budget.take(len(data), where):
        return None
    return io.BytesIO(data)


def decode(stream: IO[bytes], name: str, budget: Budget, depth: int = 0) -> Iterator[Piece]:
    """Every text of the stream, as pieces; what could not be read is in budget.cut."""
    if depth > MAX_DEPTH:
        budget.stop(f"{name}: nested deeper than {MAX_DEPTH} containers")
        return
    head = stream.read(HEAD)
    if not head:
        return
    kind = sniff(head, name)
    if len(budget.kinds) < 64:
        budget.kinds.append(kind)
    else:  # a listing of every member's kind is not kept; the current one is
        budget.kinds[-1] = kind
    if stream.seekable():
        stream.seek(0)
    else:
        stream = io.BufferedReader(Peeked(head, stream), CHUNK)
    try:
        yield from _DECODERS[kind](stream, name, budget, depth)
    except (OSError, EOFError, ValueError, KeyError, IndexError, struct.error, zipfile.BadZipFile) as e:
        # ImportError is not caught: a missing reader is the harness's fault, not the file's
        budget.stop(f"{name}: not readable as {kind} ({type(e).__name__}: {str(e)[:200]})")
    except MemoryError:  # a bomb (an Arrow buffer that decompresses a thousandfold): the memory, not the file
        budget.stop(f"{name}: {budget.out_of_memory} reading it as {kind}")
    except (tarfile.TarError, lzma.LZMAError, RecursionError) as e:
        budget.stop(f"{name}: not readable as {kind} ({type(e).__name__})")


# -- text ----------------------------------------------------------------------------------


def _text(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """Plain text (JSON and JSON lines told by their first character), in chunks cut at
    line ends, each with its decoded renditions."""
    head = _peek(stream)
    enc = text_encoding(head) or "utf-8"
    first = head.decode(enc, "replace").lstrip("\ufeff \t\r\n")[:1]
    if first in ("{", "["):
        yield from _json(stream, name, budget, depth, enc)
        return
    yield from _plain(stream, name, budget, depth, enc)


def _lines_of(stream: IO[bytes], name: str, budget: Budget, enc: str) -> Iterator[str]:
    """The text in chunks of about CHUNK ending at a line end (a longer line is cut)."""
    decoder = codecs.getincrementaldecoder(enc)("replace")
    carry = ""
    for data in _chunks(stream, budget, name):
        text = carry + decoder.decode(data)
        end = text.rfind("\n")
        if end < 0 and len(text) < 16 * CHUNK:
            carry = text
            continue
        end = len(text) if end < 0 else end + 1
        carry = text[end:]
        yield text[:end]
    carry += decoder.decode(b"", final=True)
    if carry:
        yield carry


def _plain(stream: IO[bytes], name: str, budget: Budget, depth: int, enc: str) -> Iterator[Piece]:
    first = True
    for text in _lines_of(stream, name, budget, enc):
        yield Piece(text, first)
        first = False
        yield from renditions(text, name, budget, depth)


def renditions(text: str, name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """What a text hides: its escapes decoded, and its long base64 runs decoded (and read
    as files of their own)."""
    if len(_ESCAPES.findall(text[:65536])) >= 8 or (len(text) > 65536 and _ESCAPES.search(text)):
        yield Piece(_ESCAPES.sub(_unescape, text), True)
    for m in _BASE64.finditer(text):
        if len(set(m.group(0)[:256])) < 16:
            continue  # a run of a few letters ("xxxx..."), not encoded data
        raw = _b64(m.group(0))
        if raw is not None and len(raw) >= 48:
            yield from decode(io.BytesIO(raw), f"{name} (base64 at {m.start()})", budget, depth + 1)


def _unescape(m: re.Match) -> str:
    try:
        return chr(int(m.group(0)[2:], 16))
    except ValueError:
        return m.group(0)


def _b64(run: str) -> bytes | None:
    try:
        if "-" in run or "_" in run:
            return base64.urlsafe_b64decode(run + "=" * (-len(run) % 4))
        return base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


# -- JSON ----------------------------------------------------------------------------------


def _json(stream: IO[bytes], name: str, budget: Budget, depth: int, enc: str) -> Iterator[Piece]:
    """A JSON document (each element of its top list, or value of its top object, a
    record), or JSON lines (each line a record; a line that is no JSON is text)."""
    if stream.seekable():
        size = stream.seek(0, io.SEEK_END)
        stream.seek(0)
        if size <= JSON_WHOLE_MAX:
            data = stream.read()
            if not budget.take(len(data), name):
                return
            try:
                doc = json.loads(data.decode(enc, "replace"))
            except ValueError:
                doc = None
            if doc is not None:
                budget.kinds[-1] = "json"
                yield from _records(doc, name, budget, depth)
                return
            budget.used -= len(data)
            stream.seek(0)
    budget.kinds[-1] = "jsonl"
    for text in _lines_of(stream, name, budget, enc):
        for line in text.splitlines():
            yield from _json_line(line, name, budget, depth)


def _json_line(line: str, name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    if not line.strip():
        return
    if "\\" not in line:  # nothing escaped: the line's own text is what its strings say
        yield Piece(line, True)
        if len(line) >= 80:
            yield from renditions(line, name, budget, depth)
        return
    try:
        value = json.loads(line)
    except ValueError:
        yield Piece(line, True)
        yield from renditions(line, name, budget, depth)
        return
    yield from _value(value, name, budget, depth, new_record=True)


def _records(doc: Any, name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    if isinstance(doc, list):
        items = doc
    elif isinstance(doc, dict):
        items = [[k, v] for k, v in doc.items()]
    else:
        items = [doc]
    for item in items:
        yield from _value(item, name, budget, depth, new_record=True)


def _value(value: Any, name: str, budget: Budget, depth: int, new_record: bool) -> Iterator[Piece]:
    """The strings of a value (keys included), as one record."""
    stack = [value]
    first = new_record
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield Piece(v, first)
            first = False
            if len(v) >= 80:
                yield from (Piece(p.text, False) for p in renditions(v, name, budget, depth))
        elif isinstance(v, bytes | bytearray):
            yield Piece(bytes_text(bytes(v)), first)
            first = False
        elif isinstance(v, dict):
            stack.extend(reversed([x for kv in v.items() for x in kv]))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))


# -- CSV -----------------------------------------------------------------------------------


def _csv(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """Each row a record, its fields' text joined."""
    enc = text_encoding(_peek(stream)) or "utf-8"
    delimiter = "\t" if name.lower().endswith(".tsv") else ","
    csv.field_size_limit(16 * CHUNK)
    counted = io.BufferedReader(_Counted(stream, budget, name), CHUNK)
    text = io.TextIOWrapper(counted, encoding=enc, errors="replace", newline="")
    for row in csv.reader(text, delimiter=delimiter):
        joined = " ".join(row)
        yield Piece(joined, True)
        yield from renditions(joined, name, budget, depth)


class _Counted(io.RawIOBase):
    """A stream whose reads count against the budget."""

    def __init__(self, stream: IO[bytes], budget: Budget, name: str):
        self.stream, self.budget, self.name = stream, budget, name

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.stream.read(len(b))
        if not self.budget.take(len(data), self.name):
            return 0
        b[: len(data)] = data
        return len(data)


# -- compressed streams and archives --------------------------------------------------------


def _gzip(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    with gzip.GzipFile(fileobj=stream, mode="rb") as inner:
        yield from decode(_Unseekable(inner), name, budget, depth + 1)


def _bz2(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    with bz2.BZ2File(stream, "rb") as inner:
        yield from decode(_Unseekable(inner), name, budget, depth + 1)


def _xz(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    with lzma.LZMAFile(stream, "rb") as inner:
        yield from decode(_Unseekable(inner), name, budget, depth + 1)


class _Unseekable(io.RawIOBase):
    """A member stream read forward only (so decode() does not seek into it)."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.stream.read(len(b))
        b[: len(data)] = data
        return len(data)


def _zip(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """Each member decoded in turn; a torch checkpoint's tensor storages are weights."""
    seekable = _in_memory(stream, budget, name)
    if seekable is None:
        return
    with zipfile.ZipFile(seekable) as zf:
        infos = zf.infolist()
        torch_storage = _torch_storages(infos)
        if torch_storage:
            budget.kinds[-1] = "torch-zip"
        byte_storages = _byte_storage_names(zf, infos, budget, name) if torch_storage else set()
        for info in infos:
            if info.is_dir():
                continue
            if not _count_member(budget, name):
                return
            if info.filename in torch_storage and not (
                info.filename in byte_storages and info.file_size <= TENSOR_TEXT_MAX
            ):
                budget.weights_bytes += info.file_size
                continue
            if info.flag_bits & 0x1:
                budget.stop(f"{name}: member {info.filename!r} is encrypted")
                continue
            with zf.open(info) as member:
                yield from decode(_Unseekable(member), f"{name}:{info.filename}", budget, depth + 1)


def _byte_storage_names(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], budget: Budget, name: str) -> set[str]:
    """The members of a torch checkpoint that hold byte storages (text may hide there)."""
    out = set()
    for info in infos:
        if info.filename.endswith("data.pkl"):
            root = info.filename[: -len("data.pkl")]
            with zf.open(info) as f:
                out |= {f"{root}data/{key}" for key in _torch_byte_storages(f, budget, name)}
    return out


def _torch_storages(infos: list[zipfile.ZipInfo]) -> set[str]:
    """The tensor storages of a torch.save zip (<root>/data/<n> beside <root>/data.pkl)."""
    roots = {i.filename[: -len("data.pkl")] for i in infos if i.filename.endswith("data.pkl")}
    return {
        i.filename
        for i in infos
        for r in roots
        if i.filename.startswith(r + "data/") and i.filename[len(r) + 5 :].isdigit()
    }


def _count_member(budget: Budget, name: str) -> bool:
    budget.members += 1
    if budget.members > budget.max_members:
        budget.stop(f"{name}: more than {budget.max_members} archive members")
        return False
    return True


def _tar(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    with tarfile.open(fileobj=stream, mode="r|*") as tf:
        for member in tf:
            if not member.isfile():
                continue
            if not _count_member(budget, name):
                return
            f = tf.extractfile(member)
            if f is not None:
                yield from decode(_Unseekable(f), f"{name}:{member.name}", budget, depth + 1)


# -- tables --------------------------------------------------------------------------------


def _table_rows(batches: Iterator[Any], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    for batch in batches:
        if not budget.take(batch.nbytes, name):
            return
        for row in batch.to_pylist():
            yield from _value(row, name, budget, depth, new_record=True)


def _parquet(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    import pyarrow.parquet as pq

    seekable = _in_memory(stream, budget, name)
    if seekable is None:
        return
    import pyarrow as pa

    try:
        pf = pq.ParquetFile(seekable)
        # what the columns decompress to, before any is (a small file can expand a thousandfold)
        size = sum(pf.metadata.row_group(i).total_byte_size for i in range(pf.metadata.num_row_groups))
        if budget.used + size > budget.max_bytes:
            budget.stop(f"{name}: its {size} bytes of columns are over the {budget.max_bytes}-byte bound")
            return
        yield from _table_rows(pf.iter_batches(batch_size=4096), name, budget, depth)
    except MemoryError:  # pa.ArrowMemoryError among them: decode() says so
        raise
    except pa.ArrowException as e:
        budget.stop(f"{name}: not readable as parquet ({str(e)[:200]})")


def _arrow(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    seekable = _in_memory(stream, budget, name)
    if seekable is None:
        return
    try:
        if budget.kinds[-1] == "arrow":
            reader = ipc.open_file(seekable)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            batches = iter(ipc.open_stream(seekable))
        yield from _table_rows(batches, name, budget, depth)
    except MemoryError:  # pa.ArrowMemoryError among them: decode() says so
        raise
    except pa.ArrowException as e:
        if budget.kinds[-1] == "arrow_stream" and not budget.used:
            budget.kinds[-1] = "binary"
            seekable.seek(0)
            yield from _strings(seekable, name, budget, depth)
            return
        budget.stop(f"{name}: not readable as {budget.kinds[-1]} ({str(e)[:200]})")


# -- pickle, arrays, weights ---------------------------------------------------------------


class _PickleReader:
    """What pickletools reads a pickle through: counted against the budget, no seeking."""

    def __init__(self, stream: IO[bytes], budget: Budget, name: str):
        self.stream, self.budget, self.name = stream, budget, name

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        if not self.budget.take(len(data), self.name):
            raise ValueError("over the bound")
        return data

    def readline(self) -> bytes:
        data = self.stream.readline(1 << 20)
        if not self.budget.take(len(data), self.name):
            raise ValueError("over the bound")
        return data


def pickle_strings(stream: IO[bytes], budget: Budget, name: str) -> Iterator[tuple[str, str]]:
    """(opcode name, text) of every string a pickle holds, opcode by opcode (pickletools:
    nothing is executed); GLOBAL names too. A pickle that ends early, or an opcode that is
    not one, is cut (in budget.cut)."""
    try:
        for op, arg, _pos in pickletools.genops(_PickleReader(stream, budget, name)):
            if op.name in _STR_OPS and isinstance(arg, str | bytes):
                yield op.name, arg if isinstance(arg, str) else arg.decode("utf-8", "replace")
            elif op.name in _BYTES_OPS and isinstance(arg, bytes | bytearray):
                yield op.name, bytes_text(bytes(arg))
            elif op.name in ("GLOBAL", "STACK_GLOBAL"):
                yield op.name, str(arg or "")
    except ValueError as e:
        budget.stop(f"{name}: not a whole pickle ({str(e)[:200]})")


def _pickle(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """The strings of a pickle as one record; what follows its STOP (a legacy torch file's
    storages) read as binary."""
    first = True
    for op, text in pickle_strings(stream, budget, name):
        if op.endswith("GLOBAL"):
            continue
        yield Piece(text, first)
        first = False
        if len(text) >= 80:
            yield from renditions(text, name, budget, depth)
    if not budget.cut:
        yield from _strings(stream, name, budget, depth)


#: torch's storage classes whose bytes may be text (uint8, int8, bool)
_BYTE_STORAGES = frozenset({"ByteStorage", "CharStorage", "BoolStorage", "uint8", "int8", "bool"})


def _torch_byte_storages(data_pkl: IO[bytes], budget: Budget, name: str) -> set[str]:
    """The keys of a torch checkpoint's byte storages, from its data.pkl: each storage's
    persistent id names its class (``torch ByteStorage``) or dtype, then its key."""
    keys, recent, byte_typed = set(), ["", ""], False
    for op, text in pickle_strings(data_pkl, budget, name):
        if op == "GLOBAL":
            byte_typed = text.rsplit(" ", 1)[-1] in _BYTE_STORAGES
        elif op == "STACK_GLOBAL":
            byte_typed = recent[-1] in _BYTE_STORAGES
        elif byte_typed and text.isdigit():
            keys.add(text)
            byte_typed = False
        recent = [recent[-1], text]
    return keys


def _npy(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """A NumPy array: text and byte arrays decoded, object arrays as the pickle they are,
    numbers as weights."""
    magic = stream.read(8)
    hlen = struct.unpack("<H" if magic[6] == 1 else "<I", stream.read(2 if magic[6] == 1 else 4))[0]
    header = ast.literal_eval(stream.read(hlen).decode("latin-1"))
    descr = str(header.get("descr", "")) if isinstance(header, dict) else ""
    if descr[1:2] == "U":
        enc = "utf-32-be" if descr[0] == ">" else "utf-32-le"
        for data in _chunks(stream, budget, name):
            yield Piece(data.decode(enc, "replace").replace("\0", " "), False)
    elif descr[1:2] in ("S", "V") or descr in ("|u1", "|i1", "|b1"):
        for data in _chunks(stream, budget, name):
            yield Piece(data.replace(b"\0", b" ").decode("utf-8", "replace"), False)
    elif descr[1:2] == "O":
        yield from _pickle(stream, name, budget, depth)
    else:
        budget.kinds[-1] = "npy-weights"


def _safetensors(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """Weights: the header's text (tensor names, metadata) and the byte tensors' bytes."""
    seekable = _in_memory(stream, budget, name)
    if seekable is None:
        return
    stream = seekable
    n = int.from_bytes(stream.read(8), "little")
    raw = stream.read(n)
    if not budget.take(n, name):
        return
    header = json.loads(raw)
    yield from _value(header, name, budget, depth, new_record=True)
    base = 8 + n
    for key, spec in header.items() if isinstance(header, dict) else ():
        if key == "__metadata__" or not isinstance(spec, dict):
            continue
        start, end = (spec.get("data_offsets") or [0, 0])[:2]
        size = int(end) - int(start)
        if spec.get("dtype") in _BYTE_DTYPES and 0 < size <= TENSOR_TEXT_MAX and budget.take(size, name):
            stream.seek(base + int(start))
            yield Piece(stream.read(size).replace(b"\0", b" ").decode("utf-8", "replace"), True)
        else:
            budget.weights_bytes += max(size, 0)


def _gguf(stream: IO[bytes], name: str, budget: Budget, depth: int) -> Iterator[Piece]:
    """Weights: the printable runs of the metadata at its start."""
    yield from _strings(io.BytesIO(stream.read(GGUF_TEXT_MAX)), name, budget, depth)


def _strings(stream: IO[bytes], name: str, budget: Budget, depth: int, counted: bool = False) -> Iterator[Piece]:
    """The printable runs of 16 bytes or more of binary data, as one record."""
    carry = b""
    first = True
    reads = iter(lambda: stream.read(CHUNK), b"") if counted else _chunks(stream, budget, name)
    for data in reads:
        data = carry + data
        runs = list(_STRINGS.finditer(data))
        # a run at the end may go on in the next chunk: its end is read again with it
        carry = data[-4096:] if runs and runs[-1].end() == len(data) else b""
        text = "\n".join(m.group(0).decode("ascii") for m in runs)
        if text:
            yield Piece(text, first)
            first = False


_DECODERS = {
    "text": _text,
    "csv": _csv,
    "zip": _zip,
    "gzip": _gzip,
    "bz2": _bz2,
    "xz": _xz,
    "tar": _tar,
    "parquet": _parquet,
    "arrow": _arrow,
    "arrow_stream": _arrow,
    "pickle": _pickle,
    "npy": _npy,
    "safetensors": _safetensors,
    "gguf": _gguf,
    "binary": _strings,
}
#: kinds that are weights: only their text is read
WEIGHTS = frozenset({"safetensors", "gguf", "torch-zip", "npy-weights"})
