"""The agent's caps: defaults from the job's resources, the rlimits its process gets, and
how a cap that was hit is named (pure decisions, table tests)."""

from __future__ import annotations

import resource

import pytest

from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.runtime.limits import AgentLimits, cap_hit, default_memory_mb, rlimits

LIMITS = AgentLimits(memory_bytes=256 * 2**20, pids_max=100, nofile=4096, fsize_bytes=10**9)


@pytest.mark.parametrize(
    ("job_mb", "cap_mb"),
    [(65536, 64512), (4096, 3072), (2048, 1536), (100, 75)],
)
def test_memory_cap_leaves_the_harness_its_share(job_mb, cap_mb):
    assert default_memory_mb(job_mb) == cap_mb


def test_site_knobs_resolve_their_nulls_from_the_solve_job():
    site = campaign_with_defaults({"site": {"solve_resources": {"mem_mb": 8192, "disk_mb": 0}}}).settings.site
    assert site.agent_limits == AgentLimits(
        memory_bytes=7168 * 2**20, pids_max=16384, nofile=65536, fsize_bytes=None, cgroup="auto"
    )
    assert site.final_model_max_files == 10000 and site.agent_files_max_files == 200000
    knobs = {"memory_mb": 512, "file_max_gb": 2, "cgroup": "required", "shm_mb": 64}
    site = campaign_with_defaults({"site": {"agent_limits": knobs}}).settings.site
    assert site.agent_limits.memory_bytes == 512 * 2**20 and site.agent_limits.fsize_bytes == 2 * 10**9
    assert site.agent_limits.cgroup == "required" and site.runtime.shm_bytes == 64 * 2**20
    # the default disk (400 GB scratch) bounds one file
    assert campaign_with_defaults({}).settings.site.agent_limits.fsize_bytes == 400000 * 10**6


NPROC = resource.RLIMIT_NPROC


@pytest.mark.parametrize(
    ("root", "pids_in_cgroup", "nproc"),
    [
        (True, True, None),  # the cgroup counts the cell's tasks
        (True, False, None),  # uid 0 is exempt from NPROC: setting it would only mislead
        (False, True, None),
        (False, False, 100 + 37),  # the user's 37 processes plus the cell's cap
    ],
)
def test_nproc_only_where_it_counts_the_cells_processes(root, pids_in_cgroup, nproc):
    got = {
        r: (soft, hard)
        for r, soft, hard in rlimits(LIMITS, root=root, pids_in_cgroup=pids_in_cgroup, user_processes=37)
    }
    assert got[resource.RLIMIT_NOFILE] == (4096, 4096)
    assert got[resource.RLIMIT_CORE] == (0, 0)
    assert got[resource.RLIMIT_FSIZE] == (10**9, 10**9)
    assert got.get(NPROC) == ((nproc, nproc) if nproc else None)


def test_unlimited_file_size_sets_no_fsize():
    unlimited = AgentLimits(memory_bytes=2**30, pids_max=10, nofile=64, fsize_bytes=None)
    assert resource.RLIMIT_FSIZE not in [
        r for r, *_ in rlimits(unlimited, root=True, pids_in_cgroup=True, user_processes=0)
    ]


RECORDED = {"memory_bytes": 4096 * 2**20, "pids_max": 2000}


@pytest.mark.parametrize(
    ("hits", "said"),
    [
        ({}, None),
        ({"memory": 0, "process": 0}, None),
        ({"memory": 1}, "the agent hit its memory cap (4096 MiB; 1 process killed)"),
        ({"memory": 3}, "the agent hit its memory cap (4096 MiB; 3 processes killed)"),
        ({"process": 1}, "the agent hit its process cap (2000; 1 fork refused)"),
        (
            {"memory": 2, "process": 9},
            "the agent hit its memory cap (4096 MiB; 2 processes killed) and its process cap (2000; 9 forks refused)",
        ),
    ],
)
def test_a_cap_hit_is_named_with_its_size_and_count(hits, said):
    assert cap_hit(hits, RECORDED) == said
