"""The status index: what status found of each scored or agent_failed cell (its STATUS_SPEC for
``results.cell_index``, which says how entries are keyed, served and written), so that a
second status of an unchanged campaign looks the files up instead of reading and
classifying them. One JSON file in the results dir, ``STATUS_INDEX``.
"""

from __future__ import annotations

from ptb_harness.core.cell_files import EVALUATE, JUDGEMENT, JUDGEMENT_OVERRIDE, METRICS, OUTCOME_RECORDS, SOLVE
from ptb_harness.results.cell_index import IndexSpec

#: the index's file in the results dir
STATUS_INDEX = ".status-index.json"
#: the files a scored cell's status is read from (metrics.json and the records that vouch
#: for it, the judge's): their identity keys its entry
SCORED_SOURCES = (METRICS, EVALUATE, SOLVE, JUDGEMENT, JUDGEMENT_OVERRIDE)
#: an agent_failed cell's: the records its outcome is decided from
AGENT_FAILED_SOURCES = OUTCOME_RECORDS
#: the status fields an entry holds, and each one's type
FIELDS: dict[str, tuple[type, ...]] = {
    "outcome": (str,),
    "evidence": (str,),
    "flag": (str,),
    "flag_justification": (str,),
    "ptb_lookup": (str,),
    "override": (str,),
    "metrics_present": (bool,),
}


STATUS_SPEC = IndexSpec(
    file_name=STATUS_INDEX,
    sources=tuple(dict.fromkeys((*SCORED_SOURCES, *AGENT_FAILED_SOURCES))),
    # the modules whose code decides a cell's status: a change to any makes a new index
    deciding=(
        "ptb_harness.results.status",
        "ptb_harness.results.outcome",
        "ptb_harness.results.flags",
        "ptb_harness.results.status_index",
        "ptb_harness.core.cell_files",
        "ptb_harness.judging.verdict",
    ),
    fields=FIELDS,
    version=4,
    # final outcomes, decided by the records alone (status keeps an agent_failed cell only
    # where no stage's state says it runs and no scorer log decided it: see results.status)
    kept={"scored": SCORED_SOURCES, "agent_failed": AGENT_FAILED_SOURCES},
)
