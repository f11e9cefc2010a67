"""Sandboxes for the agent and the scorer: one view, two runtimes.

``none`` runs a clean host subprocess (laptops, CI, the demo); ``apptainer`` runs the
same command in a container. Both give the process the same view: the same variable
names, HOME with the task in HOME/task, TMPDIR, one Hugging Face cache named by all of
its variables, the XDG cache, and the cell's GPUs.

Secrets and every other value travel only in the environment of the launched process:
with apptainer as ``APPTAINERENV_<NAME>`` variables, never as ``--env NAME=value`` on the
command line (visible in ``ps`` and in logs) and never in a file. /proc/PID/environ is
readable only by the same user and root.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.procs import ProcessResult, run_budgeted
from ptb_harness.runtime.sandbox_settings import Bind, Role, RuntimeSettings

#: Where the shared Hugging Face home appears inside an apptainer sandbox.
SANDBOX_HF_HOME = "/hf_home"
#: The Hugging Face variables that choose a cache, highest priority first in
#: huggingface_hub (HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > $HF_HOME/hub). All are set
#: together, so a host-wide value (e.g. a cluster's HUGGINGFACE_HUB_CACHE) can never win.
HF_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE")


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


@dataclass(frozen=True)
class Launch:
    """What to execute on the host: argv, its whole environment, and its cwd."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    #: the names (never values) of the variables the sandboxed process sees
    visible_names: list[str] = field(default_factory=list)

    def run(
        self, output: Path, *, budget_s: float, kill_grace_s: float, output_mode: int = 0o600, append: bool = False
    ) -> ProcessResult:
        """Run it under its budget, output into ``output`` (appended to with ``append``;
        see ``run_budgeted``)."""
        return run_budgeted(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            output=output,
            budget_s=budget_s,
            kill_grace_s=kill_grace_s,
            output_mode=output_mode,
            append=append,
        )


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
    def host_xdg_cache(self) -> Path | None:
        """The host's XDG cache dir, bound through when it exists: vLLM's and
        triton's caches would otherwise fill the 64 MiB --writable-tmpfs."""
        value = self.host_env.get("XDG_CACHE_HOME")
        return Path(value) if value and Path(value).is_dir() else None

    def view(self, job_home: Path, job_tmp: Path, hf_home_host: Path | None) -> View:
        xdg = self.host_xdg_cache()
        if self.runtime == "none":
            home = str(job_home)
            return View(
                home=home,
                tmp=str(job_tmp),
                hf_home=str(hf_home_host) if hf_home_host else f"{home}/.cache/huggingface",
                xdg_cache=str(xdg) if xdg else f"{home}/.cache",
            )
        home = self.settings.sandbox_home
        return View(
            home=home,
            tmp="/tmp",
            hf_home=SANDBOX_HF_HOME if hf_home_host else f"{home}/.cache/huggingface",
            xdg_cache=str(xdg) if xdg else f"{home}/.cache",
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
        if self.runtime == "none":
            path = self.host_env.get("PATH", os.defpath)
            # no image: the sandbox's `python` is the harness's interpreter, and the
            # pinned agent CLIs (`ptb-harness setup-agents`) come before the host's
            dirs = [str(Path(sys.executable).parent), path]
            if r.role == "agent":
                prefix = Path(self.settings.agent_cli_prefix or "resources/agent-cli").resolve()
                dirs.insert(0, str(prefix / "node_modules" / ".bin"))
            inner["PATH"] = os.pathsep.join(dirs)
            return Launch(list(r.command), inner, r.job_home / r.workdir, sorted(inner))
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
        argv += ["--writable-tmpfs", "--home", f"{r.job_home}:{home}", "--pwd", f"{home}/{r.workdir}"]
        all_binds = [Bind(r.job_tmp, "/tmp")]
        if r.hf_home_host is not None:
            all_binds.append(Bind(r.hf_home_host, SANDBOX_HF_HOME, read_only=r.hf_read_only))
        xdg = self.host_xdg_cache()
        if xdg is not None:
            all_binds.append(Bind(xdg, str(xdg)))
        all_binds += [*r.binds, *site.binds]
        for b in all_binds:
            argv += ["--bind", b.arg()]
        argv += [image, *r.command]
        # the apptainer process's own environment: PATH to find apptainer, the GPU list
        # for --nvccli, and every sandbox variable as APPTAINERENV_<NAME>
        env = {"PATH": self.host_env.get("PATH", os.defpath)}
        if site.isolate_gpus:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(r.gpus) if r.gpus else "void"
        for name, value in inner.items():
            env[f"APPTAINERENV_{name}"] = value
        return Launch(argv, env, r.job_home, visible)
