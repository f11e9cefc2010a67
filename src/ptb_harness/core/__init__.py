"""The ground floor: the harness's errors, atomic writes and bounded readers, a cell's files
and typed records (``cell_files``), the results dir's layout (``layout``), the one
resolver of a repo's snapshot in an HF cache (``hf_snapshots``) and the configuration
schema, where every key's default is written (``schema``). Imports nothing else of the
harness."""
