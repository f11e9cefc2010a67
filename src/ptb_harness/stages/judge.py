"""The judge stage of one cell: gather its inputs, run the deterministic checks and the
judge model (``ptb_harness.graders.judge``), write judgement.json.

Fails closed: whatever goes wrong (an input that cannot be read, a test set that cannot
be loaded, the judge model's error, timeout or unparsable answer), the verdict is
``judge_failed``, which counts as flagged. The job itself succeeds once judgement.json
is written; delete the file to judge the cell again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ptb_harness.campaign.agents import allowed_env_names
from ptb_harness.campaign.cells import Campaign, Cell
from ptb_harness.campaign.scoring import base_config_json, model_config_json, read_model_config
from ptb_harness.core.cell_files import AGENT_FILES, AGENT_FILES_RECORD
from ptb_harness.core.records import atomic_write_json, read_json_dict
from ptb_harness.graders.judge import (
    SYSTEM_PROMPT,
    build_prompt,
    combine,
    hosted_api_mentions,
    model_identity,
    ngram_overlap,
    parse_verdict,
)
from ptb_harness.runtime.procs import iso_utc
from ptb_harness.traces.redact import Redactor, secrets_from_env
from ptb_scorer.llm_client import LLMClient, LLMUnavailable

log = logging.getLogger("ptb_harness.stages.judge")


class JudgeInputError(Exception):
    """An input of the judge could not be read: the verdict is judge_failed."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_test_set(task_dir: Path, info: Mapping[str, Any], hf_home: str | None) -> list[str] | None:
    """The task's test samples as text (info.json `judge.test_set`), or None when the task
    declares none. `{"path": "file.jsonl", "fields": [...]}` (relative to the task dir) or
    `{"hf_dataset": id, "config": c, "split": s, "fields": [...]}` (offline, from the cache)."""
    spec = (info.get("judge") or {}).get("test_set") if isinstance(info.get("judge"), dict) else None
    if spec is None:
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("fields"), list) or not spec["fields"]:
        raise JudgeInputError("info.json judge.test_set: needs `fields` and `path` or `hf_dataset`")
    fields = [str(f) for f in spec["fields"]]
    if "path" in spec:
        path = task_dir / spec["path"]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise JudgeInputError(f"test set {path}: {e.strerror}") from None
        try:
            rows = _json_records(text)
        except ValueError as e:
            raise JudgeInputError(f"test set {path}: not valid JSON ({e})") from None
    elif "hf_dataset" in spec:
        try:
            import datasets  # the scorer's library; offline, from the site's cache
        except ImportError:
            raise JudgeInputError("test set: the `datasets` package is not installed for the judge") from None
        # the site's cache, as the scorer reads it (datasets' Arrow cache; offline on compute nodes)
        cache_dir = str(Path(hf_home) / "datasets") if hf_home else None
        try:
            ds = datasets.load_dataset(
                spec["hf_dataset"],
                spec.get("config"),
                data_dir=spec.get("data_dir"),
                split=spec.get("split", "test"),
                cache_dir=cache_dir,
            )
            rows = list(ds)
        except Exception as e:  # any loader failure is the same to the verdict
            raise JudgeInputError(f"test set {spec['hf_dataset']}: cannot load ({type(e).__name__}: {e})") from None
    else:
        raise JudgeInputError("info.json judge.test_set: needs `path` or `hf_dataset`")
    if not isinstance(rows, list):
        raise JudgeInputError("test set: not a list of records")
    return [" ".join(str(r.get(f, "")) for f in fields) for r in rows if isinstance(r, dict)]


def _json_records(text: str) -> list:
    """A JSON list, or JSON lines (whatever the file's suffix: BFCL's .json files are lines)."""
    try:
        data = json.loads(text)
    except ValueError:
        return [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    return data if isinstance(data, list) else [data]


def _agent_files(cell_dir: Path) -> tuple[list[tuple[str, str]], dict]:
    record = read_json_dict(cell_dir / AGENT_FILES_RECORD)
    if record is None:
        return [], {"missing": f"{AGENT_FILES_RECORD} not found: the agent's files were not kept"}
    files = []
    for entry in record.get("saved") or []:
        p = cell_dir / AGENT_FILES / str(entry.get("path", ""))
        try:
            files.append((str(entry["path"]), p.read_text(encoding="utf-8", errors="replace")))
        except (OSError, KeyError) as e:
            raise JudgeInputError(f"agent file {p}: cannot read ({e})") from None
    return files, record


def run_judge(
    campaign: Campaign,
    cell: Cell,
    *,
    transcript: Path,
    final_model: Path,
    judgement_json: Path,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Judge one cell and write judgement.json (always, fail closed). Returns it."""
    host_env = dict(os.environ if host_env is None else host_env)
    cfg = campaign.settings.judge
    cell_dir = judgement_json.parent
    record: dict[str, Any] = {"cell": cell.wildcards, "started_at": iso_utc(time.time())}
    endpoint = cfg.endpoint
    assert endpoint is not None, "the judge rule runs only with judge.enabled"
    record["judge"] = {"model": endpoint.model, "base_url": endpoint.base_url}
    inputs: dict[str, Any] = {}
    deterministic: dict[str, dict[str, Any]] = {}
    checks: dict[str, Any] = {}
    judged, failure = None, ""
    try:
        task = campaign.task(cell.task)
        info_path = task.dir / "info.json"
        info = read_json_dict(info_path) or {}
        inputs["info_json"] = _sha256(info_path.read_bytes()) if info_path.is_file() else None
        text = transcript.read_text(encoding="utf-8", errors="replace")
        inputs["transcript"] = _sha256(transcript.read_bytes())
        files, files_record = _agent_files(cell_dir)
        inputs[AGENT_FILES] = {name: _sha256(t.encode()) for name, t in files}
        if "missing" in files_record:
            inputs["agent_files_missing"] = files_record["missing"]
        hf_home = str(campaign.settings.site.hf_cache.home or "") or None

        # deterministic checks first: facts for the judge, and flags whatever it says
        samples = read_test_set(task.dir, info, hf_home)
        if samples is None:
            deterministic["contamination"] = {
                "flagged": False,
                "source": "ngram",
                "justification": "the task declares no test set (info.json judge.test_set): overlap not checked",
            }
        else:
            inputs["test_set"] = _sha256("\x1e".join(samples).encode())
            tolerated = cfg.max_contaminated_samples
            report = ngram_overlap(samples, files, cfg.ngram_n, cfg.sample_overlap)
            checks["ngram_overlap"] = summary = report.as_dict(tolerated)
            where = "; ".join(f"sample {e['sample']} in {', '.join(e['files'])}" for e in summary["examples"][:3])
            deterministic["contamination"] = {
                "flagged": summary["flagged"],
                "source": "ngram",
                "justification": f"{summary['contaminated_samples']} of {summary['test_samples']} test samples "
                f"found in the agent's files by {report.n}-gram overlap ({tolerated} tolerated)"
                + (f": {where}" if where else ""),
            }
        final_cfg_path = final_model / "config.json"
        final_cfg = read_json_dict(final_cfg_path)
        inputs["final_model_config"] = _sha256(final_cfg_path.read_bytes()) if final_cfg is not None else None
        # the plan's reader (campaign.scoring): the snapshot huggingface_hub loads offline
        base_cfg = read_model_config(base_config_json(campaign, cell.model))
        inputs["base_model_config"] = _sha256(json.dumps(base_cfg, sort_keys=True).encode()) if base_cfg else None
        instruct = {}
        for ref in cfg.instruct_variants.get(cell.model, []):
            ref_cfg = read_model_config(model_config_json(campaign, ref))
            if ref_cfg is None:
                raise JudgeInputError(f"judge.instruct_variants.{cell.model}: no config.json for {ref} (prefetch it)")
            instruct[ref] = ref_cfg
        checks["hosted_api_mentions"] = hosted_api_mentions(files)
        identity = model_identity(final_cfg, base_cfg, instruct)
        checks["model_identity"] = identity
        deterministic["disallowed_model"] = {**identity, "source": "model_identity"}

        # the judge model reads the evidence, redacted once more as a whole
        agent = campaign.agent(cell.agent)
        names = [*allowed_env_names(agent, task.required_api_keys), *campaign.settings.grader_key_names]
        redact = Redactor(secrets_from_env(names, host_env))
        prompt = build_prompt(
            task_name=task.name,
            info=info,
            checks=checks,
            transcript=text,
            files=files,
            final_config=final_cfg_path.read_text(errors="replace") if final_cfg is not None else "",
            max_chars=cfg.max_prompt_chars,
        )
        prompt = redact(prompt.encode()).decode("utf-8", "replace")
        inputs["prompt"] = _sha256(prompt.encode())
        with LLMClient(endpoint, env=host_env) as client:
            try:
                answer = client.chat(
                    [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
                    max_tokens=2000,
                )
                judged, failure = parse_verdict(answer)
            finally:
                record["judge"]["usage"] = client.call_stats()
    except (JudgeInputError, LLMUnavailable, OSError) as e:
        failure = f"{type(e).__name__}: {e}" if isinstance(e, OSError) else str(e)
    except Exception as e:  # fail closed: a bug here must not read as clean
        log.exception("judge failed unexpectedly")
        failure = f"harness error: {type(e).__name__}: {e}"
    verdict = combine(deterministic, judged, failure)
    record.update(verdict)
    record["checks"] = checks
    record["inputs"] = inputs
    if failure:
        record["judge"]["error"] = failure
    record["ended_at"] = iso_utc(time.time())
    atomic_write_json(judgement_json, record)
    log.info("verdict %s%s", record["verdict"], f" ({', '.join(record['flags'])})" if record["flags"] else "")
    return record
