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

Stdlib only, importing nothing of the harness, and lean (it starts with every bwrap
sandbox: C modules and ``os.posix_spawn`` only, no subprocess, json or tempfile); the
namespaces are joined through the descriptors of bwrap's child's namespace files.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import sys
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


def child_pid(info: bytes) -> int | None:
    """The ``child-pid`` of bwrap's --info-fd JSON (``{"child-pid": N}``), None until whole."""
    text = info.decode(errors="replace")
    if "}" not in text or '"child-pid"' not in text:
        return None
    digits = text.split('"child-pid"', 1)[1].lstrip(" \t\n:").split(",")[0].split("}")[0].strip()
    return int(digits) if digits.isdigit() else None


def _spawn(argv: list[str], keep: tuple[int, ...] = (), stdin: int | None = None, out: int | None = None) -> int:
    """Start argv (an absolute path) with ``keep`` inherited, stdin and stdout+stderr
    redirected where given; its pid."""
    for fd in keep:
        os.set_inheritable(fd, True)
    actions = [(os.POSIX_SPAWN_DUP2, stdin, 0)] if stdin is not None else []
    if out is not None:
        actions += [(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, out, 2)]
    try:
        return os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    finally:
        for fd in keep:
            os.set_inheritable(fd, False)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _wait(pid: int, timeout: float | None = None) -> int | None:
    """pid's wait status (None if it still runs after ``timeout``, or is no child of ours)."""
    if timeout is None:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return None
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.002)


def _messages(fd: int) -> str:
    """What a helper wrote to its memfd, as one line."""
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith("WARNING")]  # slirp4netns's seccomp notice
    return "; ".join(dict.fromkeys(errors or lines))


class _Sandbox:
    """The bwrap process and its child (the sandbox's pid 1, held before the command)."""

    def __init__(self, bwrap: int, child: int):
        self.bwrap, self.child = bwrap, child
        self.helpers: list[int] = []
        self.slirp_log = -1

    def fail(self, why: str) -> None:
        """One line, and the sandbox stopped before its command ever ran."""
        print(f"[harness] network: {why}", file=sys.stderr, flush=True)
        for pid in (self.child, *self.helpers, self.bwrap):  # all started here (bwrap's child by bwrap)
            _kill(pid)
        for pid in (*self.helpers, self.bwrap):
            _wait(pid)
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


def _start_routes(tools: dict[str, str], ns: tuple[int, int], box: _Sandbox) -> tuple[int, int]:
    """``ip -batch`` in the sandbox's namespaces, started; (its pid, its messages' memfd)."""
    with open("/proc/net/fib_trie") as f:
        batch = ("\n".join(blocked_routes(f.read())) + "\n").encode()
    user_fd, net_fd = ns
    argv = [tools["nsenter"], f"--user=/proc/self/fd/{user_fd}", f"--net=/proc/self/fd/{net_fd}"]
    argv += ["--preserve-credentials", tools["ip"], "-batch", "-"]
    log = os.memfd_create("ip")
    # the batch from a file, not a pipe: an `ip` that ends before reading it (refused, or
    # not `ip` at all) then costs no EPIPE here, only its exit status
    batch_fd = os.memfd_create("ip-batch")
    os.write(batch_fd, batch)
    os.lseek(batch_fd, 0, os.SEEK_SET)
    try:
        pid = _spawn(argv, keep=ns, stdin=batch_fd, out=log)
    finally:
        os.close(batch_fd)
    box.helpers.append(pid)
    return pid, log


def _start_slirp(tools: dict[str, str], ns: tuple[int, int], box: _Sandbox) -> tuple[int, int, int]:
    """slirp4netns started; (its pid, the fd it says ready on, the fd whose closing ends it)."""
    user_fd, net_fd = ns
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [tools["slirp4netns"], "--configure", "--mtu=65520", "--disable-host-loopback"]
    argv += ["--enable-sandbox", "--enable-seccomp", "--ready-fd", str(ready_w), "--exit-fd", str(exit_r)]
    argv += [f"--userns-path=/proc/self/fd/{user_fd}", "--netns-type=path", f"/proc/self/fd/{net_fd}", "tap0"]
    box.slirp_log = os.memfd_create("slirp4netns")  # its messages, kept out of the agent's trace
    null = os.open(os.devnull, os.O_RDONLY)
    pid = _spawn(argv, keep=(ready_w, exit_r, user_fd, net_fd), stdin=null, out=box.slirp_log)
    box.helpers.append(pid)
    for fd in (null, ready_w, exit_r):
        os.close(fd)
    return pid, ready_r, exit_w


def _network(tools: dict[str, str], box: _Sandbox) -> tuple[int, int]:
    """The routes and slirp4netns, started together, both done; (slirp's pid, its exit fd)."""
    net_fd = os.open(f"/proc/{box.child}/ns/net", os.O_RDONLY)
    user_fd = fcntl.ioctl(net_fd, _NS_GET_USERNS)  # the namespace owning it (not a nested one)
    routes, routes_log = _start_routes(tools, (user_fd, net_fd), box)
    slirp, ready_r, exit_w = _start_slirp(tools, (user_fd, net_fd), box)
    os.close(net_fd)
    os.close(user_fd)
    status = _wait(routes, READY_TIMEOUT_S)
    box.helpers.remove(routes)
    if status is None or os.waitstatus_to_exitcode(status) != 0:
        box.fail(f"cannot route the host's addresses away ({_messages(routes_log) or 'ip failed'})")
    readable, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
    if not readable or os.read(ready_r, 1) != b"1":
        box.fail(f"slirp4netns did not start ({_messages(box.slirp_log) or 'no message'})")
    os.close(ready_r)
    return slirp, exit_w


def _end_as(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: end by the same one, so the launcher sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    raise SystemExit(code)


def run(tools: dict[str, str], bwrap_argv: list[str]) -> None:
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    argv = [bwrap_argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *bwrap_argv[1:]]
    bwrap = _spawn(argv, keep=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    info, pid = b"", None
    while pid is None and (chunk := os.read(info_r, 4096)):
        info += chunk
        pid = child_pid(info)
    if pid is None:  # bwrap failed before its child (its message is on stderr)
        _end_as(_wait(bwrap) or 0)
    box = _Sandbox(bwrap, pid)
    try:
        box.wait_for_uid_map()
        slirp, exit_w = _network(tools, box)
    except Exception as error:  # any failure here: the command must never start
        # (block_w closes as this process ends, and bwrap takes that end of file as "go")
        box.fail(f"set-up failed ({type(error).__name__}: {error})")
    os.write(block_w, b"1")  # the command starts now
    os.close(block_w)
    status = _wait(bwrap) or 0
    os.close(exit_w)  # slirp4netns ends
    if _wait(slirp, 10) is None:
        _kill(slirp)
        _wait(slirp)
    _end_as(status)


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
