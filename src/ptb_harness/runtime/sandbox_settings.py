"""The site's sandbox knobs, typed (built by ptb_harness.campaign.reader).

Apart from ``sandbox`` so that loading a campaign's settings (status, collect) does not
load the code that builds launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Role = Literal["agent", "scorer"]


@dataclass(frozen=True)
class Bind:
    src: Path
    dst: str
    read_only: bool = False

    def arg(self) -> str:
        return f"{self.src}:{self.dst}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class RuntimeSettings:
    """The site's sandbox knobs (site.runtime, site.apptainer, the images, ...)."""

    runtime: str = "none"
    bwrap: str = "bwrap"
    apptainer: str = "apptainer"
    agent_image: str | None = None
    scorer_image: str | None = None
    sandbox_home: str = "/home/ben"
    cleanenv: bool = True
    isolate_gpus: bool = False
    #: extra binds into every sandbox (site.binds)
    binds: tuple[Bind, ...] = ()
    #: where the pinned agent CLIs are installed (runtime none puts them on the agent's PATH)
    agent_cli_prefix: str | None = None
    #: the size of a bwrap sandbox's own /dev/shm (a tmpfs); None = bwrap's /dev tmpfs
    shm_bytes: int | None = None
    #: a bwrap sandbox's network (site.network): ``internet`` (its own namespace through
    #: slirp4netns, the host unreachable) or ``none`` (its own namespace, loopback only)
    network: str = "internet"
    #: where the bwrap GPU fence finds dev/nvidia* and proc/driver/nvidia/gpus (site.gpu_device_root)
    gpu_device_root: str = "/"

    def image(self, role: Role) -> str | None:
        return self.agent_image if role == "agent" else self.scorer_image
