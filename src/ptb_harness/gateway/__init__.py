"""One cell's LLM gateway: the agent's only way to its model, outside its sandbox.

The agent's CLI is pointed at the gateway with a per-cell token as its key; the gateway
holds the entry's real key, swaps it in, passes the call to the provider and the answer
back unchanged (streams included), meters every call from the provider's own usage
fields, prices it, enforces the cell's LLM budget, and writes ``llm_log.jsonl``.

- ``protocols``: the four provider APIs: routes, usage fields, error shapes.
- ``prices``: the campaign's prices, then the genai-prices table.
- ``meter``: totals, limits, the summary recorded in solve.json.
- ``request_log``: llm_log.jsonl, bodies sanitized and size-capped.
- ``server``: the aiohttp reverse proxy; ``main``: its process (``python -m ptb_harness.gateway``).
- ``process``: the harness's handle on that process.
"""
