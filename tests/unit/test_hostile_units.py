"""The pieces that keep a hostile agent's work on its side: delivery without links,
secret needles (plain and base64), attempts, bounded JSON, the untrusted-agent warning."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess

import pytest

from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import loads_bounded, read_record_bytes
from ptb_harness.core.secrets import base64_forms, secret_needles
from ptb_harness.runtime.delivery import deliver_file, deliver_tree
from ptb_harness.stages.attempts import begin_attempt, earlier_attempts, may_live, update_attempt
from ptb_harness.traces.redact import Redactor, secrets_from_env

KEY = "sk-test-7Hc2Qm9xLp4Rv8Zt"


def model(tmp_path, files=None):
    src = tmp_path / "job" / "final_model"
    src.mkdir(parents=True)
    for name, data in (files or {"config.json": b"{}", "sub/w.bin": b"\0" * 100}).items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    return src


def test_a_clean_model_is_moved_and_counted(tmp_path):
    src = model(tmp_path)
    got = deliver_tree(src, tmp_path / "cell" / "final_model", label="final_model", max_bytes=10**6, max_files=100)
    assert (got.present, got.files, got.size, got.problem) == (True, 2, 102, None)
    assert (tmp_path / "cell/final_model/sub/w.bin").stat().st_size == 100 and not src.exists()


@pytest.mark.parametrize(
    ("plant", "problem"),
    [
        (lambda m: (m / "tok.json").symlink_to("/etc/passwd"), "final_model/tok.json is a symbolic link"),
        (lambda m: (m / "w.safetensors").symlink_to("/dev/zero"), "final_model/w.safetensors is a symbolic link"),
        (lambda m: os.mkfifo(m / "pipe"), "final_model/pipe is a FIFO"),
        (lambda m: (m / "d").symlink_to("/etc", target_is_directory=True), "final_model/d is a symbolic link"),
    ],
)
def test_anything_but_files_and_dirs_refuses_the_whole_model(tmp_path, plant, problem):
    src = model(tmp_path)
    plant(src)
    dst = tmp_path / "cell" / "final_model"
    got = deliver_tree(src, dst, label="final_model", max_bytes=10**6, max_files=100)
    assert got.problem.startswith(problem) and got.files == 0
    assert list(dst.iterdir()) == []


def test_final_model_itself_a_link_too_big_or_absent(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "final_model").symlink_to("/etc")
    got = deliver_tree(job / "final_model", tmp_path / "c1", label="final_model", max_bytes=10**9, max_files=100)
    assert got.problem == "final_model is a symbolic link to /etc, not a directory; nothing delivered"
    big = model(tmp_path / "b", {"w.bin": b"x" * 2000})
    got = deliver_tree(big, tmp_path / "c2", label="final_model", max_bytes=1000, max_files=100)
    assert got.problem == "final_model holds more than 1e-06 GB; nothing delivered"
    got = deliver_tree(tmp_path / "none", tmp_path / "c3", label="final_model", max_bytes=1000, max_files=100)
    assert (got.present, got.problem) == (False, None) and (tmp_path / "c3").is_dir()


@pytest.mark.parametrize(
    "encode", [lambda v: v, lambda v: base64.b64encode(b"ab" + v + b"c"), base64.urlsafe_b64encode]
)
def test_secret_values_in_the_model_refuse_it(tmp_path, encode):
    src = model(tmp_path, {"config.json": b"{}", "notes.txt": b"x" * (9 << 20) + encode(KEY.encode()) + b"\n"})
    needles = secret_needles(secrets_from_env(["MY_API_KEY"], {"MY_API_KEY": KEY, "PATH": "/bin"}))
    got = deliver_tree(src, tmp_path / "cell", label="final_model", max_bytes=10**9, max_files=100, needles=needles)
    assert (
        got.problem.startswith("final_model contains the value of MY_API_KEY")
        and "final_model/notes.txt" in got.problem
    )


def test_a_model_of_too_many_files_is_refused_at_the_first_over_the_cap(tmp_path, monkeypatch):
    src = model(tmp_path, {f"d{i % 3}/f{i}": b"" for i in range(50)})
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(p) or real_scandir(p))
    got = deliver_tree(src, tmp_path / "cell", label="final_model", max_bytes=10**9, max_files=20)
    assert got.problem == "final_model holds more than 20 files and directories; nothing delivered"
    assert got.files == 0 and list((tmp_path / "cell").iterdir()) == [] and src.is_dir()
    assert len(listed) < 4, "the walk stopped at the cap instead of listing everything"
    # at the cap exactly (3 dirs + 50 files), it is delivered
    got = deliver_tree(src, tmp_path / "cell2", label="final_model", max_bytes=10**9, max_files=53)
    assert (got.problem, got.files) == (None, 50)


def test_across_filesystems_the_model_is_copied_beside_then_renamed_and_synced(tmp_path, monkeypatch):
    """A job dir on another filesystem than the results: rename fails with EXDEV (here
    made to, the stand-in for two mounts), and the tree is copied, synced once, renamed."""
    import ptb_harness.runtime.delivery as delivery

    src = model(tmp_path, {"config.json": b"{}", "a/b/w.bin": b"x" * 10, "a/c": b""})
    real_rename, syncs = os.rename, []

    def cross_device(a, b):
        if str(a) == str(src):
            raise OSError(18, "Invalid cross-device link")
        return real_rename(a, b)

    monkeypatch.setattr(os, "rename", cross_device)
    monkeypatch.setattr(delivery, "sync_filesystem", lambda p: syncs.append(os.path.basename(p)))
    dst = tmp_path / "cell" / "final_model"
    (dst.parent / ".final_model.partial-old").mkdir(parents=True)  # a crashed try's leftover
    got = delivery.deliver_tree(src, dst, label="final_model", max_bytes=10**9, max_files=100)
    assert (got.problem, got.files, got.size) == (None, 3, 12)
    assert (dst / "a/b/w.bin").read_bytes() == b"x" * 10 and (dst / "a/c").exists()
    assert sorted(p.name for p in dst.parent.iterdir()) == ["final_model"]  # no partial left
    assert len(syncs) == 2 and syncs[0].startswith(".final_model.partial-") and syncs[1] == "final_model"


def test_base64_forms_match_in_any_alignment():
    for pre in (b"", b"a", b"ab", b"abc"):
        for suf in (b"", b"z", b"zz"):
            enc = base64.b64encode(pre + KEY.encode() + suf)
            assert any(f in enc for f in base64_forms(KEY.encode())), (pre, suf)


def test_the_sanitizer_redacts_base64_and_oddly_named_secrets():
    env = {"DB_PASSWD": "hunter2-but-longer", "MY_API_KEY": KEY, "OTHER": "ordinary-value-123"}
    red = Redactor(secrets_from_env([], env))
    text = b"pw hunter2-but-longer b64 " + base64.b64encode(KEY.encode()) + b" ordinary-value-123"
    out = red(text)
    assert b"hunter2" not in out and b"[REDACTED:DB_PASSWD]" in out
    assert base64.b64encode(KEY.encode())[:20] not in out and b"[REDACTED:MY_API_KEY:base64]" in out
    assert b"ordinary-value-123" in out  # not a secret by name, and in no list


def test_the_trace_is_delivered_only_as_a_regular_file(tmp_path):
    (tmp_path / "t").write_text("trace")
    assert deliver_file(tmp_path / "t", tmp_path / "out" / "solve_out.txt", "the trace") is None
    (tmp_path / "l").symlink_to("/etc/passwd")
    assert deliver_file(tmp_path / "l", tmp_path / "o2", "the trace") == "the trace is a symbolic link; not delivered"


def test_bounded_json_never_raises():
    assert loads_bounded(b"[" * 100_000 + b"]" * 100_000)[1].startswith("JSON nested deeper than 64")
    assert loads_bounded(b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}")[1].startswith("JSON nested deeper")
    assert loads_bounded(b"\xff\xfe")[1].startswith("not valid JSON")
    assert loads_bounded(b'{"a": 1}') == ({"a": 1}, "")


def test_record_reads_refuse_links_devices_and_size(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 2000)
    assert read_record_bytes(tmp_path / "big", 1000) == (None, "2000 bytes, more than the 1000 it may have")
    (tmp_path / "z").symlink_to("/dev/zero")
    assert read_record_bytes(tmp_path / "z", 1000)[1].startswith("cannot be read")
    assert read_record_bytes(tmp_path / "missing", 1000) == (None, "")


def test_a_record_read_says_whether_anything_is_there_as_lexists_does(tmp_path):
    """One open answers both what a record holds and whether its name is taken (a link,
    dangling or not, a directory, a broken file): what os.path.lexists would say."""
    from ptb_harness.core.records import read_json_dict_present

    (tmp_path / "ok.json").write_text('{"a": 1}')
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "link.json").symlink_to(tmp_path / "ok.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere")
    for name in ("ok.json", "broken.json", "list.json", "dir.json", "link.json", "dangling.json", "missing.json"):
        obj, present = read_json_dict_present(tmp_path / name)
        assert present == os.path.lexists(tmp_path / name), name
        assert obj == ({"a": 1} if name == "ok.json" else None), name


def test_deep_json_is_refused_however_few_its_brackets_elsewhere():
    """The bracket count only skips the depth walk where nesting that deep is impossible."""
    assert loads_bounded("[" * 64 + "]" * 64)[1] == ""
    assert loads_bounded("[" * 65 + "]" * 65)[1].startswith("JSON nested deeper than 64")
    assert loads_bounded('{"a": "' + "[" * 100 + '"}') == ({"a": "[" * 100}, "")


@pytest.mark.parametrize("told", [0, 10, 5000, 200_000])
def test_a_record_is_read_whole_up_to_its_limit_whatever_size_it_was_said_to_have(tmp_path, told):
    """A record is read by the size fstat gave; one that grew after (told less than it
    holds) is read on, and none is read past the limit."""
    from ptb_harness.core.records import _read_up_to

    data = bytes(range(256)) * 400  # 102,400 bytes
    (tmp_path / "r").write_bytes(data)
    fd = os.open(tmp_path / "r", os.O_RDONLY)
    try:
        assert _read_up_to(fd, 200_000, told) == data
        assert os.pread(fd, 1, 0) == data[:1]
        os.lseek(fd, 0, os.SEEK_SET)
        assert _read_up_to(fd, 70_000, told) == data[:70_000]
    finally:
        os.close(fd)
    assert read_record_bytes(tmp_path / "r", len(data)) == (data, "")


def test_attempts_refuse_while_an_earlier_one_lives_then_count(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    first = begin_attempt(cell, {})
    # a process of the first try that outlived its harness: the agent's session lives on
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        update_attempt(cell, first["n"], agent_pid=orphan.pid, status="running", harness_pid=-1)
        assert "its processes still run" in may_live(
            json.loads((cell / "solve.attempts.json").read_text())["attempts"][0]
        )
        with pytest.raises(HarnessError, match="not solving it again while it may run"):
            begin_attempt(cell, {})
    finally:
        orphan.kill()
        orphan.wait()
    second = begin_attempt(cell, {})
    assert second["n"] == 2
    [earlier] = earlier_attempts(cell, 2)
    assert earlier["status"] == "died without a record" and earlier["agent_pid"] == orphan.pid
    # another host cannot be checked from here, unless the operator says it is gone
    update_attempt(cell, 2, host="gpu-node-9")
    with pytest.raises(HarnessError, match="cannot be checked from here"):
        begin_attempt(cell, {})
    assert begin_attempt(cell, {"PTB_EARLIER_ATTEMPT_GONE": str(cell)})["n"] == 3
    assert socket.gethostname()


def test_runtime_none_warns_about_untrusted_agents(tmp_path):
    from conftest import make_workdir

    from ptb_harness.campaign.config import load_config_files

    workdir = make_workdir(tmp_path / "w")
    warning = load_config_files(workdir).untrusted_warning()
    assert warning.startswith("WARNING: site.runtime none runs exit0 unconfined")
    (workdir / "agents" / "exit0" / "agent.json").write_text('{"trusted": true}')
    assert load_config_files(workdir).untrusted_warning() is None
