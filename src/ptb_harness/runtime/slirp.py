"""The bwrap sandbox's own network with the internet but not the host: slirp4netns.

``python -I -S slirp.py --slirp4netns P --nsenter P --ip P -- BWRAP ARGS...`` starts bwrap
(which unshares the network) held before its command (``--block-fd``), and, in the new
network namespace, from outside:

1. ``prohibit`` routes to each of the host's own IPv4 addresses and to link-local
   169.254.0.0/16 (cloud metadata services): slirp4netns makes the sandbox's connections
   from the host, so without them a service the host binds to 0.0.0.0 (or to its own
   address) would be reachable at that address. The agent holds no capability in its
   namespaces, so it cannot remove them;
2. slirp4netns, with ``--disable-host-loopback`` (10.0.2.2 does not lead to the host's
   127.0.0.1), its own sandbox and seccomp filter; the sandbox's DNS is slirp's 10.0.2.3
   (``resolv.conf`` beside this file), which forwards to the host's resolver.

Then it lets the command start, waits for bwrap and ends as bwrap ended (its exit code,
or the signal that killed it). slirp4netns ends with it (``--exit-fd``). No IPv6: the
sandbox has none (slirp4netns without ``--enable-ipv6``), so no host IPv6 address either.

Stdlib only, importing nothing of the harness (it runs as its own small process; the
namespaces are joined through the namespace files bwrap's child holds, by descriptor).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

#: ioctl(NS_GET_USERNS): the user namespace that owns a namespace (linux/nsfs.h)
_NS_GET_USERNS = 0xB701
#: routed nowhere from inside, besides the host's own addresses
ALWAYS_BLOCKED = ("169.254.0.0/16",)
#: the exit code when the network could not be set up (the command never started)
NETWORK_FAILED = 125
READY_TIMEOUT_S = 60


def host_addresses(fib_trie: str) -> list[str]:
    """The host's own IPv4 addresses (``/proc/net/fib_trie``'s ``host LOCAL`` entries) as
    ADDR/PREFIX, loopback left out (it never leaves the sandbox's own ``lo``)."""
    found, last = [], None
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|-- "):
            last = text[4:]
        elif text.endswith("host LOCAL") and last is not None and not last.startswith("127."):
            entry = f"{last}{text.split()[0]}"  # "/32 host LOCAL" -> ADDR/32
            if entry not in found:
                found.append(entry)
    return found


def blocked_routes(fib_trie: str) -> list[str]:
    """``ip -batch`` lines: a prohibit route for each address the sandbox must not reach."""
    return [f"route add prohibit {net}" for net in [*host_addresses(fib_trie), *ALWAYS_BLOCKED]]


def _read_info(fd: int) -> dict | None:
    """bwrap's --info-fd JSON (child-pid, namespaces), or None when bwrap ended first."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    return None


class _Sandbox:
    """The bwrap process and its child (the sandbox's pid 1, held before the command)."""

    def __init__(self, bwrap: subprocess.Popen, child: int):
        self.bwrap, self.child = bwrap, child

    def fail(self, why: str) -> None:
        """One line, and the sandbox stopped before its command ever ran."""
        print(f"[harness] network: {why}", file=sys.stderr, flush=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.child, signal.SIGKILL)  # bwrap's own child: the whole PID namespace goes
        self.bwrap.kill()
        self.bwrap.wait()
        raise SystemExit(NETWORK_FAILED)

    def wait_for_uid_map(self) -> None:
        """Until the child has written its user namespace's uid map: started by root (or
        any non-setuid bwrap), bwrap writes it from the child after --info-fd, and a
        process that joins the namespace before has no capability there (measured: 3 of
        8 concurrent launches failed their routes with EPERM)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{self.child}/uid_map") as f:
                    if f.read().strip():
                        return
            except OSError:
                self.fail("the sandbox ended before its network was set up")
            time.sleep(0.002)
        self.fail("the sandbox's user namespace got no uid map")


def _last_line(f) -> str:
    f.seek(0)
    lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _route(tools: dict[str, str], user_fd: int, net_fd: int, box: _Sandbox) -> None:
    with open("/proc/net/fib_trie") as f:
        batch = "\n".join(blocked_routes(f.read())) + "\n"
    argv = [tools["nsenter"], f"--user=/proc/self/fd/{user_fd}", f"--net=/proc/self/fd/{net_fd}"]
    argv += ["--preserve-credentials", tools["ip"], "-batch", "-"]
    res = subprocess.run(argv, input=batch, capture_output=True, text=True, pass_fds=(user_fd, net_fd))
    if res.returncode != 0:
        why = "; ".join(line.strip() for line in res.stderr.splitlines() if line.strip()) or "ip failed"
        box.fail(f"cannot route the host's addresses away ({why})")


def _slirp(tools: dict[str, str], user_fd: int, net_fd: int, box: _Sandbox) -> tuple:
    """slirp4netns started and ready; (its process, the fd whose closing ends it)."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [tools["slirp4netns"], "--configure", "--mtu=65520", "--disable-host-loopback"]
    argv += ["--enable-sandbox", "--enable-seccomp", "--ready-fd", str(ready_w), "--exit-fd", str(exit_r)]
    argv += [f"--userns-path=/proc/self/fd/{user_fd}", "--netns-type=path", f"/proc/self/fd/{net_fd}", "tap0"]
    with tempfile.TemporaryFile() as log:  # its messages, kept out of the agent's trace
        slirp = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(ready_w, exit_r, user_fd, net_fd)
        )
        os.close(ready_w)
        os.close(exit_r)
        readable, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
        if not readable or os.read(ready_r, 1) != b"1":
            slirp.kill()
            slirp.wait()
            box.fail(f"slirp4netns did not start ({_last_line(log)})")
    os.close(ready_r)
    return slirp, exit_w


def _end_as(bwrap: subprocess.Popen) -> None:
    code = bwrap.returncode
    if code < 0:  # killed by a signal: end by the same one, so the launcher sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    raise SystemExit(code)


def run(tools: dict[str, str], bwrap_argv: list[str]) -> None:
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    argv = [bwrap_argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *bwrap_argv[1:]]
    bwrap = subprocess.Popen(argv, pass_fds=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    info = _read_info(info_r)
    if info is None:  # bwrap failed before its child (its message is on stderr)
        bwrap.wait()
        _end_as(bwrap)
    box = _Sandbox(bwrap, int(info["child-pid"]))
    box.wait_for_uid_map()
    net_fd = os.open(f"/proc/{box.child}/ns/net", os.O_RDONLY)
    user_fd = fcntl.ioctl(net_fd, _NS_GET_USERNS)  # the namespace owning it (not a nested one)
    _route(tools, user_fd, net_fd, box)
    slirp, exit_w = _slirp(tools, user_fd, net_fd, box)
    os.close(net_fd)
    os.close(user_fd)
    os.write(block_w, b"1")  # the command starts now
    os.close(block_w)
    bwrap.wait()
    os.close(exit_w)
    try:
        slirp.wait(timeout=10)
    except subprocess.TimeoutExpired:
        slirp.kill()
        slirp.wait()
    _end_as(bwrap)


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    tools, i = {}, 0
    while i < len(argv) and argv[i] != "--":
        tools[argv[i].removeprefix("--")] = argv[i + 1]
        i += 2
    if set(tools) != {"slirp4netns", "nsenter", "ip"} or i + 1 >= len(argv):
        raise SystemExit("slirp.py: usage: --slirp4netns P --nsenter P --ip P -- BWRAP ARGS...")
    return tools, argv[i + 1 :]


if __name__ == "__main__":
    run(*parse(sys.argv[1:]))
