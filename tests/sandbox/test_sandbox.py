"""The exact apptainer command lines, and the sandbox view under runtime none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.core.errors import ConfigError
from ptb_harness.runtime.sandbox import Bind, LaunchRequest, Sandbox, bwrap_isolation

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
        "apptainer", "exec", "--nv", "-c", "--cleanenv", "--pid", "--writable-tmpfs",
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


def test_agent_isolated_read_only_cache_no_host_xdg_and_extra_binds(tmp_path):
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
        "apptainer", "exec", "--nv", "-c", "--nvccli", "--cleanenv", "--pid", "--writable-tmpfs",
        "--home", "/scratch/ptb-cell/home:/home/ben", "--pwd", "/home/ben/task",
        "--bind", "/scratch/ptb-cell/tmp:/tmp",
        "--bind", "/shared/hf:/hf_home:ro",
        "--bind", "/models/m:/models/m:ro",
        "--bind", "/data:/data:ro",
        "/images/agent.sif", "bash", "../solve.sh",
    ]  # fmt: skip
    assert launch.env["NVIDIA_VISIBLE_DEVICES"] == "GPU-1234"  # read by --nvccli on the host side
    # the host's XDG cache is never bound (a channel between cells and into the scorer)
    assert launch.env["APPTAINERENV_XDG_CACHE_HOME"] == "/home/ben/.cache"
    assert not any(str(xdg) in a for a in launch.argv)
    assert launch.env["APPTAINERENV_HF_HUB_CACHE"] == "/hf_home/hub"


def test_overlay_cache_is_bound_writable_and_xdg_absent_stays_in_home():
    s = Sandbox(site(hf_home="/shared/hf", hf_cache_mode="overlay"), {**HOST, "XDG_CACHE_HOME": "/does/not/exist"})
    merged = Path("/scratch/ptb-cell/hf_merged")
    launch = agent(s, hf_home_host=merged)
    assert ["--bind", f"{merged}:/hf_home"] == launch.argv[13:15]
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
def test_scorer_sees_final_model_read_only_wherever_it_is(cell_dir):
    model = f"{cell_dir}/final_model"
    launch = Sandbox(site(), HOST).launch(
        LaunchRequest(
            role="scorer",
            command=["python", "evaluate.py", "--model-path", model, "--json-output-file", "/tmp/metrics.json"],
            job_home=JOB,
            job_tmp=TMP,
            workdir="task",
            env={},
            binds=[Bind(Path(model), model, read_only=True)],
        )
    )
    # the cell dir itself (solve.json, other records) is not in the scorer's view
    assert launch.argv == [
        "apptainer", "exec", "--nv", "-c", "--cleanenv", "--pid", "--writable-tmpfs",
        "--home", "/scratch/ptb-cell/home:/home/ben", "--pwd", "/home/ben/task",
        "--bind", "/scratch/ptb-cell/tmp:/tmp",
        "--bind", f"{model}:{model}:ro",
        "/images/scorer.sif", "python", "evaluate.py", "--model-path", model, "--json-output-file", "/tmp/metrics.json",
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


def test_none_runtime_ignores_the_host_xdg_cache(tmp_path):
    import os

    xdg = tmp_path / "xdg"
    xdg.mkdir()
    seen = run_probe(tmp_path, {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(xdg), "SECRET_TOKEN": "x" * 20})
    assert seen["vllm"] == str(tmp_path / "home/.cache/vllm")
    assert seen["hf_hub_cache"] == str(tmp_path / "home/.cache/huggingface/hub"), "HF cache stays the harness's"
    assert "SECRET_TOKEN" not in seen["env"]


# -- runtime bwrap: for real (bubblewrap runs here) -------------------------------------------

BWRAP_PROBE = r"""
set -u
echo "home=$HOME pwd=$(pwd) tmp=$TMPDIR"
echo "pid=$$ ppid=$PPID maxpid=$(ls /proc | grep '^[0-9]' | sort -n | tail -1)"
tr '\0' '\n' < /proc/1/environ | sed 's/=.*//' | sort | tr '\n' ' '; echo
for p in "$CHECKOUT/README.md" "$CHECKOUT/src" "$RESULTS" /root/.bashrc /etc/shadow "$OTHER"; do
    test -e "$p" && echo "SEES $p"
done
touch /usr/x 2>/dev/null && echo "WROTE /usr"
touch "$MODEL/x" 2>/dev/null && echo "WROTE model"
cat "$MODEL/config.json"; echo
python -c 'import sys; print("python", sys.version_info[0])'
kill -KILL 1; echo "after kill 1"
"""


def test_bwrap_sandbox_sees_only_its_job_and_cannot_touch_the_harness(tmp_path):
    import os

    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True)
    tmp.mkdir()
    model = tmp_path / "models/m1"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"base": 1}')
    other = tmp_path / "results/cells/other"
    other.mkdir(parents=True)
    host = {"PATH": os.environ["PATH"], "HOST_SECRET": "s3cr3t-host-only-value", "MY_API_KEY": "allowed-key-value"}
    s = Sandbox(site(runtime="bwrap", bwrap="bwrap"), host)
    env = {"CHECKOUT": str(Path(__file__).resolve().parents[2]), "RESULTS": str(tmp_path / "results")}
    env |= {"OTHER": str(other), "MODEL": str(model)}
    launch = s.launch(
        LaunchRequest(
            role="agent",
            command=["bash", "-c", BWRAP_PROBE],
            job_home=home,
            job_tmp=tmp,
            workdir="task",
            env=env,
            pass_names=["MY_API_KEY"],
            binds=[Bind(model, str(model), read_only=True)],
        )
    )
    assert "HOST_SECRET" not in launch.env and launch.env["MY_API_KEY"] == "allowed-key-value"
    res = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=60)
    out = res.stdout
    assert res.returncode == 0, res.stderr
    assert "home=/home/ben pwd=/home/ben/task tmp=/tmp" in out
    # its own PID namespace: bwrap's init is pid 1, its parent; nothing of the host is listed
    assert "pid=2 ppid=1" in out and int(out.split("maxpid=")[1].split()[0]) < 20
    # the one harness process it sees holds exactly the sandbox's variables
    names = next(line for line in out.splitlines() if "MY_API_KEY" in line).split()
    assert set(names) == set(launch.visible_names) and "HOST_SECRET" not in names
    assert "SEES" not in out and "WROTE" not in out, out
    assert '{"base": 1}' in out and "python 3" in out and "after kill 1" in out
    assert (home / "task").is_dir() and not (model / "x").exists()


def test_bwrap_dev_shm_is_a_sized_tmpfs_of_its_own(tmp_path):
    """The sandbox's /dev/shm holds at most site.agent_limits.shm_mb (bwrap's /dev tmpfs
    would take half of RAM, outside every cap when no cgroup holds the cell)."""
    import os

    home, tmp = tmp_path / "job/home", tmp_path / "job/tmp"
    (home / "task").mkdir(parents=True)
    tmp.mkdir()
    settings = site(runtime="bwrap", bwrap="bwrap", agent_limits={"shm_mb": 8})
    assert settings.shm_bytes == 8 * 2**20
    launch = Sandbox(settings, {"PATH": os.environ["PATH"]}).launch(
        LaunchRequest(
            role="agent",
            command=[
                "bash",
                "-c",
                "df -B1 --output=size /dev/shm | tail -1; stat -c %a /dev/shm; "
                "head -c 20000000 /dev/zero > /dev/shm/x; echo rc=$?; stat -c %s /dev/shm/x",
            ],
            job_home=home,
            job_tmp=tmp,
            workdir="task",
            env={},
        )
    )
    assert launch.argv[launch.argv.index("/dev/shm") - 5 :][:6] == [
        "--perms", "1777", "--size", str(8 * 2**20), "--tmpfs", "/dev/shm",
    ]  # fmt: skip
    res = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=60)
    size, perms, rc, written = res.stdout.split()
    assert int(size) == 8 * 2**20 and perms == "1777"
    assert rc != "rc=0" and int(written) <= 8 * 2**20, res.stdout


def test_shm_defaults_to_half_the_agents_memory_cap():
    limits = campaign_with_defaults({"site": {"solve_resources": {"mem_mb": 8192}}}).settings.site
    assert limits.agent_limits.memory_bytes == (8192 - 1024) * 2**20
    assert limits.runtime.shm_bytes == (8192 - 1024) * 2**19


def test_bwrap_isolation_flags_by_version():
    flags = bwrap_isolation((0, 8, 0))
    for flag in ("--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc", "--unshare-uts"):
        assert flag in flags
    assert flags[flags.index("--cap-drop") + 1] == "ALL" and "--new-session" in flags
    assert flags[flags.index("--hostname") + 1] == "ptb-sandbox" and "--unshare-cgroup-try" in flags
    # bwrap before 0.8 has no --disable-userns (it would refuse the whole command line)
    assert "--disable-userns" not in bwrap_isolation((0, 7, 0)) and "--unshare-user" in bwrap_isolation(())


@pytest.mark.parametrize(
    ("dst", "hides"),
    [("/tmp", "/tmp"), ("/tmp/", "/tmp"), ("/", "/home/ben"), ("/home", "/home/ben"), ("/home/ben", "/home/ben")],
)
def test_a_bind_over_home_or_tmp_or_above_them_is_one_config_error(dst, hides):
    from ptb_harness.runtime.sandbox import check_no_shadowing

    with pytest.raises(ConfigError, match=f"site.binds: {dst} would hide the sandbox's {hides}"):
        check_no_shadowing("/home/ben", [dst], "site.binds")
    # below them (a venv, a model, a CLI under /tmp or HOME) is bound over the job's dirs
    check_no_shadowing("/home/ben", ["/tmp/checkout/.venv", "/home/ben/models/m1", "/hf_home", "/tmpx"], "site.binds")


def test_a_site_bind_hiding_tmp_stops_the_run_before_any_cell():
    sandbox = Sandbox(site(runtime="bwrap", binds=[{"src": "/srv/scratch", "dst": "/tmp"}]), {"PATH": "/usr/bin:/bin"})
    with pytest.raises(ConfigError, match=r"site.binds: /tmp would hide the sandbox's /tmp"):
        sandbox.check_host()
