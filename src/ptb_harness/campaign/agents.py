"""An agent directory, read and checked: solve.sh, payload/, api_keys.json, env_passthrough.txt."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ptb_harness.core.errors import ConfigError
from ptb_harness.core.records import read_json_object

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env_names(names: object, where: str) -> list[str]:
    if not isinstance(names, list):
        raise ConfigError(f"{where}: must be a JSON list of variable names")
    for i, n in enumerate(names):
        if not isinstance(n, str) or not _ENV_NAME.match(n):
            raise ConfigError(f"{where}[{i}]: {n!r} is not an environment variable name")
    return list(names)


@dataclass(frozen=True)
class AgentSpec:
    name: str
    dir: Path
    #: Variable names copied from the launching environment when set (values never stored).
    env_passthrough: tuple[str, ...]
    #: API-key variable names this agent may receive.
    api_keys: tuple[str, ...]
    #: agent.json "trace_format": "auto" (detect and parse) or "raw" (copy, still sanitized)
    trace_format: str = "auto"

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
    api_keys: list[str] = []
    if keys_file.exists():
        try:
            data = json.loads(keys_file.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ConfigError(f"{keys_file}: not valid JSON ({e})") from None
        api_keys = check_env_names(data, str(keys_file))
    settings = _read_settings(agent_dir / "agent.json")
    return AgentSpec(
        name=agent_dir.name,
        dir=agent_dir,
        env_passthrough=_read_passthrough(agent_dir / "env_passthrough.txt"),
        api_keys=tuple(api_keys),
        trace_format=settings.get("trace_format", "auto"),
    )


def _read_settings(path: Path) -> dict:
    data = read_json_object(path)
    unknown = set(data) - {"trace_format"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    if data.get("trace_format", "auto") not in ("auto", "raw"):
        raise ConfigError(f'{path}: trace_format must be "auto" or "raw"')
    return data
