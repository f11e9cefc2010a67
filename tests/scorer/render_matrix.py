"""Run every scored task's first fixture sample through the scorer's engine, on one backend,
for one base model, as evaluate.py would: the chat template chosen from the base model
dir (ptb_scorer.chat_template.choose, what the harness writes into the task dir), the
engine spec of ptb_scorer.engine, the tasks as ptb_scorer builds them (graded tasks: their
answer task), inspect's real providers (vLLM: against tests/scorer/fake_vllm.py on PATH,
which records what it renders; transformers: ptb_hf, whose --prompt-log records it).

    python render_matrix.py BACKEND PROMPT_LOG_DIR BASE_DIR FINAL_DIR [BASE_DIR FINAL_DIR ...]

One inspect eval per group (the plain tasks, then bfcl with native tool calls, on a copy
of FINAL_DIR named FINAL_DIR-tools), so one model load (or one vLLM server) per group. A
test helper, run in the scorer's offline environment (tests/scorer/scorer_env.SCORER_ENV).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

PLAIN = ("gsm8k", "humaneval", "aime2025", "aime2026", "gpqamain")
GRADED = ("arenahardwriting", "healthbench")


def graded_task(name: str):
    from ptb_scorer import graded

    files = {d["role"]: graded.file_path(d) for d in info(name)["datasets"]}  # in the fixture HF home
    return graded.answers_task(graded.GRADED[name].items(files)[:1])


def info(name: str) -> dict:
    return json.loads((Path(__file__).resolve().parents[2] / "tasks" / name / "info.json").read_text())


def run(backend: str, base: Path, final: Path, prompt_log: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from ptb_scorer import engine
    from ptb_scorer.chat_template import Source, choose
    from ptb_scorer.model import check_model
    from ptb_scorer.tasks import TASKS

    arch = json.loads((base / "config.json").read_text())["architectures"][0]
    # inspect keeps one vLLM server per model path for the process: the tool group, whose
    # server takes other arguments, scores a copy of the final model under another path
    tools_copy = final.with_name(f"{final.name}-tools")
    if not tools_copy.exists():
        shutil.copytree(final, tools_copy)
    groups = [
        (False, final, [TASKS[t].build() for t in PLAIN] + [graded_task(t) for t in GRADED]),
        (True, tools_copy, [TASKS["bfcl"].build()]),
    ]
    for tool_calling, model_dir, tasks in groups:
        checked = check_model(model_dir, arch)
        template = choose(Source(base, str(base)), checked.architecture, tool_calling=tool_calling)
        path = engine.template_file(template, Path(tempfile.mkdtemp()))
        spec = engine.engine_spec(
            backend, checked, template, template_path=path, max_tokens=2, tool_calling=tool_calling,
            prompt_log=prompt_log,
        )  # fmt: skip
        engine.register(spec)
        # the group's tasks at once: one request each, unseeded, and inspect's hf batcher
        # waits 2 s after each request for more to batch with (about 3 s a task one by one)
        logs = inspect_eval(
            tasks, model=spec.model, model_args=spec.model_args, limit=1, display="none", log_dir=tempfile.mkdtemp(),
            fail_on_error=True, retry_on_error=0, max_tasks=len(tasks), **spec.generate,
        )  # fmt: skip
        bad = [(log.eval.task, log.error and log.error.message[-300:]) for log in logs if log.status != "success"]
        if bad:
            raise SystemExit(f"eval failed: {bad}")
        print(json.dumps({"tool_calling": tool_calling, "template": template.record()}), flush=True)


if __name__ == "__main__":
    backend, logs, pairs = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    for base, final in zip(pairs[::2], pairs[1::2], strict=True):  # one process for all: imports once
        run(backend, Path(base), Path(final), logs / f"{Path(final).name}.jsonl")
