"""The bwrap sandbox's GPU fence: only the cell's cards' device files are bound.

The driver lists its cards in ``/proc/driver/nvidia/gpus/<bus id>/information`` (each
card's UUID and its device minor: ``/dev/nvidia<minor>``). A cell's GPU ids (UUIDs as
NVML names them, or NVML indices, which follow PCI bus order) are resolved there to the
cards' device files; the sandbox gets those, plus the shared control files (nvidiactl,
nvidia-uvm, nvidia-uvm-tools, nvidia-modeset) where present, and nothing of the other
cards. With every capability dropped the agent cannot mknod the others. As the NVIDIA
container toolkit does, the other cards' ``/proc/driver/nvidia/gpus`` entries are hidden
(an empty tmpfs over each), so NVML inside lists only the cell's cards.

A cell without GPUs gets no NVIDIA device file at all. A MIG instance cannot be fenced
this way (its card's device file serves every instance of the card): it is refused.

``root`` is where the fence looks for ``dev/`` and ``proc/driver/nvidia/gpus`` (``/`` on a
real site; tests point it at faked files, as no GPU exists there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ptb_harness.core.errors import HarnessError

#: device files every CUDA process needs besides its cards', bound where present
SHARED_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
#: the driver's list of cards, under the fence's root
CARDS_DIR = "proc/driver/nvidia/gpus"


@dataclass(frozen=True)
class Card:
    bus_id: str
    uuid: str
    minor: int


@dataclass(frozen=True)
class Fence:
    """What a sandbox gets: host device files -> their paths inside, and the inside
    ``/proc`` paths to hide (the other cards' entries)."""

    devices: tuple[tuple[str, str], ...] = ()
    hidden: tuple[str, ...] = ()

    def bwrap_args(self) -> list[str]:
        """After ``--proc`` and ``--dev``: the device binds and the hidden entries."""
        argv = []
        for src, dst in self.devices:
            argv += ["--dev-bind", src, dst]
        for path in self.hidden:
            argv += ["--tmpfs", path]
        return argv


def parse_information(text: str) -> tuple[str, int] | None:
    """(UUID, device minor) from a card's ``information`` file, None if it names neither."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    try:
        return fields["GPU UUID"], int(fields["Device Minor"])
    except (KeyError, ValueError):
        return None


def read_cards(root: Path) -> list[Card]:
    """The driver's cards in PCI bus order (NVML's index order)."""
    base = root / CARDS_DIR
    cards = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        try:
            parsed = parse_information((entry / "information").read_text())
        except OSError:
            continue
        if parsed is not None:
            cards.append(Card(entry.name, parsed[0], parsed[1]))
    return cards


def _index(gpu_id: str) -> int | None:
    """The NVML index an id names (``3``, ``CUDA3``), None for a UUID."""
    key = gpu_id.strip()
    if key.upper().startswith("CUDA"):
        key = key[4:]
    return int(key) if key.isdigit() else None


def resolve(gpu_id: str, cards: Sequence[Card]) -> Card:
    """The card a cell's GPU id names: a UUID (or a unique prefix of one) or an index."""
    if gpu_id.strip().upper().startswith("MIG-"):
        raise HarnessError(
            f"GPU {gpu_id}: a MIG instance cannot be fenced under bwrap (its card's device file serves every "
            "instance); use whole cards, or runtime apptainer with site.isolate_gpus"
        )
    index = _index(gpu_id)
    if index is not None:
        if index < len(cards):
            return cards[index]
        raise HarnessError(f"GPU {gpu_id}: the driver lists {len(cards)} card(s)")
    key = gpu_id.strip().lower()
    matches = [c for c in cards if c.uuid.lower() == key] or [c for c in cards if c.uuid.lower().startswith(key)]
    if len(matches) != 1:
        raise HarnessError(f"GPU {gpu_id}: {'no card' if not matches else 'more than one card'} has this UUID")
    return matches[0]


def gpu_fence(gpu_ids: Sequence[str], root: Path = Path("/"), proc: Path = Path("/proc")) -> Fence:
    """The fence of a cell with these GPU ids (none: no NVIDIA device file at all). The
    other cards' driver entries are hidden where ``proc`` (the host's /proc, whose driver
    entries the sandbox's own /proc shows too) has them."""
    if not gpu_ids:
        return Fence()
    cards = read_cards(root)
    chosen = list(dict.fromkeys(resolve(g, cards) for g in gpu_ids))
    dev = root / "dev"
    missing = [f"nvidia{c.minor}" for c in chosen if not (dev / f"nvidia{c.minor}").exists()]
    if missing:
        raise HarnessError(f"GPU device file {dev / missing[0]} not found (the driver lists its card)")
    names = [f"nvidia{c.minor}" for c in chosen] + [n for n in SHARED_DEVICES if (dev / n).exists()]
    devices = tuple((str(dev / n), f"/dev/{n}") for n in names)
    entries = proc / CARDS_DIR.removeprefix("proc/")
    hidden = [f"/{CARDS_DIR}/{c.bus_id}" for c in cards if c not in chosen and (entries / c.bus_id).is_dir()]
    return Fence(devices, tuple(hidden))
