"""What the LLM gateway adds: latency per request and streaming throughput, through the
real gateway process vs straight to the scripted model server (the tests' stand-in for a
provider), interleaved in one run.

    python bench/bench_gateway.py [--requests 400] [--stream-events 20000] [--repeats 9] [--json]

Latency: small Anthropic Messages calls (JSON answers) over kept-alive connections, one
at a time, alternating direct / through; the added latency is the difference of the two
distributions' quantiles (p50, p99). Throughput: one streamed answer of ``--stream-events``
SSE events of about 1 KB, each its own write as a provider sends them (a usage event at
the end), read whole, ``--repeats`` pairs of one direct and one through, back to back
(which goes first alternates): the ratio is the median of the pairs' ratios (a load that
drifts during the run moves both of a pair), the rates the medians of each way. CPU per
MB streamed, from the kernel's accounting, does not depend on the load: direct (the
stand-in server and the reader), through (the same and the gateway process, its work on
each answer included), and their ratio, the throughput ratio where the CPU is the limit
(a loaded 2-core machine).
Goals (issue 25): p50 added < 2 ms, throughput through >= 0.9x direct.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "agents"))
from scripted_server import SSE_HEADERS, Plan, Response, ScriptedServer  # noqa: E402

from ptb_harness.gateway.config import GatewayConfig  # noqa: E402
from ptb_harness.gateway.process import GatewayProcess  # noqa: E402

MODEL = "bench-model"
TOKEN = "ptbgw-bench-token-0123456789abcdef"


def big_stream_protocol(events: int) -> types.ModuleType:
    """A stand-in protocol answering POST /big/v1/messages with ``events`` SSE events of
    about 1 KB, each its own write (as a provider streams), and a usage event at the end."""
    event = b"event: content_block_delta\ndata: " + json.dumps({"delta": {"text": "x" * 900}}).encode() + b"\n\n"
    usage = b'event: message_delta\ndata: {"usage": {"output_tokens": 12345}}\n\n'

    def respond(_request, _plan):
        return Response(200, dict(SSE_HEADERS), iter([event] * events + [usage]))

    mod = types.ModuleType("big_stream")
    mod.matches = lambda method, path: path == "/big/v1/messages"  # type: ignore[attr-defined]
    mod.respond = respond  # type: ignore[attr-defined]
    return mod


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def timed_post(conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> tuple[float, int]:
    t = time.perf_counter()
    conn.request("POST", path, body, headers)
    resp = conn.getresponse()
    if resp.length is not None:
        data = resp.read()
        return (time.perf_counter() - t) * 1000, len(data)
    n = 0
    while part := resp.read1(1 << 20):  # a stream: as it comes, whatever the framing
        n += len(part)
    return (time.perf_counter() - t) * 1000, n


def latency(server_port: int, gw_port: int, n: int) -> dict[str, float]:
    body = json.dumps({"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).encode()
    headers = {"content-type": "application/json", "x-api-key": TOKEN}
    direct = http.client.HTTPConnection("127.0.0.1", server_port)
    through = http.client.HTTPConnection("127.0.0.1", gw_port)
    d, g = [], []
    for i in range(n + 20):  # the first 20 of each warm up
        # the stand-in closes no JSON connection: both stay kept alive
        a = timed_post(direct, "/v1/messages", body, headers)[0]
        b = timed_post(through, "/v1/messages", body, headers)[0]
        if i >= 20:
            d.append(a)
            g.append(b)
    out = {}
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        out[f"direct_{name}_ms"] = round(quantile(d, q), 3)
        out[f"gateway_{name}_ms"] = round(quantile(g, q), 3)
        out[f"added_{name}_ms"] = round(quantile(g, q) - quantile(d, q), 3)
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def wait_for_line(path: Path, n: int) -> None:
    """Until the gateway has logged its n-th request (its work on that answer is done)."""
    deadline = time.monotonic() + 60
    while log_lines(path) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gateway logged no line {n} in 60 s")
        time.sleep(0.005)


def throughput(server_port: int, gw: GatewayProcess, repeats: int) -> dict[str, float]:
    """Pairs of one stream direct and one through (which goes first alternates). The CPU
    of both ways from the kernel's accounting: this process (the stand-in server and the
    reader, both ways) and the gateway process (through): direct / through CPU per MB is
    the throughput ratio where the CPU is the limit, whatever else the machine runs."""
    headers = {"content-type": "application/json", "x-api-key": TOKEN}
    seconds: dict[str, list[float]] = {"direct": [], "gateway": []}
    cpu = {"direct": 0.0, "gateway": 0.0, "gateway_own": 0.0}
    ratios, size = [], 0
    log = gw.config.log_path
    for i in range(repeats):
        ways = [("direct", server_port), ("gateway", gw.port)]
        rate = {}
        for name, port in ways if i % 2 == 0 else ways[::-1]:
            conn = http.client.HTTPConnection("127.0.0.1", port)  # the stream closes its connection
            lines, ours, theirs = log_lines(log), sum(os.times()[:2]), cpu_seconds(gw.pid)
            ms, size = timed_post(conn, "/big/v1/messages", b"{}", headers)
            conn.close()
            seconds[name].append(ms / 1000)
            rate[name] = size / (ms / 1000)
            if name == "gateway":
                wait_for_line(log, lines + 1)
                cpu["gateway_own"] += cpu_seconds(gw.pid) - theirs
                cpu["gateway"] += cpu_seconds(gw.pid) - theirs
            cpu[name] += sum(os.times()[:2]) - ours
        ratios.append(rate["gateway"] / rate["direct"])
    d, g = statistics.median(seconds["direct"]), statistics.median(seconds["gateway"])
    mb = size / 2**20

    def per_mb(key: str) -> float:
        return round(cpu[key] * 1000 / (mb * repeats), 2)

    return {
        "stream_mb": round(mb, 1),
        "direct_stream_s": round(d, 4),
        "gateway_stream_s": round(g, 4),
        "direct_mb_s": round(mb / d, 1),
        "gateway_mb_s": round(mb / g, 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_max": round(max(ratios), 3),
        "cpu_direct_ms_per_mb": per_mb("direct"),
        "cpu_through_ms_per_mb": per_mb("gateway"),
        "gateway_cpu_ms_per_mb": per_mb("gateway_own"),
        "cpu_ratio": round(cpu["direct"] / cpu["gateway"], 3),
    }


def measure(requests: int = 400, stream_events: int = 20000, repeats: int = 9) -> dict[str, Any]:
    """Both measurements in one run, against one scripted server and one gateway process."""
    plan = Plan(MODEL, [{"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 2, "cached_tokens": 0}}])
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(plan, ["anthropic"]) as server:
        server.protocols.insert(0, big_stream_protocol(stream_events))
        # the stand-in writes headers and body apart: without this, Nagle's algorithm and
        # delayed ACKs hold each direct answer 40 ms (the gateway's client hides it)
        server._httpd.RequestHandlerClass.disable_nagle_algorithm = True
        config = GatewayConfig(upstream=server.url, key="sk-bench-real-key-0000", token=TOKEN,
                               protocol="anthropic", log_path=Path(tmp) / "llm_log.jsonl")  # fmt: skip
        with GatewayProcess(config, os.environ, Path(tmp) / "gateway.log") as gw:
            assert gw.port is not None
            result: dict[str, Any] = {"requests": requests, "stream_events": stream_events, "repeats": repeats}
            result.update(latency(server.port, gw.port, requests))
            result.update(throughput(server.port, gw, repeats))
            summary = gw.stop()
        assert summary is not None and summary["output_tokens"] >= 12345  # the stream was metered
    result["goals_met"] = result["added_p50_ms"] < 2.0 and result["ratio"] >= 0.9
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--stream-events", type=int, default=20000, help="events of about 1 KB in the stream")
    ap.add_argument("--repeats", type=int, default=9, help="pairs of streams (direct, through)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    result = measure(args.requests, args.stream_events, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}: {v}")
        print("goals: p50 added < 2 ms, throughput >= 0.9x direct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
