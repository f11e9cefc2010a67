"""The ground floor: the harness's errors and the record files every layer reads and writes
(atomic writes, bounded readers). Imports nothing else of the harness."""
