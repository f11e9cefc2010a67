import json

import pytest

from ptb_harness.campaign.agents import load_agent
from ptb_harness.campaign.tasks import load_task
from ptb_harness.core.errors import ConfigError


def make_task(tmp_path, info):
    d = tmp_path / "t"
    d.mkdir()
    (d / "evaluate.py").write_text("")
    if info is not None:
        (d / "info.json").write_text(info if isinstance(info, str) else json.dumps(info))
    return d


def test_ladder_plan_is_every_attempt_in_order(tmp_path):
    d = make_task(
        tmp_path,
        {
            "evaluate": {
                "ladder": [{"attempts": 4}, {"attempts": 3, "max_tokens": 3000}, {"attempts": 2, "max_tokens": 2000}]
            }
        },
    )
    assert load_task(d).attempt_plan() == [None] * 4 + [3000] * 3 + [2000] * 2


def test_default_ladder(tmp_path):
    assert load_task(make_task(tmp_path, None)).attempt_plan() == [None] * 4


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ("{not json", "info.json: not valid JSON"),
        ([], "must hold a JSON object"),
        ({"evaluate": {"ladder": []}}, "evaluate.ladder: must be a non-empty list"),
        ({"evaluate": {"ladder": [{"attempts": 0}]}}, "evaluate.ladder[0].attempts"),
        ({"evaluate": {"ladder": [{"attempts": 1, "max_tokens": -5}]}}, "evaluate.ladder[0].max_tokens"),
        ({"evaluate": {"ladder": [{"attempts": 1, "tokens": 5}]}}, "evaluate.ladder[0]"),
        ({"evaluate": {"token_flag": "--tokens"}}, "evaluate.token_flag"),
        ({"evaluate": {"retries": 3}}, "unknown key(s) retries"),
        ({"required_api_keys": "OPENAI_API_KEY"}, "required_api_keys: must be a JSON list"),
        ({"required_api_keys": ["BAD-NAME"]}, "required_api_keys[0]"),
    ],
)
def test_bad_task_info_names_file_and_key(tmp_path, info, expected):
    with pytest.raises(ConfigError) as e:
        load_task(make_task(tmp_path, info))
    assert expected in str(e.value) and "info.json" in str(e.value)


def make_agent(tmp_path, files):
    d = tmp_path / "a"
    d.mkdir()
    (d / "solve.sh").write_text("")
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def test_passthrough_names_with_comments_and_blanks(tmp_path):
    d = make_agent(
        tmp_path,
        {"env_passthrough.txt": "# cloud creds\nAWS_PROFILE\n\n  GOOGLE_APPLICATION_CREDENTIALS  # adc\nAWS_PROFILE\n"},
    )
    assert load_agent(d).env_passthrough == ("AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"api_keys.json": '"ANTHROPIC_API_KEY"'}, "api_keys.json: must be a JSON list"),
        ({"api_keys.json": "{"}, "api_keys.json: not valid JSON"),
        ({"api_keys.json": '["OK", 3]'}, "api_keys.json[1]"),
        ({"env_passthrough.txt": "GOOD\nAWS_PROFILE=default\n"}, "env_passthrough.txt:2"),
        ({"env_passthrough.txt": "1ABC\n"}, "env_passthrough.txt:1"),
    ],
)
def test_bad_agent_files_name_the_file(tmp_path, files, expected):
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        load_agent(make_agent(tmp_path, files))
