"""The status index: what status found of each scored cell (its STATUS_SPEC for
``results.cell_index``, which says how entries are keyed, served and written), so that a
second status of an unchanged campaign looks the files up instead of reading and
classifying them. One JSON file in the results dir, ``STATUS_INDEX``.
"""

from __future__ import annotations

from ptb_harness.core.cell_files import EVALUATE, JUDGEMENT, JUDGEMENT_OVERRIDE, METRICS, SOLVE
from ptb_harness.results.cell_index import IndexSpec

#: the index's file in the results dir
STATUS_INDEX = ".status-index.json"
#: the files a scored cell's status is read from: their identity keys its entry
SOURCES = (METRICS, EVALUATE, SOLVE, JUDGEMENT, JUDGEMENT_OVERRIDE)
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
    sources=SOURCES,
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
    version=3,
)
