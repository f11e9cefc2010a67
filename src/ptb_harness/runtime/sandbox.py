"""Sandboxes for the agent and the scorer: one view, three runtimes.

``none`` runs a clean host subprocess (trusted agents only: laptops, CI, the demo);
``bwrap`` (bubblewrap) and ``apptainer`` isolate it. All give the process the same view:
the same variable names, HOME with the task in HOME/task, TMPDIR, one Hugging Face cache
named by all of its variables, an XDG cache inside HOME, and the cell's GPUs. Under
``bwrap`` and ``apptainer`` it also gets its own PID namespace (it cannot see or signal
the harness) and sees no file of the host beyond the system, the interpreter and what
is bound for it: no checkout, no results tree, no other cell, no host HOME.

``bwrap`` is unprivileged whoever starts it: its own user namespace with every capability
dropped (as root too: the agent's uid is then root's, but it holds no capability in any
namespace, and what root's uid alone could still write, /proc/sys, is read-only), no
nested user namespaces where bwrap can forbid them, its own UTS, IPC, PID and cgroup
namespaces, and a new session (no terminal to type into).

Secrets and every other value travel only in the environment of the launched process:
with apptainer as ``APPTAINERENV_<NAME>`` variables, with bwrap as bwrap's own
environment (which its children inherit: bwrap's environment is exactly the agent's, so
the last harness process the agent can see holds nothing it was not given), never as
``--env NAME=value`` on the command line (visible in ``ps`` and in logs) and never in a
file. /proc/PID/environ is readable only by the same user and root.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.gpu_fence import gpu_fence
from ptb_harness.runtime.procs import ProcessResult, run_budgeted
from ptb_harness.runtime.sandbox_settings import Bind, Role, RuntimeSettings
from ptb_harness.runtime.userns import bwrap_version, check_userns

#: Where the shared Hugging Face home appears inside an apptainer sandbox.
SANDBOX_HF_HOME = "/hf_home"
#: System directories a bwrap sandbox sees read-only (a link on the host stays a link).
BWRAP_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt")
#: The few files of /etc programs need (users, DNS, TLS roots, the loader's cache,
#: Debian's alternatives); the rest of /etc (shadow, ssh keys, pip and npm credentials)
#: stays out of sight.
BWRAP_ETC = (
    "passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "localtime", "timezone", "os-release", "debian_version", "lsb-release", "mime.types",
    "protocols", "services", "networks", "nvidia", "OpenCL", "vulkan", "glvnd", "magic", "inputrc",
)  # fmt: skip
#: The host name inside a bwrap sandbox (its own UTS namespace).
SANDBOX_HOSTNAME = "ptb-sandbox"
#: The Hugging Face variables that choose a cache, highest priority first in
#: huggingface_hub (HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > $HF_HOME/hub). All are set
#: together, so a host-wide value (e.g. a cluster's HUGGINGFACE_HUB_CACHE) can never win.
HF_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE")


#: Where a bwrap sandbox sees the endpoint forwarder and the endpoints' host sockets.
SANDBOX_RUN_DIR = "/run/ptb"
#: The forwarder (stdlib only): TCP 127.0.0.1:<port> -> a Unix socket, then the command.
FORWARDER = Path(__file__).with_name("forward.py")
#: The launcher of a bwrap sandbox with site.network internet (slirp4netns), and the
#: resolv.conf it sees (slirp's DNS forwarder)
SLIRP_LAUNCHER = Path(__file__).with_name("slirp.py")
SLIRP_RESOLV_CONF = Path(__file__).with_name("slirp_resolv.conf")
#: what site.network internet runs on the host: the user-mode network, and the tools that
#: route the host's addresses away inside the sandbox's namespace
NETWORK_TOOLS = {"slirp4netns": "slirp4netns", "nsenter": "util-linux", "ip": "iproute2"}


@dataclass(frozen=True)
class Endpoint:
    """Inside the sandbox, TCP ``127.0.0.1:<port>`` reaches the Unix socket ``host_socket``
    that a harness process listens on outside it (e.g. the cell's LLM gateway).

    Under bwrap the socket is bound into the sandbox and a forwarder started inside, in
    the sandbox's own network namespace, listens on the port (with ``site.network``
    internet and none alike): the host's loopback stays out of reach. Under runtime none
    (and apptainer, which shares the host's network) the forwarder listens on the host's
    127.0.0.1:<port>, which must then be free. The socket must be listening when the
    launch runs."""

    host_socket: Path
    port: int

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"endpoint port {self.port}: not a TCP port")
        if not Path(self.host_socket).is_absolute():
            raise ValueError(f"endpoint socket {self.host_socket}: not an absolute path")

    def inside_socket(self) -> str:
        return f"{SANDBOX_RUN_DIR}/endpoint-{self.port}.sock"


def forwarding(endpoints: Sequence[Endpoint], command: Sequence[str], forwarder: str, *, inside: bool) -> list[str]:
    """``command`` behind the forwarder of ``endpoints`` (its path and the sockets' as the
    forwarder sees them: inside the sandbox, or on the host); ``command`` itself without
    endpoints."""
    if not endpoints:
        return list(command)
    ports = [e.port for e in endpoints]
    if len(set(ports)) != len(ports):
        raise ValueError(f"endpoints: port given twice in {ports}")
    argv = [sys.executable, "-I", "-S", forwarder]
    for e in endpoints:
        argv += ["--listen", f"{e.port}={e.inside_socket() if inside else e.host_socket}"]
    return [*argv, "--", *command]


@dataclass(frozen=True)
class LaunchRequest:
    """What a stage asks of the sandbox: run ``command`` (paths as seen inside) as
    ``role``, with HOME=job_home and cwd HOME/workdir."""

    role: Role
    command: Sequence[str]
    job_home: Path
    job_tmp: Path
    workdir: str
    #: the harness's own variables for the process
    env: Mapping[str, str]
    #: copied by name from the launching environment when set
    pass_names: Sequence[str] = ()
    gpus: Sequence[str] = ()
    binds: Sequence[Bind] = ()
    #: the HF home the sandbox sees (see ptb_harness.runtime.hf_cache), and whether read-only
    hf_home_host: Path | None = None
    hf_read_only: bool = False
    #: host Unix sockets the process reaches as TCP 127.0.0.1:<port> (see Endpoint)
    endpoints: Sequence[Endpoint] = ()


@dataclass(frozen=True)
class Launch:
    """What to execute on the host: argv, its whole environment, and its cwd."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    #: the names (never values) of the variables the sandboxed process sees
    visible_names: list[str] = field(default_factory=list)

    def run(self, output: Path, **budget: Any) -> ProcessResult:
        """Run it under its budget, output into ``output``. ``budget``: run_budgeted's
        keywords (budget_s and kill_grace_s, and the optional ones: see there), passed on
        as given, so that its signature and defaults are written once."""
        return run_budgeted(self.argv, env=self.env, cwd=self.cwd, output=output, **budget)


@dataclass(frozen=True)
class View:
    """Paths as the sandboxed process sees them."""

    home: str
    tmp: str
    hf_home: str
    xdg_cache: str

    def hf_env(self) -> dict[str, str]:
        hub = f"{self.hf_home}/hub"
        return {
            "HF_HOME": self.hf_home,
            "HF_HUB_CACHE": hub,
            "HUGGINGFACE_HUB_CACHE": hub,
            "HF_DATASETS_CACHE": f"{self.hf_home}/datasets",
        }


class Sandbox:
    """Builds launches for one site (the profile's ``site`` knobs)."""

    def __init__(self, settings: RuntimeSettings, host_env: Mapping[str, str]):
        self.settings = settings
        self.host_env = host_env
        self.runtime = settings.runtime

    # -- what the sandbox sees -------------------------------------------------------------
    def view(self, job_home: Path, job_tmp: Path, hf_home_host: Path | None) -> View:
        """Paths inside. The XDG cache (vLLM's, triton's) lives in HOME, i.e. the job dir
        on scratch: a host cache bound read-write would be a channel between cells and
        into the scorer, and the container's 64 MiB tmpfs is not used for it."""
        if self.runtime == "none":
            home = str(job_home)
            return View(
                home=home,
                tmp=str(job_tmp),
                hf_home=str(hf_home_host) if hf_home_host else f"{home}/.cache/huggingface",
                xdg_cache=f"{home}/.cache",
            )
        home = self.settings.sandbox_home
        return View(
            home=home,
            tmp="/tmp",
            hf_home=SANDBOX_HF_HOME if hf_home_host else f"{home}/.cache/huggingface",
            xdg_cache=f"{home}/.cache",
        )

    # -- the launch ------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Launch:
        """A launch of the request's command (paths as seen inside) with HOME=job_home,
        cwd HOME/workdir.

        ``env`` holds the harness's own variables; ``pass_names`` are copied by name from
        the launching environment when set (secrets: their values never reach argv or disk).
        """
        r = request
        view = self.view(r.job_home, r.job_tmp, r.hf_home_host)
        inner: dict[str, str] = {
            "HOME": view.home,
            "TMPDIR": view.tmp,
            "LANG": self.host_env.get("LANG", "C.UTF-8"),
            "PYTHONNOUSERSITE": "1",
            "XDG_CACHE_HOME": view.xdg_cache,
            **view.hf_env(),
            **r.env,
        }
        for name in r.pass_names:
            if name in self.host_env:
                inner[name] = self.host_env[name]
        # the cell's GPUs; a cell without GPUs sees none (not every card of the node)
        inner["CUDA_VISIBLE_DEVICES"] = ",".join(r.gpus)
        inner["NVIDIA_VISIBLE_DEVICES"] = ",".join(r.gpus) if r.gpus else "void"
        visible = sorted(inner)
        if self.runtime in ("none", "bwrap"):
            path = self.host_env.get("PATH", os.defpath)
            # no image: the sandbox's `python` is the harness's interpreter, and the
            # pinned agent CLIs (`ptb-harness setup-agents`) come before the host's
            dirs = [str(Path(sys.executable).parent), path]
            prefix = None
            if r.role == "agent":
                prefix = Path(self.settings.agent_cli_prefix or "resources/agent-cli").resolve()
                dirs.insert(0, str(prefix / "node_modules" / ".bin"))
            inner["PATH"] = os.pathsep.join(dirs)
            if self.runtime == "none":
                argv = forwarding(r.endpoints, r.command, str(FORWARDER), inside=False)
                return Launch(argv, inner, r.job_home / r.workdir, sorted(inner))
            extra = [Bind(prefix, str(prefix), read_only=True)] if prefix is not None and prefix.is_dir() else []
            return self._bwrap(r, inner, extra)
        return self._apptainer(r, inner, visible)

    def _apptainer(self, r: LaunchRequest, inner: dict[str, str], visible: list[str]) -> Launch:
        site = self.settings
        image = site.image(r.role)
        if not image:
            raise ConfigError(f"site.{r.role}_image: required with runtime apptainer")
        home = site.sandbox_home
        argv = [site.apptainer, "exec", "--nv", "-c"]
        if site.isolate_gpus:
            # with -c, --nvccli leaves only NVIDIA_VISIBLE_DEVICES' cards in the sandbox
            argv.append("--nvccli")
        if site.cleanenv:
            argv.append("--cleanenv")
        # --pid: the agent cannot see or signal the harness (or anything else of the host)
        argv += ["--pid", "--writable-tmpfs", "--home", f"{r.job_home}:{home}", "--pwd", f"{home}/{r.workdir}"]
        for b in [Bind(r.job_tmp, "/tmp"), *self._shared_binds(r)]:
            argv += ["--bind", b.arg()]
        argv += [image, *r.command]
        # apptainer shares the host's network: its endpoints are on the host's loopback
        argv = forwarding(r.endpoints, argv, str(FORWARDER), inside=False)
        # the apptainer process's own environment: PATH to find apptainer, the GPU list
        # for --nvccli, and every sandbox variable as APPTAINERENV_<NAME>
        env = {"PATH": self.host_env.get("PATH", os.defpath)}
        if site.isolate_gpus:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(r.gpus) if r.gpus else "void"
        for name, value in inner.items():
            env[f"APPTAINERENV_{name}"] = value
        return Launch(argv, env, r.job_home, visible)

    def _shared_binds(self, r: LaunchRequest) -> list[Bind]:
        """The binds of both container runtimes after HOME and /tmp: the HF cache, the
        request's, the site's."""
        out = []
        if r.hf_home_host is not None:
            out.append(Bind(r.hf_home_host, SANDBOX_HF_HOME, read_only=r.hf_read_only))
        return [*out, *r.binds, *self.settings.binds]

    def check_host(self) -> None:
        """Raise the one config error that stops a run before any cell starts when this
        host cannot make the site's sandbox (bwrap or its network's tools missing, user
        namespaces refused, a network the runtime cannot give, a bind that would hide the
        sandbox's HOME or /tmp)."""
        if self.runtime == "bwrap":
            check_userns(self.bwrap_executable())
            self.network_tools()
            home = self.settings.sandbox_home
            check_no_shadowing(home, [b.dst for b in self.settings.binds], "site.binds")
            check_no_shadowing(home, _interpreter_prefixes(), "the harness's interpreter")
        elif self.settings.network == "none":
            raise ConfigError(
                f"site.network: none needs site.runtime: bwrap (runtime {self.runtime} uses the host's network)"
            )

    def network_tools(self) -> list[str]:
        """``--NAME PATH`` of each tool site.network internet needs; none for network none."""
        if self.settings.network != "internet":
            return []
        path = self.host_env.get("PATH", os.defpath)
        found = {name: shutil.which(name, path=path) for name in NETWORK_TOOLS}
        missing = [name for name, exe in found.items() if exe is None]
        if missing:
            packages = " ".join(dict.fromkeys(NETWORK_TOOLS[n] for n in missing))
            raise ConfigError(
                f"site.network: internet needs {', '.join(missing)} on PATH "
                f"(apt-get install -y {packages}), or set site.network: none"
            )
        return [arg for name, exe in found.items() for arg in (f"--{name}", str(exe))]

    def bwrap_executable(self) -> str:
        exe = shutil.which(self.settings.bwrap, path=self.host_env.get("PATH", os.defpath))
        if exe is None:
            raise ConfigError(f"site.bwrap: '{self.settings.bwrap}' not found (apt-get install -y bubblewrap)")
        return exe

    def _bwrap(self, r: LaunchRequest, inner: dict[str, str], extra: Sequence[Bind]) -> Launch:
        """bubblewrap: an empty root holding the system read-only, the interpreter, the job
        dir as HOME and the binds; a new PID namespace whose init dies with the harness
        (so no process of the agent outlives its solve)."""
        home = self.settings.sandbox_home
        exe = self.bwrap_executable()
        internet = self.settings.network == "internet"
        binds = [*self._shared_binds(r), *extra]
        check_no_shadowing(home, [b.dst for b in binds], "a bind")
        # HOME and /tmp first, everything else after, so that an interpreter, a model or a
        # CLI under /tmp or HOME (a checkout there) is bound over the job's dirs, not hidden
        argv = [exe, *bwrap_isolation(bwrap_version(exe))]
        argv += ["--bind", str(r.job_home), home, "--bind", str(r.job_tmp), "/tmp"]
        argv += [*_bwrap_system(internet), *self._bwrap_proc_dev(r.gpus), *_bwrap_binds(binds)]
        argv += _bwrap_endpoint_binds(r.endpoints)
        command = forwarding(r.endpoints, r.command, f"{SANDBOX_RUN_DIR}/forward.py", inside=True)
        argv += ["--remount-ro", "/", "--chdir", f"{home}/{r.workdir}", *command]
        if internet:
            # the launcher gives the sandbox's namespace its network before the command runs
            argv = [sys.executable, "-I", "-S", str(SLIRP_LAUNCHER), *self.network_tools(), "--", *argv]
        # bwrap's own environment is the sandbox's: its children inherit exactly it
        return Launch(argv, inner, r.job_home, sorted(inner))

    def _bwrap_proc_dev(self, gpus: Sequence[str]) -> list[str]:
        """/proc (its sysctls read-only), /dev with its own /dev/shm, the device files of
        the cell's GPUs and nothing of the other cards (see runtime.gpu_fence)."""
        # /proc/sys read-only: as the host's root the agent's uid owns its files (0644 root),
        # and bwrap covers /proc/sys only where access(W_OK) on the directory (0555) says it
        # is writable, so kernel.core_pattern and the rest would stay writable to it
        argv = ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        if self.settings.shm_bytes:
            # a sized /dev/shm of its own: bwrap's /dev tmpfs would take half of RAM
            argv += ["--perms", "1777", "--size", str(self.settings.shm_bytes), "--tmpfs", "/dev/shm"]
        return argv + gpu_fence(gpus, Path(self.settings.gpu_device_root)).bwrap_args()


def _bwrap_system(internet: bool) -> list[str]:
    """The system directories, the few files of /etc, and the interpreter, read-only.
    With the internet through slirp4netns the DNS server is slirp's (the host's resolver,
    e.g. 127.0.0.53, is out of reach by design)."""
    argv = []
    for d in BWRAP_SYSTEM:
        p = Path(d)
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            argv += ["--ro-bind", d, d]
    for name in BWRAP_ETC:
        if internet and name == "resolv.conf":
            argv += ["--ro-bind", str(SLIRP_RESOLV_CONF), "/etc/resolv.conf"]
        else:
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # the interpreter `python` names (a venv and its base), read-only, where they are
    for prefix in _interpreter_prefixes():
        argv += ["--ro-bind", prefix, prefix]
    return argv


def _interpreter_prefixes() -> list[str]:
    """The interpreter's venv and base, where the system dirs do not hold them already."""
    return [
        prefix
        for prefix in dict.fromkeys((sys.base_prefix, sys.prefix))
        if not any(prefix == d or prefix.startswith(d + "/") for d in BWRAP_SYSTEM)
    ]


def check_no_shadowing(home: str, destinations: Sequence[str], what: str) -> None:
    """A destination that is the sandbox's HOME or /tmp, or a directory above either,
    would hide the job's dirs: one config error naming it (anything below them works: it
    is bound over them)."""
    for dst in destinations:
        path = os.path.normpath(dst)
        for inner in (home, "/tmp"):
            if path == inner or inner.startswith(path.rstrip("/") + "/"):
                raise ConfigError(f"{what}: {dst} would hide the sandbox's {inner} (the job's dir); bind it elsewhere")


def _bwrap_binds(binds: Sequence[Bind]) -> list[str]:
    argv = []
    for b in binds:
        argv += ["--ro-bind" if b.read_only else "--bind", str(b.src), b.dst]
    return argv


def _bwrap_endpoint_binds(endpoints: Sequence[Endpoint]) -> list[str]:
    """The forwarder and each endpoint's host socket, read-only (connecting needs no write)."""
    if not endpoints:
        return []
    argv = ["--ro-bind", str(FORWARDER), f"{SANDBOX_RUN_DIR}/forward.py"]
    for e in endpoints:
        argv += ["--ro-bind", str(e.host_socket), e.inside_socket()]
    return argv


def bwrap_isolation(version: tuple[int, ...]) -> list[str]:
    """bwrap's namespaces and privileges, for a bwrap of this version: a user namespace of
    its own with no capability (even when started by root), no nested user namespaces
    (``--disable-userns``, bwrap 0.8 and later: they would give the agent capabilities
    over new namespaces), own PID, IPC, network (loopback up; site.network internet adds
    slirp4netns from outside), UTS (own host name) and cgroup namespaces, and a
    new session (TIOCSTI cannot type into the harness's terminal). bwrap itself sets
    no_new_privs and mounts nosuid: a setuid binary gains nothing."""
    flags = ["--die-with-parent", "--unshare-user"]
    if version >= (0, 8):
        flags.append("--disable-userns")
    flags += ["--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--hostname", SANDBOX_HOSTNAME]
    return [*flags, "--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL"]
