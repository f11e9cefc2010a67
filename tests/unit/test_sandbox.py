"""The exact apptainer command lines, and the sandbox view under runtime none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.sandbox import Bind, LaunchRequest, Sandbox

SECRET = "sk-live-THIS-MUST-NEVER-BE-ON-ARGV"


def site(**knobs):
    base = {
        "runtime": "apptainer",
        "apptainer": "apptainer",
        "agent_image": "/images/agent.sif",
        "scorer_image": "/images/scorer.sif",
        "sandbox_home": "/home/ben",
        "cleanenv": True,
        "isolate_gpus": False,
        "binds": [],
        "hf_home": None,
        "hf_cache_mode": "none",
    }
    return campaign_with_defaults({"site": {**base, **knobs}}).settings.site.runtime


HOST = {"PATH": "/usr/bin:/bin", "LANG": "en_US.UTF-8", "ANTHROPIC_API_KEY": SECRET, "HUGGINGFACE_HUB_CACHE": "/x"}
JOB = Path("/scratch/ptb-cell/home")
TMP = Path("/scratch/ptb-cell/tmp")


def agent(sandbox: Sandbox, **kw):
    args = {
        "role": "agent",
        "command": ["bash", "../solve.sh"],
        "job_home": JOB,
        "job_tmp": TMP,
        "workdir": "task",
        "env": {"NUM_GPUS": "1", "PROMPT": "train it"},
        "pass_names": ["ANTHROPIC_API_KEY", "NOT_SET"],
        "gpus": ["GPU-1234"],
    }
    args.update(kw)
    return sandbox.launch(LaunchRequest(**args))


def test_agent_default_argv_and_env():
    launch = agent(Sandbox(site(), HOST))
    assert launch.argv == [
        "apptainer", "exec", "--nv", "-c", "--cleanenv", "--writable-tmpfs",
        "--home", "/scratch/ptb-cell/home:/home/ben", "--pwd", "/home/ben/task",
        "--bind", "/scratch/ptb-cell/tmp:/tmp",
        "/images/agent.sif", "bash", "../solve.sh",
    ]  # fmt: skip
    env = launch.env
    assert env["APPTAINERENV_ANTHROPIC_API_KEY"] == SECRET
    assert "APPTAINERENV_NOT_SET" not in env
    assert env["APPTAINERENV_HOME"] == "/home/ben" and env["APPTAINERENV_TMPDIR"] == "/tmp"
    hub = "/home/ben/.cache/huggingface/hub"
    assert env["APPTAINERENV_HF_HUB_CACHE"] == env["APPTAINERENV_HUGGINGFACE_HUB_CACHE"] == hub
    assert env["APPTAINERENV_HF_HOME"] == "/home/ben/.cache/huggingface"
    assert env["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == "GPU-1234"
    assert env["PATH"] == HOST["PATH"]
    # values never on the command line; only names are recorded
    assert not any(SECRET in a or "train it" in a for a in launch.argv)
    assert "ANTHROPIC_API_KEY" in launch.visible_names and SECRET not in json.dumps(launch.visible_names)
    assert not any(k.startswith("APPTAINERENV_") for k in launch.visible_names)


def test_agent_isolated_read_only_cache_xdg_and_extra_binds(tmp_path):
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    s = Sandbox(
        site(isolate_gpus=True, hf_home="/shared/hf", hf_cache_mode="ro", binds=[{"src": "/data", "read_only": True}]),
        {**HOST, "XDG_CACHE_HOME": str(xdg)},
    )
    launch = agent(
        s, hf_home_host=Path("/shared/hf"), hf_read_only=True, binds=[Bind(Path("/models/m"), "/models/m", True)]
    )
    assert launch.argv == [
        "apptainer", "exec", "--nv", "-c", "--nvccli", "--cleanenv", "--writable-tmpfs",
        "--home", "/scratch/ptb-cell/home:/home/ben", "--pwd", "/home/ben/task",
        "--bind", "/scratch/ptb-cell/tmp:/tmp",
        "--bind", "/shared/hf:/hf_home:ro",
        "--bind", f"{xdg}:{xdg}",
        "--bind", "/models/m:/models/m:ro",
        "--bind", "/data:/data:ro",
        "/images/agent.sif", "bash", "../solve.sh",
    ]  # fmt: skip
    assert launch.env["NVIDIA_VISIBLE_DEVICES"] == "GPU-1234"  # read by --nvccli on the host side
    assert launch.env["APPTAINERENV_XDG_CACHE_HOME"] == str(xdg)
    assert launch.env["APPTAINERENV_HF_HUB_CACHE"] == "/hf_home/hub"


def test_overlay_cache_is_bound_writable_and_xdg_absent_stays_in_home():
    s = Sandbox(site(hf_home="/shared/hf", hf_cache_mode="overlay"), {**HOST, "XDG_CACHE_HOME": "/does/not/exist"})
    merged = Path("/scratch/ptb-cell/hf_merged")
    launch = agent(s, hf_home_host=merged)
    assert ["--bind", f"{merged}:/hf_home"] == launch.argv[12:14]
    assert not any("/does/not/exist" in a for a in launch.argv)
    assert launch.env["APPTAINERENV_XDG_CACHE_HOME"] == "/home/ben/.cache"


def test_isolation_without_gpus_exposes_none():
    launch = agent(Sandbox(site(isolate_gpus=True), HOST), gpus=[])
    assert launch.env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert launch.env["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == ""  # a CPU cell sees no card


def test_no_cleanenv_knob():
    assert "--cleanenv" not in agent(Sandbox(site(cleanenv=False), HOST)).argv


@pytest.mark.parametrize(
    "cell_dir", ["/work/checkout/results/cells/a/t/m/1h-1gpu-run1", "/lustre/ptb/cells/a/t/m/1h-1gpu-run1"]
)
def test_scorer_binds_the_cell_dir_wherever_it_is(cell_dir):
    launch = Sandbox(site(), HOST).launch(
        LaunchRequest(
            role="scorer",
            command=["python", "evaluate.py", "--model-path", f"{cell_dir}/final_model"],
            job_home=JOB,
            job_tmp=TMP,
            workdir="task",
            env={},
            binds=[Bind(Path(cell_dir), cell_dir)],
        )
    )
    assert launch.argv == [
        "apptainer", "exec", "--nv", "-c", "--cleanenv", "--writable-tmpfs",
        "--home", "/scratch/ptb-cell/home:/home/ben", "--pwd", "/home/ben/task",
        "--bind", "/scratch/ptb-cell/tmp:/tmp",
        "--bind", f"{cell_dir}:{cell_dir}",
        "/images/scorer.sif", "python", "evaluate.py", "--model-path", f"{cell_dir}/final_model",
    ]  # fmt: skip


def test_apptainer_needs_an_image():
    with pytest.raises(ConfigError, match="site.agent_image"):
        agent(Sandbox(site(agent_image=None), HOST))


# -- runtime none: the same view, for real ---------------------------------------------------

PROBE = r"""
import getpass, json, os, tempfile
from pathlib import Path
import huggingface_hub.constants as c
from torch._inductor.runtime.runtime_utils import cache_dir as inductor_cache_dir
print(json.dumps({
    "hf_hub_cache": c.HF_HUB_CACHE,
    "hf_home": c.HF_HOME,
    # vLLM (vllm/envs.py): VLLM_CACHE_ROOT defaults to $XDG_CACHE_HOME/vllm, else ~/.cache/vllm
    "vllm": os.path.expanduser(os.getenv("VLLM_CACHE_ROOT",
            os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "vllm"))),
    # triton (triton/runtime/cache.py): $TRITON_CACHE_DIR, else $TRITON_HOME or ~ / .triton/cache
    "triton": os.getenv("TRITON_CACHE_DIR",
            os.path.join(os.getenv("TRITON_HOME", os.path.expanduser("~")), ".triton", "cache")),
    "inductor": inductor_cache_dir(),
    "env": sorted(os.environ),
}))
"""


def run_probe(tmp_path: Path, host_env: dict[str, str]) -> dict:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    (home / "task").mkdir(parents=True)
    tmp.mkdir()
    s = Sandbox(site(runtime="none"), host_env)
    launch = s.launch(
        LaunchRequest(
            role="agent",
            command=["python", "-c", PROBE],
            job_home=home,
            job_tmp=tmp,
            workdir="task",
            env={"NUM_GPUS": "0"},
        )
    )
    res = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_none_runtime_host_hub_cache_cannot_win(tmp_path):
    import os

    host = {"PATH": os.environ["PATH"], "HUGGINGFACE_HUB_CACHE": "/somewhere/else", "HF_HOME": "/elsewhere/too"}
    seen = run_probe(tmp_path, host)
    assert seen["hf_hub_cache"] == str(tmp_path / "home/.cache/huggingface/hub")
    assert seen["hf_home"] == str(tmp_path / "home/.cache/huggingface")
    # no XDG on the host: every compiler cache stays in the job dir, never in a shared place
    assert seen["vllm"] == str(tmp_path / "home/.cache/vllm")
    assert seen["triton"] == str(tmp_path / "home/.triton/cache")
    assert seen["inductor"].startswith(str(tmp_path / "tmp"))


def test_none_runtime_binds_through_an_existing_xdg_cache(tmp_path):
    import os

    xdg = tmp_path / "xdg"
    xdg.mkdir()
    seen = run_probe(tmp_path, {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(xdg), "SECRET_TOKEN": "x" * 20})
    assert seen["vllm"] == str(xdg / "vllm")
    assert seen["hf_hub_cache"] == str(tmp_path / "home/.cache/huggingface/hub"), "HF cache stays the harness's"
    assert "SECRET_TOKEN" not in seen["env"]
