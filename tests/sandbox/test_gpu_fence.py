"""The bwrap GPU fence: a cell's sandbox gets only its cards' device files.

No GPU exists on this machine or in CI: the NVIDIA device files and the driver's card list
are FAKED in a test dir (site.gpu_device_root points the fence there). As root the device
files are real character devices (the numbers of /dev/null, so opening one works); the
real bwrap binds them. What CUDA and NVML do with a fenced set is for the GPU run (README).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import INFORMATION
from conftest import fake_nvidia_root as fake_root

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.core.errors import HarnessError
from ptb_harness.runtime.gpu_fence import Card, gpu_fence, parse_information, read_cards, resolve
from ptb_harness.runtime.sandbox import LaunchRequest, Sandbox


def test_the_drivers_card_list_is_read_in_bus_order():
    assert parse_information(INFORMATION.format(uuid="x", bus="b", minor=7)) == ("GPU-x", 7)
    assert parse_information("Model: something\n") is None


def test_ids_resolve_to_cards_by_uuid_prefix_or_nvml_index(tmp_path):
    cards = read_cards(fake_root(tmp_path))
    assert [c.minor for c in cards] == [2, 0, 1]
    assert resolve("GPU-bbbb2222", cards) == Card("0000:2a:00.0", "GPU-bbbb2222", 0)
    assert resolve("gpu-CCCC", cards).minor == 1  # a unique prefix, any case (HTCondor's short ids)
    assert resolve("0", cards).minor == 2 and resolve("CUDA2", cards).minor == 1  # NVML index = bus order
    for bad, why in (("GPU-dddd", "no card"), ("GPU-", "more than one card"), ("3", "lists 3 card")):
        with pytest.raises(HarnessError, match=why):
            resolve(bad, cards)
    with pytest.raises(HarnessError, match="MIG instance cannot be fenced"):
        resolve("MIG-0f1e2d3c-aaaa-bbbb-cccc-000000000000", cards)


def test_the_fence_binds_the_cells_cards_and_the_shared_files_only(tmp_path):
    root = fake_root(tmp_path)
    fence = gpu_fence(["GPU-bbbb2222", "GPU-cccc3333"], root)
    inside = [dst for _, dst in fence.devices]
    assert inside == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert all(src == str(root / dst.lstrip("/")) for src, dst in fence.devices)
    assert fence.hidden == ()  # a faked root's driver entries are not in the sandbox's /proc to hide
    assert gpu_fence([], root).devices == ()  # a cell without GPUs: no NVIDIA file at all
    (root / "dev/nvidia2").unlink()
    with pytest.raises(HarnessError, match="nvidia2 not found"):
        gpu_fence(["0"], root)


def test_the_other_cards_driver_entries_are_hidden_where_proc_has_them(tmp_path):
    root = fake_root(tmp_path)
    fence = gpu_fence(["GPU-aaaa1111"], root, proc=root / "proc")  # the faked /proc lists all three
    assert fence.hidden == ("/proc/driver/nvidia/gpus/0000:2a:00.0", "/proc/driver/nvidia/gpus/0000:3a:00.0")
    args = fence.bwrap_args()
    assert args[:3] == ["--dev-bind", str(root / "dev/nvidia2"), "/dev/nvidia2"]
    assert args[-4:] == ["--tmpfs", fence.hidden[0], "--tmpfs", fence.hidden[1]]


PROBE = r"""
ls /dev | grep -i nvidia | tr '\n' ' '; echo
head -c 1 /dev/nvidia0 >/dev/null && echo "OPENED nvidia0"
mknod /dev/nvidia2 c 195 2 2>/dev/null && echo "MKNOD nvidia2" || echo "no mknod"
"""


@pytest.mark.parametrize(
    ("gpus", "seen"), [(["GPU-bbbb2222"], "nvidia-uvm nvidia-uvm-tools nvidia0 nvidiactl"), ([], "")]
)
def test_a_real_sandbox_sees_only_its_cards(tmp_path, gpus, seen):
    root = fake_root(tmp_path / "fake")
    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True)
    tmp.mkdir()
    settings = campaign_with_defaults(
        {"site": {"runtime": "bwrap", "network": "none", "gpu_device_root": str(root)}}
    ).settings.site.runtime
    request = LaunchRequest(
        role="agent", command=["bash", "-c", PROBE], job_home=home, job_tmp=tmp, workdir="task", env={}, gpus=gpus
    )
    launch = Sandbox(settings, {"PATH": os.environ["PATH"]}).launch(request)
    res = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    assert lines[0].strip() == seen, res.stdout + res.stderr
    assert ("OPENED nvidia0" in lines) == bool(gpus)  # its card's device file works (a char device as root)
    assert lines[-1] == "no mknod"  # and it cannot make another card's
    assert launch.env["CUDA_VISIBLE_DEVICES"] == ",".join(gpus)
