"""`ptb-harness doctor`: check a site before a campaign, one line per check.

Each check says OK or FAIL and, on FAIL, the fix. Nothing here starts a job or writes
outside a temporary probe file in the results dir and tmp_root.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.settings import Site
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.text import terminal_line
from ptb_harness.runtime.agent_cli import installed_version, pinned_versions
from ptb_harness.runtime.inotify import Inotify, max_user_watches
from ptb_harness.runtime.sandbox_settings import RuntimeSettings

#: Host variables that choose a cache; the harness sets all of them inside sandboxes.
SHADOWING_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "XDG_CACHE_HOME")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """One terminal line: a detail quoting a tool's or a sandbox's output stays one line."""
        text = terminal_line(f"{'OK  ' if self.ok else 'FAIL'} {self.name}: {self.detail}")
        return text if self.ok or not self.fix else f"{text} -- fix: {terminal_line(self.fix)}"


def _version(argv: list[str]) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (res.stdout or res.stderr).strip().splitlines()
    return out[0] if res.returncode == 0 and out else None


def _writable(directory: Path) -> str | None:
    """None if a file can be created in directory (made if missing), else why not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".ptb-doctor-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_runtime(site: Site, host_env: Mapping[str, str] | None = None) -> Check:
    runtime = site.runtime
    if runtime.runtime == "none":
        return Check(
            "runtime",
            True,
            "none: for TRUSTED agents only (the agent runs as you, unconfined: it can read and write "
            "everything you can, see and signal the harness); use bwrap or apptainer for any other",
        )
    if runtime.runtime == "bwrap":
        return check_bwrap(site, os.environ if host_env is None else host_env)
    exe = shutil.which(runtime.apptainer)
    version = _version([exe, "--version"]) if exe else None
    if version is None:
        return Check(
            "runtime",
            False,
            f"apptainer: '{runtime.apptainer}' not found or not working",
            "install apptainer, set site.apptainer to its path, or use site.runtime: none",
        )
    return Check("runtime", True, f"apptainer at {exe}: {version}")


def check_bwrap(site: Site, host_env: Mapping[str, str]) -> Check:
    """bubblewrap found, and the kernel lets it make the unprivileged sandbox (its own
    user namespace); when it does not, the one line naming the sysctl."""
    from ptb_harness.runtime.userns import bwrap_version, userns_problem

    name = site.runtime.bwrap
    exe = shutil.which(name, path=host_env.get("PATH", os.defpath))
    if exe is None:
        return Check("runtime", False, f"bwrap: '{name}' not found", "apt-get install -y bubblewrap, or set site.bwrap")
    problem = userns_problem(exe)
    if problem:
        return Check("runtime", False, f"bwrap at {exe}: {problem}")
    version = ".".join(map(str, bwrap_version(exe))) or "version unknown"
    return Check("runtime", True, f"bwrap at {exe} (bubblewrap {version}): makes its own user namespace")


def _probe_sandbox(site: Site, host_env: Mapping[str, str], targets: list[str]) -> dict | str:
    """Start a real sandbox of the site and run the probe in it (its privileges,
    namespaces, limits, what of ``targets`` it reaches); its answer, or why there is none."""
    from ptb_harness.runtime import sandbox_probe
    from ptb_harness.runtime.caps import confine_cell
    from ptb_harness.runtime.sandbox import LaunchRequest, Sandbox

    with tempfile.TemporaryDirectory(prefix="ptb-doctor-") as d:
        home, tmp = Path(d, "home"), Path(d, "tmp")
        (home / "task").mkdir(parents=True)
        tmp.mkdir()
        source = Path(sandbox_probe.__file__).read_text()
        command = ["python", "-I", "-S", "-c", source, *targets]
        request = LaunchRequest(role="agent", command=command, job_home=home, job_tmp=tmp, workdir="task", env={})
        launch = Sandbox(site.runtime, host_env).launch(request)
        # confined as a cell's agent is (its cgroup where one can be made, its rlimits)
        with confine_cell(replace(site.agent_limits, cgroup="auto"), f"ptb-doctor-sandbox-{os.getpid()}") as caps:
            launch = caps.wrap(launch)
            try:
                res = subprocess.run(
                    launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=60
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                return str(e)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]


#: namespaces the bwrap sandbox must not share with the host (cgroup: where the kernel has them)
REQUIRED_OWN = ("user", "mnt", "pid", "ipc", "uts", "net")


def check_sandbox_privileges(inside: dict) -> Check:
    status = inside["status"]
    cap_eff, cap_bnd = status.get("CapEff", "?"), status.get("CapBnd", "?")
    ok = int(cap_eff, 16) == 0 and int(cap_bnd, 16) == 0 and status.get("NoNewPrivs") == "1"
    ok = ok and not inside["proc_sys_writable"]
    uid = inside["uid"]
    who = " (the host's root: the harness runs as root; no capability goes with it)" if uid == 0 else ""
    detail = (
        f"CapEff {cap_eff}, CapBnd {cap_bnd}, NoNewPrivs {status.get('NoNewPrivs')}, "
        f"nested user namespaces: {inside['nested_userns']}, /proc/sys "
        f"{'WRITABLE' if inside['proc_sys_writable'] else 'read-only'}; uid {uid}{who}"
    )
    fix = "" if ok else "report this: the sandbox must hold no capability"
    return Check("sandbox privileges", ok, detail, fix)


def check_sandbox_namespaces(inside: dict, host: dict) -> Check:
    own = [n for n, v in inside["namespaces"].items() if v is not None and v != host["namespaces"].get(n)]
    shared = [n for n in inside["namespaces"] if n not in own]
    ok = all(n in own for n in REQUIRED_OWN)
    detail = f"own {', '.join(own)} (host name {inside['hostname']}); shared with the host: "
    detail += ", ".join(shared) or "none"
    fix = "" if ok else "the kernel or bwrap lacks a namespace: see docs/security.md"
    return Check("sandbox namespaces", ok, detail, fix)


def check_sandbox_limits(inside: dict) -> Check:
    """The limits a sandboxed process runs under, as it sees them, confined as a cell's
    agent is: its rlimits and its cgroup (the cell's, seen from its own cgroup namespace)."""
    limits = ", ".join(f"{k.removeprefix('Max ')} {v}" for k, v in inside["limits"].items())
    cgroups = [c for c in inside["cgroup"] if c.startswith("0::") or ":memory:" in c or ":pids:" in c]
    return Check("sandbox limits", True, f"rlimits: {limits}; cgroup {' '.join(cgroups)}")


def check_sandbox_network(inside: dict, site: Site, host_addresses: list[str]) -> Check:
    """What the sandbox reached of a service the doctor ran on the host's 0.0.0.0: nothing,
    by its loopback, slirp's alias of the host (10.0.2.2) or the host's own addresses."""
    reached = [t for t, result in inside["connect"].items() if result == "reached"]
    network = site.runtime.network
    how = "through slirp4netns (the internet, not tried here)" if network == "internet" else "loopback only"
    verdict = f"REACHED at {', '.join(reached)}" if reached else "unreachable"
    detail = (
        f"{network}: own namespace, {how}; a host service on 0.0.0.0 tried at 127.0.0.1, 10.0.2.2 and the host's "
        f"{', '.join(host_addresses) or 'no other address'}: {verdict}"
    )
    return Check("sandbox network", not reached, detail, "report this: the host must be out of the sandbox's reach")


def check_sandbox(site: Site, host_env: Mapping[str, str] | None = None) -> list[Check]:
    """A real sandbox of the site, from the inside (bwrap): its privileges, namespaces,
    network and limits against the host's. Nothing for the other runtimes."""
    if site.runtime.runtime != "bwrap" or not check_bwrap(site, host_env or os.environ).ok:
        return []
    from ptb_harness.runtime.sandbox_probe import probe
    from ptb_harness.runtime.slirp import host_addresses

    addresses = [a.split("/")[0] for a in host_addresses(Path("/proc/net/fib_trie").read_text())]
    with socket.create_server(("0.0.0.0", 0)) as service:  # never accepted: a connect that reaches it succeeds
        port = service.getsockname()[1]
        targets = [f"{a}:{port}" for a in ("127.0.0.1", "10.0.2.2", *addresses)]
        inside = _probe_sandbox(site, os.environ if host_env is None else host_env, targets)
    if isinstance(inside, str):
        fix = "set site.network: none, or let slirp4netns open /dev/net/tun (mode 0666, as Debian ships it)"
        return [
            Check(
                "sandbox",
                False,
                f"the probe did not run in a real sandbox: {inside}",
                fix if "network" in inside else "",
            )
        ]
    host = probe()
    return [
        check_sandbox_privileges(inside),
        check_sandbox_namespaces(inside, host),
        check_sandbox_network(inside, site, addresses),
        check_sandbox_limits(inside),
    ]


def check_cgroup(site: Site) -> Check:
    """A real cell cgroup, made, joined by a probe process, read back and removed: what
    the kernel allows here for each cell's memory and process caps."""
    from ptb_harness.runtime.caps import confine_cell
    from ptb_harness.runtime.cgroups import CAP_FILES, HIT_FILES

    limits = site.agent_limits
    if limits.cgroup == "none":
        detail = "site.agent_limits.cgroup is none: agents get rlimits only, no memory or process cap"
        return Check("cgroup", True, detail)
    fix = (
        "run the harness as root, or under a delegated cgroup (site.agent_limits.cgroup_parent), "
        "or accept rlimits only with site.agent_limits.cgroup: none"
    )
    try:
        with confine_cell(replace(limits, cgroup="auto"), f"ptb-doctor-{os.getpid()}") as caps:
            if caps.cgroup is None:
                why = f"none can be made here ({caps.no_cgroup}): the agents get no memory or process cap"
                # a FAIL where agents are untrusted; runtime none runs trusted ones only
                return Check("cgroup", site.runtime.runtime == "none", why, fix)
            parts = []
            for controller, (version, here) in caps.cgroup.dirs.items():
                files = [f for f in CAP_FILES[(version, controller)] if (here / f).exists()]
                read = ", ".join(f"{f} = {(here / f).read_text().strip()}" for f in files)
                events = "{} ({})".format(*HIT_FILES[(version, controller)])
                parts.append(f"{controller}: v{version} in {here.parent} ({read}; hits from {events})")
            swap = caps.cgroup.swap
    except HarnessError as e:
        return Check("cgroup", False, str(e), fix)
    missing = f"; not capped: {caps.no_cgroup}" if caps.no_cgroup else ""
    detail = f"a cell's cgroup was made, joined and removed: {'; '.join(parts)}; {swap}{missing}"
    ok = not caps.no_cgroup or site.runtime.runtime == "none"
    return Check("cgroup", ok, detail, "" if ok else fix)


def check_rlimits(site: Site) -> Check:
    """The rlimits each cell's agent gets, and what NPROC means for this user."""
    from ptb_harness.runtime.caps import may_raise_hard_limits, within_hard_limits
    from ptb_harness.runtime.limits import rlimits

    limits = site.agent_limits
    root = os.geteuid() == 0
    wanted = rlimits(limits, root=root, pids_in_cgroup=False, user_processes=0)
    got = {r: soft for r, soft, _ in within_hard_limits(wanted, may_raise_hard_limits())}
    fsize = f"{limits.fsize_bytes / 1e9:g} GB" if limits.fsize_bytes else "unlimited"
    nproc = (
        "NPROC not set (root: the kernel does not count uid 0's processes; the pids cgroup is the cap)"
        if resource.RLIMIT_NPROC not in got
        else f"NPROC {limits.pids_max} above the user's processes at launch when no pids cgroup holds the cell "
        "(it counts every process of the user)"
    )
    nofile = got[resource.RLIMIT_NOFILE]
    kept = f" (site.agent_limits.nofile {limits.nofile}: this process may not raise its hard limit)"
    nofile_said = f"{nofile}{kept if nofile < limits.nofile else ''}"
    return Check("rlimits", True, f"NOFILE {nofile_said}, FSIZE {fsize}, CORE 0; {nproc}")


def check_images(site: Site) -> list[Check]:
    runtime = site.runtime
    if runtime.runtime != "apptainer":
        return [Check("images", True, f"runtime {runtime.runtime} uses no image")]
    checks = []
    for role in ("agent", "scorer"):
        image = runtime.image(role)
        if not image:
            checks.append(Check(f"{role}_image", False, "not set", f"set site.{role}_image to a .sif file"))
        elif not Path(image).is_file():
            checks.append(Check(f"{role}_image", False, f"{image} not found", "build or copy the image there"))
        else:
            checks.append(Check(f"{role}_image", True, image))
    return checks


def check_nvccli(site: Site) -> Check:
    if site.runtime.runtime == "bwrap":
        return Check("GPU fence", True, "bwrap binds only each cell's cards' device files (isolate_gpus: apptainer)")
    if not site.runtime.isolate_gpus:
        what = "the agent runs on the host" if site.runtime.runtime == "none" else "apptainer sandboxes"
        return Check(
            "isolate_gpus", True, f"off ({what}: every card of the node; CUDA_VISIBLE_DEVICES limits use, not a fence)"
        )
    version = _version(["nvidia-container-cli", "--version"])
    if version is None:
        return Check(
            "isolate_gpus",
            False,
            "on, but nvidia-container-cli is not available for apptainer --nvccli",
            "install libnvidia-container-tools, or set site.isolate_gpus: false",
        )
    return Check("isolate_gpus", True, f"on; nvidia-container-cli {version}")


def check_hf_cache(site: Site) -> Check:
    home, mode = site.hf_cache.home, site.hf_cache.mode
    if home is None or mode == "none":
        return Check("hf_cache", True, "no shared Hugging Face cache; each cell starts with an empty one")
    if site.runtime.runtime == "none" and mode == "ro":
        return Check(
            "hf_cache",
            False,
            "hf_cache_mode ro is not enforced under runtime none (the agent can write the shared cache)",
            "use site.runtime: bwrap or apptainer, or hf_cache_mode: overlay",
        )
    if not home.is_dir():
        return Check(
            "hf_cache", False, f"site.hf_home {home} is not a directory", "point site.hf_home at the shared HF home"
        )
    if mode == "overlay":
        if shutil.which("fuse-overlayfs") is None:
            return Check(
                "hf_cache",
                False,
                "hf_cache_mode overlay, but fuse-overlayfs is not on PATH",
                "install fuse-overlayfs, or set site.hf_cache_mode: ro",
            )
        if not Path("/dev/fuse").exists():
            return Check(
                "hf_cache", False, "hf_cache_mode overlay, but /dev/fuse is missing", "use site.hf_cache_mode: ro"
            )
    return Check("hf_cache", True, f"{home} ({mode})")


def check_scoring_data(campaign: Campaign) -> Check:
    """The HF cache holds every dataset and base model the campaign's scoring reads offline."""
    from ptb_harness.campaign.scoring import missing_data

    gaps = missing_data(campaign)
    if gaps:
        return Check("scoring_data", False, "; ".join(gaps), "ptb-harness prefetch --profile P [--campaign F]")
    return Check("scoring_data", True, "every task's datasets and base model are cached (or none needed)")


def check_tmp_root(site: Site) -> Check:
    root = site.tmp_root
    why = _writable(root)
    if why:
        return Check("tmp_root", False, f"{root} is not writable ({why})", "set site.tmp_root to node-local scratch")
    problem = site.scratch_problem()
    if problem:
        return Check("tmp_root", False, problem, "free space or point site.tmp_root at larger scratch")
    free_gb = shutil.disk_usage(root).free / 1e9
    return Check("tmp_root", True, f"{root}: {free_gb:.1f} GB free (need {site.min_tmp_free_gb})")


def check_evidence_recorder(campaign: Campaign) -> Check:
    """With the judge on, the evidence recorder reads each file the agent closes (inotify);
    without inotify it walks the job dir only, and misses files living shorter than a walk."""
    if not campaign.settings.judge.enabled:
        return Check("evidence recorder", True, "the judge is off: no recorder runs")
    try:
        Inotify().close()
    except OSError as e:
        every = campaign.settings.site.evidence_scan_seconds
        why = f"inotify is not available ({e}): the recorder walks the job dir every {every:g} s only"
        return Check("evidence recorder", False, why, "a Linux kernel with inotify (files living shorter are missed)")
    limit = max_user_watches()
    return Check("evidence recorder", True, f"inotify, {limit if limit is not None else 'an unknown number of'} "
                 "watches per user (one per directory of a job dir; past them, walks)")  # fmt: skip


def check_results_dir(campaign: Campaign) -> Check:
    root = campaign.results_dir
    why = campaign.settings.paths.results_problem()
    if why:
        return Check(
            "results_dir", False, f"{root} is not writable ({why})", "set paths.results_dir to a writable path"
        )
    return Check("results_dir", True, f"{root} (absolute; writable)")


def check_host_cache_vars(host_env: Mapping[str, str]) -> list[Check]:
    """Host cache variables never reach a sandbox: the harness names its own."""
    return [
        Check("host " + name, True, f"set to {host_env[name]}; the harness sets its own inside sandboxes")
        for name in SHADOWING_VARS
        if name in host_env
    ]


#: Where containers/agent.def installs the pinned agent CLIs inside the agent image.
IMAGE_CLI_PREFIX = "/opt/agent-cli"


def _image_cli_version(runtime: RuntimeSettings, package: str) -> str | None:
    manifest = f"{IMAGE_CLI_PREFIX}/node_modules/{package}/package.json"
    try:
        res = subprocess.run(
            [runtime.apptainer, "exec", str(runtime.agent_image), "cat", manifest],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return str(json.loads(res.stdout)["version"]) if res.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None


def check_agent_clis(campaign: Campaign) -> list[Check]:
    """Each campaign agent's CLI (agent.json "cli") at the version agents/cli pins, where
    the site's runtime finds it: the prefix of `ptb-harness setup-agents` (none) or the
    agent image's /opt/agent-cli (apptainer)."""
    runtime = campaign.settings.site.runtime
    lock_dir = campaign.agents_dir / "cli"
    pins = pinned_versions(lock_dir) if (lock_dir / "package.json").is_file() else {}
    prefix = campaign.workdir / (runtime.agent_cli_prefix or "resources/agent-cli")
    checks, seen = [], set()
    for name in campaign.agent_names:
        package = campaign.agent(name).cli
        if not package or package in seen:
            continue
        seen.add(package)
        want = pins.get(package)
        if want is None:
            checks.append(Check(f"agent CLI {package}", False, f"not pinned in {lock_dir}/package.json"))
            continue
        if runtime.runtime == "none":
            have, where, fix = installed_version(prefix, package), str(prefix), "ptb-harness setup-agents"
        else:
            have, where = _image_cli_version(runtime, package), f"{runtime.agent_image}:{IMAGE_CLI_PREFIX}"
            fix = "rebuild the agent image from containers/agent.def"
        detail = f"{package} {have or 'not installed'} in {where} (pinned {want})"
        checks.append(Check(f"agent CLI {package}", have == want, detail, fix))
    return checks


def run_checks(campaign: Campaign, host_env: Mapping[str, str] | None = None) -> list[Check]:
    host_env = dict(os.environ if host_env is None else host_env)
    site = campaign.settings.site
    steps: list[Callable[[], Check | list[Check]]] = [
        lambda: check_runtime(site, host_env),
        lambda: check_sandbox(site, host_env),
        lambda: check_cgroup(site),
        lambda: check_rlimits(site),
        lambda: check_images(site),
        lambda: check_nvccli(site),
        lambda: check_hf_cache(site),
        lambda: check_scoring_data(campaign),
        lambda: check_tmp_root(site),
        lambda: check_results_dir(campaign),
        lambda: check_evidence_recorder(campaign),
        lambda: check_host_cache_vars(host_env),
        lambda: check_agent_clis(campaign),
    ]
    checks: list[Check] = []
    for step in steps:
        result = step()
        checks.extend(result if isinstance(result, list) else [result])
    return checks
