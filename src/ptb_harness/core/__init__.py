"""The ground floor: the harness's errors, the record files every layer reads and writes
(atomic writes, bounded readers) and the one resolver of a repo's snapshot in an HF cache
(``hf_snapshots``). Imports nothing else of the harness."""
