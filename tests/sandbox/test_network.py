"""The bwrap sandbox's network (site.network): the host's addresses routed away, the
launcher's exit status, and real sandboxes with `internet` and `none` (real bwrap and
slirp4netns; the campaign-level test with an address outside is tests/security)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime import slirp
from ptb_harness.runtime.sandbox import LaunchRequest, Sandbox

FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
     +-- 192.0.2.0/24 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
     |-- 198.51.100.1
        /32 host LOCAL
Local:
     |-- 192.0.2.2
        /32 host LOCAL
"""


def test_the_hosts_own_addresses_and_link_local_are_routed_away_and_loopback_kept():
    assert slirp.host_addresses(FIB_TRIE) == ["192.0.2.2/32", "198.51.100.1/32"]
    assert slirp.blocked_routes(FIB_TRIE) == [
        "route add prohibit 192.0.2.2/32",
        "route add prohibit 198.51.100.1/32",
        "route add prohibit 169.254.0.0/16",
    ]


def site(**knobs):
    return campaign_with_defaults({"site": {"runtime": "bwrap", **knobs}}).settings.site.runtime


def run_inside(tmp_path: Path, code: str, **knobs) -> subprocess.CompletedProcess:
    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    request = LaunchRequest(
        role="agent", command=["python", "-c", code], job_home=home, job_tmp=tmp, workdir="task", env={}
    )
    launch = Sandbox(site(**knobs), {"PATH": os.environ["PATH"]}).launch(request)
    return subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=120)


def own_addresses() -> list[str]:
    return [a.split("/")[0] for a in slirp.host_addresses(Path("/proc/net/fib_trie").read_text())]


CONNECT = """
import errno, socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(10)
    try:
        s.connect((host, int(port)))
        print(target, "REACHED", s.recv(100).decode())
    except OSError as e:
        print(target, errno.errorcode.get(e.errno, str(e)))
"""


@pytest.fixture
def host_service():
    """A service of the host's on 0.0.0.0 (so on 127.0.0.1 and every address of the host)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"HOST-SERVICE")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


@pytest.mark.parametrize("network", ["internet", "none"])
def test_the_host_is_out_of_reach_from_the_sandboxs_own_network(tmp_path, host_service, network):
    port = host_service
    targets = [f"127.0.0.1:{port}", f"10.0.2.2:{port}", *(f"{a}:{port}" for a in own_addresses())]
    code = CONNECT.replace("sys.argv[1:]", repr(targets))
    res = run_inside(tmp_path, code, network=network)
    assert res.returncode == 0, res.stderr
    seen = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert set(seen) == set(targets) and not [t for t, v in seen.items() if "REACHED" in v], seen
    assert seen[f"127.0.0.1:{port}"] == "ECONNREFUSED"  # its own loopback: nothing listens there
    if network == "internet":
        # the host's own addresses: refused by the sandbox's prohibit routes
        assert {seen[f"{a}:{port}"] for a in own_addresses()} <= {"EACCES"}
    # the same service is there for the host itself (the refusal is the sandbox's)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        assert c.recv(100) == b"HOST-SERVICE"


def test_network_none_has_loopback_only_and_internet_uses_slirps_dns(tmp_path):
    code = "import socket; print(sorted(n for _, n in socket.if_nameindex())); print(open('/etc/resolv.conf').read())"
    none = run_inside(tmp_path, code, network="none")
    assert none.returncode == 0 and none.stdout.splitlines()[0] == "['lo']", none.stderr
    internet = run_inside(tmp_path, code, network="internet")
    assert internet.returncode == 0 and internet.stdout.splitlines()[0] == "['lo', 'tap0']", internet.stderr
    assert "nameserver 10.0.2.3" in internet.stdout


def test_the_launcher_ends_as_the_command_ended(tmp_path):
    assert run_inside(tmp_path, "raise SystemExit(9)").returncode == 9
    killed = run_inside(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.returncode in (-15, 143)  # bwrap reports the command's signal as 128 + n


def test_a_missing_tool_or_a_network_the_runtime_cannot_give_is_one_config_error(tmp_path):
    sandbox = Sandbox(site(network="internet"), {"PATH": str(tmp_path)})  # nothing on PATH
    with pytest.raises(ConfigError, match=r"site.bwrap: 'bwrap' not found"):
        sandbox.check_host()
    (tmp_path / "bwrap").symlink_to("/usr/bin/bwrap")
    with pytest.raises(ConfigError, match=r"site.network: internet needs slirp4netns, nsenter, ip on PATH"):
        sandbox.check_host()
    Sandbox(site(network="none"), {"PATH": str(tmp_path)}).check_host()  # needs none of them
    apptainer = campaign_with_defaults({"site": {"runtime": "apptainer", "network": "none"}}).settings.site.runtime
    with pytest.raises(ConfigError, match="site.network: none needs site.runtime: bwrap"):
        Sandbox(apptainer, {}).check_host()


def test_a_network_that_cannot_be_set_up_stops_the_sandbox_before_its_command(tmp_path):
    marker = tmp_path / "job/home/ran"  # /home/ben/ran inside
    res = run_inside(tmp_path, "open('/home/ben/ran', 'w')", network="internet")
    assert res.returncode == 0 and marker.exists()  # the real tools: it runs
    marker.unlink()
    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    request = LaunchRequest(
        role="agent",
        command=["python", "-c", "open('/home/ben/ran', 'w')"],
        job_home=home,
        job_tmp=tmp,
        workdir="task",
        env={},
    )
    argv = Sandbox(site(network="internet"), {"PATH": os.environ["PATH"]}).launch(request).argv
    # a stand-in `ip` that fails as a refusing kernel would
    argv[argv.index("--ip") + 1] = "false"
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == slirp.NETWORK_FAILED
    assert res.stderr.strip() == "[harness] network: cannot route the host's addresses away (ip failed)"
    assert not marker.exists()


def test_a_set_up_that_raises_still_stops_the_sandbox_before_its_command(tmp_path):
    # bwrap's --block-fd takes the end of file of a launcher that died as "go": any error
    # while setting up (here a helper that cannot even be started) must stop the sandbox
    marker = tmp_path / "job/home/ran"
    for made in ("job/home/task", "job/tmp"):
        (tmp_path / made).mkdir(parents=True)
    request = LaunchRequest(
        role="agent",
        command=["/bin/sh", "-c", "echo > /home/ben/ran"],
        job_home=tmp_path / "job/home",
        job_tmp=tmp_path / "job/tmp",
        workdir="task",
        env={},
    )
    argv = Sandbox(site(network="internet"), {"PATH": os.environ["PATH"]}).launch(request).argv
    argv[argv.index("--nsenter") + 1] = str(tmp_path / "no-such-nsenter")
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == slirp.NETWORK_FAILED, res.stderr
    assert res.stderr.strip().startswith("[harness] network: set-up failed (FileNotFoundError:"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not marker.exists()
