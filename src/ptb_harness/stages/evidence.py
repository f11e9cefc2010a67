"""The solve's side of the judge (with ``judge.enabled``): the agent gets the contamination
check and its test set's identity in its task dir, as PostTrainBench v1.1 gives it
``contamination_check.py`` and the test data, so an honest agent can screen its own data;
and the evidence recorder (``stages.evidence_recorder``) runs beside the agent, from
before its first launch to after its last, reading every file it writes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ptb_harness.campaign.campaign import Campaign
from ptb_harness.campaign.tasks import TaskSpec
from ptb_harness.core.cell_files import EVIDENCE, EVIDENCE_CONFIG
from ptb_harness.core.errors import HarnessError
from ptb_harness.core.records import atomic_write_json, atomic_write_text
from ptb_harness.stages.evidence_recorder import RECORDER_ENV, RecorderConfig
from ptb_harness.stages.job_dir import JobDir
from ptb_scorer.contamination import CHECKER_FILE, TEST_SET_FILE, UnreadableTestSet, load_test_samples, samples_sha256

log = logging.getLogger("ptb_harness.stages.evidence")

#: how long the recorder may take to note the job dir before the agent starts, and to
#: read what is left after it ended
READY_TIMEOUT_S = 600
FINAL_TIMEOUT_S = 1800
#: the job dir's parts the agent can write (overlay mode: the HF cache's upper layer)
ROOTS = ["home", "tmp", "hf_upper"]

_CHECKER = '''"""Which of this task's test samples your files hold: the n-gram check the judge runs on
every file you write (any format: text, JSON, CSV, Parquet, Arrow, pickle, archives).

    python contamination_check.py data/train.jsonl more_data/

test_set.json says which test data it checks against (the judge's, by sha256). More than
its `tolerated` samples found is contamination."""

import sys

from ptb_scorer.contamination import main

sys.exit(main())
'''


@dataclass(frozen=True)
class JudgedSamples:
    """The task's test samples as the judge reads them (None: the task declares none), or
    why they could not be loaded."""

    samples: list[str] | None
    error: str | None = None


def load_test_set(campaign: Campaign, task: TaskSpec) -> JudgedSamples:
    hf_home = campaign.settings.site.hf_cache.home
    try:
        return JudgedSamples(load_test_samples(task.judge.test_set, task.dir, str(hf_home) if hf_home else None))
    except UnreadableTestSet as e:
        return JudgedSamples(None, str(e))


def hand_checker(campaign: Campaign, task: TaskSpec, job: JobDir, test_set: JudgedSamples) -> None:
    """The contamination check and the test set's identity in the agent's task dir (a task
    without a test set gets neither)."""
    if task.judge.test_set is None:
        return
    judge = campaign.settings.judge
    identity = {
        "spec": dict(task.judge.test_set),
        "samples": len(test_set.samples) if test_set.samples is not None else None,
        "sha256": samples_sha256(test_set.samples) if test_set.samples is not None else None,
        "n": judge.ngram_n,
        "sample_overlap": judge.sample_overlap,
        "tolerated": judge.max_contaminated_samples,
        "note": "the test data the judge's n-gram check compares your files with; run contamination_check.py",
    }
    atomic_write_json(job.task / TEST_SET_FILE, identity)
    atomic_write_text(job.task / CHECKER_FILE, _CHECKER)


class RecorderProcess:
    """The evidence recorder's process: started and ready before the agent, stopped after."""

    def __init__(self, config: RecorderConfig, test_set: JudgedSamples, cell_dir: Path, env: Mapping[str, str]):
        self.config_path = cell_dir / EVIDENCE_CONFIG
        atomic_write_json(self.config_path, asdict(config))
        stdin = json.dumps(test_set.samples if test_set.error is None else {"error": test_set.error})
        cmd = [sys.executable, "-m", "ptb_harness.stages.evidence_recorder", str(self.config_path)]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**env, **RECORDER_ENV},
            start_new_session=True,
            text=True,
        )
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self.proc.pid, 10)  # the agent's work first
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdin)
        self.proc.stdin.close()
        self._ready()

    def _ready(self) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.kill()
            raise HarnessError(f"the evidence recorder did not start (exit {self.proc.poll()}, said {line[:200]!r})")
        log.info("evidence recorder pid %d ready", self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, record: Path) -> str | None:
        """Stop it (its final scan and record); why it gave no record, or None."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(FINAL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return f"the evidence recorder's final scan took over {FINAL_TIMEOUT_S} s: killed, no record"
        if code != 0:
            return f"the evidence recorder exited with {code}: no record"
        # an exit status of 0 is also what a child reaped by someone else reads as
        return None if record.is_file() else f"the evidence recorder ended without writing {record.name}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()


def recorder_config(
    campaign: Campaign, task: TaskSpec, job: JobDir, cell_dir: Path, secret_names: list[str]
) -> RecorderConfig:
    site, judge = campaign.settings.site, campaign.settings.judge
    return RecorderConfig(
        job_root=str(job.root),
        roots=ROOTS,
        out_dir=str(cell_dir),
        test_set_spec=dict(task.judge.test_set) if task.judge.test_set is not None else None,
        ngram_n=judge.ngram_n,
        sample_overlap=judge.sample_overlap,
        scan_seconds=site.evidence_scan_seconds,
        file_max_bytes=site.evidence_file_max_bytes,
        total_max_bytes=site.evidence_max_bytes,
        max_files=site.agent_files_max_files,
        secret_names=sorted(secret_names),
        memory_max_bytes=site.evidence_memory_max_bytes,
    )


@contextlib.contextmanager
def recording(
    campaign: Campaign,
    task: TaskSpec,
    job: JobDir,
    cell_dir: Path,
    test_set: JudgedSamples | None,
    secret_names: list[str],
    env: Mapping[str, str],
) -> Iterator[RecorderProcess | None]:
    """The recorder while the block runs (None without the judge: test_set is None)."""
    if test_set is None:
        yield None
        return
    (cell_dir / EVIDENCE).unlink(missing_ok=True)  # an earlier attempt's is not this one's
    config = recorder_config(campaign, task, job, cell_dir, secret_names)
    recorder = RecorderProcess(config, test_set, cell_dir, env)
    try:
        yield recorder
    finally:
        problem = recorder.stop(cell_dir / EVIDENCE)
        if problem:
            log.error("%s (the judge will fail closed)", problem)
        else:
            log.info("evidence recorded (%s)", EVIDENCE)
