"""The command line every task's evaluate.py shares (the harness's contract):

    python evaluate.py [--model-path DIR] [--json-output-file FILE] [--limit N (-1 = all)]
                       [--templates-dir DIR] [--max-tokens N] [--backend auto|vllm|hf]
                       [--base-architecture ARCH]

Writes FILE (atomically) only for a successful run: accuracy, stderr, n_examples, the
engine and its version, the template and its sha256, the dataset revisions. Prints
``PTB_SCORER_INFO {json}`` (what this attempt runs with, its token cap first) before
scoring, and on failure exactly one line, no traceback for known causes:
``PTB_MODEL_INVALID: why`` (exit 3: the model cannot be scored; the agent's failure),
``PTB_SCORER_ERROR: why`` (exit 2 data missing, 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from ptb_scorer import data
from ptb_scorer.model import ModelInvalid, check_loadable, check_model

EXIT_MODEL_INVALID = 3
EXIT_DATA_MISSING = 2


def parser(
    name: str,
    default_limit: int,
    default_max_tokens: int,
    here: Path,
    *,
    cap_flag: str = "--max-tokens",
    unit: str = "examples",
    how: str = "inspect_ai",
) -> argparse.ArgumentParser:
    """The evaluate.py command line every task shares; `cap_flag` names its ladder's token
    cap (the graded tasks' is --max-new-tokens, as upstream's)."""
    ap = argparse.ArgumentParser(prog="evaluate.py", description=f"Score a model on {name} ({how}).")
    ap.add_argument("--model-path", default="final_model", help="the model to score (Hugging Face format)")
    ap.add_argument("--json-output-file", default="metrics.json", help="where the metrics go")
    ap.add_argument("--limit", type=int, default=default_limit, help=f"{unit} to score; -1 = all")
    ap.add_argument("--templates-dir", type=Path, default=here / "templates", help="chat templates (templates/)")
    ap.add_argument(cap_flag, type=int, default=default_max_tokens, help="cap on generated tokens")
    ap.add_argument("--backend", choices=("auto", "vllm", "hf"), default="auto", help="auto: vLLM on a GPU, else hf")
    ap.add_argument("--base-architecture", help="the base model's architecture (the harness passes it)")
    return ap


def main(name: str, *, default_limit: int, default_max_tokens: int, argv: list[str] | None = None) -> int:
    here = Path(sys.argv[0]).resolve().parent
    args = parser(name, default_limit, default_max_tokens, here).parse_args(argv)
    info_json = json.loads((here / "info.json").read_text())
    # inspect_evals reads it once, at import: its own files (bfcl's) live in the HF home
    os.environ.setdefault("INSPECT_EVALS_CACHE_DIR", str(data.CacheLayout.from_env().hf_home / "inspect_evals"))
    # the attempt's log starts with its token cap (the harness's ladder step) and argv
    print(f"{name}: max_tokens={args.max_tokens} limit={args.limit} backend={args.backend}", flush=True)
    print(f"argv: {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
    try:
        return _score(name, args, info_json.get("datasets", []))
    except ModelInvalid as e:
        print(f"PTB_MODEL_INVALID: {e}", flush=True)
        return EXIT_MODEL_INVALID
    except data.DataMissing as e:
        print(f"PTB_SCORER_ERROR: dataset missing: {e}", flush=True)
        return EXIT_DATA_MISSING
    except Exception as e:
        from ptb_scorer.engine import EngineFailed

        if not isinstance(e, EngineFailed):
            traceback.print_exc()
        why = str(e).strip().splitlines()[-1][:300] if str(e).strip() else ""
        print(f"PTB_SCORER_ERROR: {type(e).__name__}: {why}", flush=True)
        return 1


def _score(name: str, args: argparse.Namespace, datasets: list[dict]) -> int:
    from ptb_scorer import engine
    from ptb_scorer.tasks import TASKS

    task_def = TASKS[name]
    checked = check_model(Path(args.model_path), args.templates_dir, args.base_architecture)
    check_loadable(checked.path)
    data.require(datasets)
    backend = engine.choose_backend(args.backend)
    spec = engine.engine_spec(backend, checked, max_tokens=args.max_tokens, tool_calling=task_def.tool_calling)
    versions = engine.versions()
    record = {
        "task": name,
        "max_tokens": args.max_tokens,
        "limit": args.limit,
        "engine": backend,
        "engine_version": versions.get("vllm" if backend == "vllm" else "transformers"),
        "versions": versions,
        "architecture": checked.architecture,
        "template": {"name": checked.template.name, "sha256": checked.template.sha256},
        "datasets": [data.revision(d) for d in datasets],
        **task_def.record(),
    }
    print("PTB_SCORER_INFO " + json.dumps(record, sort_keys=True), flush=True)
    metrics = engine.run_task(task_def.build(), spec, limit=args.limit)
    engine.write_json_atomic(Path(args.json_output_file), {**record, **metrics})
    print(f"{name}: accuracy={metrics['accuracy']} n_examples={metrics['n_examples']}", flush=True)
    return 0


def run(name: str, *, default_limit: int, default_max_tokens: int) -> None:
    sys.exit(main(name, default_limit=default_limit, default_max_tokens=default_max_tokens))
