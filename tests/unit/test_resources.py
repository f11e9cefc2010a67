from ptb_harness.campaign.cells import Cell
from ptb_harness.campaign.config import campaign_with_defaults
from ptb_harness.campaign.resources import job_resources, job_threads, solve_runtime_minutes

CONFIG = {
    "name": "c1",
    "solve": {"timeout_margin_minutes": 5, "kill_grace_seconds": 30},
    "site": {
        "solve_overhead_minutes": 30,
        "evaluate_runtime_minutes": 240,
        "slurm_gpu_style": "gpu",
        "solve_resources": {"mem_mb": 1000, "disk_mb": 2000, "cpus": 4},
        "evaluate_resources": {"mem_mb": 500, "disk_mb": 100, "cpus": 2},
    },
}
SETTINGS = campaign_with_defaults(CONFIG).settings


def test_solve_walltime_is_budget_margin_grace_and_overhead():
    assert solve_runtime_minutes(Cell("a", "t", "m", "10", 1, 1), SETTINGS) == 600 + 5 + 1 + 30  # 30 s grace rounds up
    assert solve_runtime_minutes(Cell("a", "t", "m", "0.5", 1, 1), SETTINGS) == 30 + 5 + 1 + 30


def test_gpu_requests_in_both_styles_and_for_htcondor():
    cell = Cell("a", "t", "m", "1", 2, 1)
    res = job_resources(cell, SETTINGS, "solve")
    assert (res["gpu"], res["gres"], res["request_gpus"]) == (2, "", 2)
    gres_style = campaign_with_defaults({**CONFIG, "site": {**CONFIG["site"], "slurm_gpu_style": "gres"}}).settings
    gres = job_resources(cell, gres_style, "solve")
    assert (gres["gpu"], gres["gres"]) == (0, "gpu:2")
    cpu = job_resources(Cell("a", "t", "m", "1", 0, 1), SETTINGS, "solve")
    assert (cpu["gpu"], cpu["gres"], cpu["request_gpus"]) == (0, "", 0)
    assert set(cpu) == set(res), "every rule has one key set"


def test_sizes_walltime_and_classads():
    res = job_resources(Cell("a", "t", "m", "1", 1, 1), SETTINGS, "evaluate")
    assert (res["runtime"], res["allowed_job_duration"]) == (240, 240 * 60)
    assert (res["mem_mb"], res["htcondor_request_mem_mb"], res["disk_mb"]) == (500, 500, 100)
    assert res["classad_PtbCampaign"] == "c1" and res["classad_PtbCell"] == "a.t.m.1h-1gpu-run1"
    assert job_threads(SETTINGS, "solve") == 4 and job_threads(SETTINGS, "evaluate") == 2


def test_rule_resources_are_functions_of_the_wildcards_where_cells_differ():
    from ptb_harness.campaign.resources import rule_resources

    rules = rule_resources(campaign_with_defaults({**CONFIG, "hours": [1, 2], "num_gpus": [1, 3]}), "solve")
    wildcards = {"agent": "a", "task": "t", "model": "m", "hours": "2", "num_gpus": "3", "run": "1"}
    assert set(rules) == set(job_resources(Cell("a", "t", "m", "1", 0, 1), SETTINGS, "solve"))
    assert rules["runtime"](wildcards) == 120 + 5 + 1 + 30
    assert rules["gpu"](wildcards) == 3 and rules["classad_PtbCell"](wildcards) == "a.t.m.2h-3gpu-run1"
    assert rules["mem_mb"] == 1000 and rules["classad_PtbCampaign"] == "c1"  # the same for every cell: constants


def test_rule_resources_of_a_single_setting_are_constants_but_the_cell_name():
    from ptb_harness.campaign.resources import rule_resources

    rules = rule_resources(campaign_with_defaults({**CONFIG, "hours": [10], "num_gpus": [2]}), "solve")
    assert rules["runtime"] == 600 + 5 + 1 + 30 and rules["gpu"] == 2 and rules["request_gpus"] == 2
    assert [k for k, v in rules.items() if callable(v)] == ["classad_PtbCell"]
