"""An agent directory, read and checked: solve.sh, payload/, api_keys.json, env_passthrough.txt."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptb_harness.campaign.cells import check_name
from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_json_file, read_json_object
from ptb_harness.traces.detect import DECLARABLE

#: agent.json "trace_format": detected, copied, or declared
TRACE_FORMATS = ("auto", "raw", *DECLARABLE)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: An entry's `env` is for non-secret settings; a name like these is a secret, which
#: reaches an agent only by name (api_keys.json, env_passthrough.txt), never as a value
#: in a campaign file.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|AUTH", re.IGNORECASE)
#: Variables the harness and the sandbox set; an entry's `env` may not replace them.
HARNESS_VARIABLES = frozenset(
    {
        "PROMPT", "NUM_GPUS", "NUM_HOURS", "BENCHMARK_ID", "MODEL_TO_TRAIN", "AGENT_CONFIG", "AGENT_MODEL",
        "PTB_RESUME", "PTB_RESUME_MESSAGE", "HOME", "TMPDIR", "PATH", "LANG", "PYTHONNOUSERSITE",
        "XDG_CACHE_HOME", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
        "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE",
        "PTB_LLM_BASE_URL", "PTB_LLM_TOKEN",
    }
)  # fmt: skip
_ENTRY_KEYS = ("name", "dir", "model", "env", "reprompt", "llm_budget")
_BUDGET_KEYS = ("usd", "tokens", "requests")


@dataclass(frozen=True)
class AgentEntry:
    """One `agents:` item of a campaign: a leaderboard row.

    ``name`` is the row and the path component; ``dir`` the agent directory; ``model``
    is handed to the CLI (AGENT_MODEL, and AGENT_CONFIG as upstream names it); ``env``
    non-secret extra variables; ``reprompt`` resumes the CLI's session when it stops early.
    """

    name: str
    dir: str
    model: str = ""
    env: tuple[tuple[str, str], ...] = ()
    reprompt: bool = False
    #: the keys of solve.llm_budget this entry replaces (usd, tokens, requests)
    llm_budget: tuple[tuple[str, float | int | None], ...] = ()


def parse_agent_entries(items: list[Any], models_by_agent: Mapping[str, Any]) -> list[AgentEntry]:
    """The campaign's `agents:` list (for ``campaign.reader``): each item a name (a dir
    under agents/) or a mapping {name, dir, model, env, reprompt, llm_budget}.
    ``models_by_agent`` is the shorthand `agent_config: {name: model}`. Raises ConfigError
    naming the item; directories are checked by the caller."""
    entries: list[AgentEntry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        entries.append(_agent_entry(item, i, seen, models_by_agent))
    return entries


def _agent_entry(item: Any, i: int, seen: dict[str, int], models_by_agent: Mapping[str, Any]) -> AgentEntry:
    """agents[i]; ``seen``: the names of the items before it (this one's is added)."""
    where = f"agents[{i}]"
    # a bare name is its own key in messages ("agents[1]: ..."), a mapping's is ".name"
    name_key = where if isinstance(item, str) else f"{where}.name"
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: {item!r} must be an agent name or a mapping {{name, dir, model, env, ...}}")
    unknown = sorted(set(item) - set(_ENTRY_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(_ENTRY_KEYS)})")
    if "name" not in item and "dir" not in item:
        raise ConfigError(f"{where}: give `name` (and `dir` when the name is not the agent directory)")
    name = check_name(item.get("name", item.get("dir")), name_key)
    directory = check_name(item.get("dir", name), f"{where}.dir")
    if name in seen:
        raise ConfigError(f"{name_key}: duplicate entry {name!r} (also at agents[{seen[name]}])")
    seen[name] = i
    model = item.get("model")
    if model is not None and name in models_by_agent:
        raise ConfigError(f"{where}.model: also given as agent_config.{name}; give it once")
    model = models_by_agent.get(name, "") if model is None else model
    if not isinstance(model, str):
        raise ConfigError(f"{where}.model: {model!r} is not a string")
    reprompt = item.get("reprompt", False)
    if not isinstance(reprompt, bool):
        raise ConfigError(f"{where}.reprompt: {reprompt!r} is not true or false")
    budget = _entry_budget(item.get("llm_budget") or {}, where)
    return AgentEntry(name, directory, model, _entry_env(item.get("env") or {}, where), reprompt, budget)


def _entry_budget(budget: Any, where: str) -> tuple[tuple[str, float | int | None], ...]:
    if not isinstance(budget, dict) or set(budget) - set(_BUDGET_KEYS):
        raise ConfigError(f"{where}.llm_budget: must be a mapping of {', '.join(_BUDGET_KEYS)}")
    for key, value in budget.items():
        ok = value is None or (isinstance(value, int | float) and not isinstance(value, bool) and value > 0)
        if not ok or (key != "usd" and not (value is None or isinstance(value, int))):
            kind = "number" if key == "usd" else "integer"
            raise ConfigError(f"{where}.llm_budget.{key}: {value!r} is not a positive {kind} or null")
    return tuple(budget.items())


def _entry_env(env: Any, where: str) -> tuple[tuple[str, str], ...]:
    """An entry's `env`: non-secret settings that cannot replace the harness's variables."""
    if not isinstance(env, dict):
        raise ConfigError(f"{where}.env: must be a mapping of variable names to strings")
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ConfigError(f"{where}.env: {key!r} is not an environment variable name")
        if _SECRET_NAME.search(key):
            raise ConfigError(
                f"{where}.env.{key}: names a secret; secrets reach an agent only by name "
                "(its api_keys.json or env_passthrough.txt), never as a value in the campaign"
            )
        if key in HARNESS_VARIABLES:
            raise ConfigError(f"{where}.env.{key}: set by the harness, not by a campaign")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{where}.env.{key}: {value!r} is not a string")
    return tuple((k, str(v)) for k, v in env.items())


def check_env_names(names: object, where: str) -> list[str]:
    if not isinstance(names, list):
        raise ConfigError(f"{where}: must be a JSON list of variable names")
    for i, n in enumerate(names):
        if not isinstance(n, str) or not _ENV_NAME.match(n):
            raise ConfigError(f"{where}[{i}]: {n!r} is not an environment variable name")
    return list(names)


#: The provider APIs the LLM gateway speaks (ptb_harness.gateway.protocols.PROTOCOLS).
LLM_PROTOCOLS = ("anthropic", "openai_responses", "openai_chat", "gemini")


@dataclass(frozen=True)
class LlmEndpoint:
    """agent.json "llm": the agent's CLI talks to its model only through the cell's LLM
    gateway. ``protocol`` is the API it speaks; ``base_url_env`` the entry variable that
    names the provider's base URL (the gateway's upstream, never the CLI's), default
    ``default_base_url``. The key is the first of api_keys.json's names that is set."""

    protocol: str
    base_url_env: str
    default_base_url: str


@dataclass(frozen=True)
class AgentSpec:
    name: str
    dir: Path
    #: Variable names copied from the launching environment when set (values never stored).
    env_passthrough: tuple[str, ...]
    #: API-key variable names this agent may receive.
    api_keys: tuple[str, ...]
    #: agent.json "trace_format": the format its CLI writes (one of traces.detect.DECLARABLE:
    #: parsed as that, which no line a tool writes can change), "auto" (detected from the
    #: content) or "raw" (copied, still sanitized)
    trace_format: str = "auto"
    #: agent.json "cli": the npm package of the agent's CLI (doctor checks its pinned version)
    cli: str | None = None
    #: agent.json "resume": solve.sh resumes its CLI's session when PTB_RESUME is set
    resume: bool = False
    #: agent.json "trusted": may run under runtime `none` without a warning (the demo's
    #: agents; a frontier CLI told to maximise a score is not)
    trusted: bool = False
    #: agent.json "llm": its model calls go through the cell's LLM gateway (the keys never
    #: reach the sandbox); None: the keys are passed as before (custom agents)
    llm: LlmEndpoint | None = None

    @property
    def solve_sh(self) -> Path:
        return self.dir / "solve.sh"

    @property
    def payload(self) -> Path | None:
        p = self.dir / "payload"
        return p if p.is_dir() else None


def allowed_env_names(agent: AgentSpec | None, required_api_keys: tuple[str, ...] = ()) -> list[str]:
    """Variables a cell may copy from the launching environment, by name: the agent's
    env_passthrough.txt names and API keys, and the task's required keys. The same names
    are the secrets that traces are sanitized of."""
    names = [*agent.env_passthrough, *agent.api_keys] if agent is not None else []
    return list(dict.fromkeys([*names, *required_api_keys]))


def _read_passthrough(path: Path) -> tuple[str, ...]:
    if not path.exists():
        return ()
    names = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _ENV_NAME.match(line):
            raise ConfigError(f"{path}:{lineno}: {line!r} is not an environment variable name")
        names.append(line)
    return tuple(dict.fromkeys(names))


def load_agent(agent_dir: Path) -> AgentSpec:
    """Read an agent directory; raises ConfigError naming the file that is wrong."""
    agent_dir = Path(agent_dir)
    if not agent_dir.is_dir():
        raise ConfigError(f"agent directory {agent_dir} not found")
    if not (agent_dir / "solve.sh").is_file():
        raise ConfigError(f"{agent_dir / 'solve.sh'} not found (every agent needs a solve.sh)")
    keys_file = agent_dir / "api_keys.json"
    api_keys = check_env_names(read_json_file(keys_file, []), str(keys_file))
    agent_json = _read_agent_json(agent_dir / "agent.json")
    return AgentSpec(
        name=agent_dir.name,
        dir=agent_dir,
        env_passthrough=_read_passthrough(agent_dir / "env_passthrough.txt"),
        api_keys=tuple(api_keys),
        trace_format=agent_json.get("trace_format", "auto"),
        cli=agent_json.get("cli"),
        resume=agent_json.get("resume", False),
        trusted=agent_json.get("trusted", False),
        llm=_llm_endpoint(agent_json.get("llm"), agent_dir / "agent.json"),
    )


def _llm_endpoint(data: Any, path: Path) -> LlmEndpoint | None:
    if data is None:
        return None
    keys = ("protocol", "base_url_env", "default_base_url")
    if not isinstance(data, dict) or set(data) != set(keys) or not all(isinstance(data[k], str) for k in keys):
        raise ConfigError(f"{path}: llm must be {{{', '.join(keys)}}} (strings)")
    if data["protocol"] not in LLM_PROTOCOLS:
        raise ConfigError(f"{path}: llm.protocol must be one of {', '.join(LLM_PROTOCOLS)}")
    if not _ENV_NAME.match(data["base_url_env"]):
        raise ConfigError(f"{path}: llm.base_url_env {data['base_url_env']!r} is not a variable name")
    return LlmEndpoint(data["protocol"], data["base_url_env"], data["default_base_url"])


def _read_agent_json(path: Path) -> dict:
    data = read_json_object(path)
    unknown = set(data) - {"trace_format", "cli", "resume", "trusted", "llm"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    if data.get("trace_format", "auto") not in TRACE_FORMATS:
        raise ConfigError(f"{path}: trace_format must be one of {', '.join(TRACE_FORMATS)}")
    if not isinstance(data.get("cli", ""), str):
        raise ConfigError(f"{path}: cli must be an npm package name")
    if not isinstance(data.get("resume", False), bool):
        raise ConfigError(f"{path}: resume must be true or false")
    if not isinstance(data.get("trusted", False), bool):
        raise ConfigError(f"{path}: trusted must be true or false")
    return data
