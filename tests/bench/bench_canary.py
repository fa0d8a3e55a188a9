"""Benchmark: recorded requests per second of the canary, and proof that none is lost.

50 concurrent clients (by default) on a unix socket send ``GET /v1.50/containers/json?id=N``
as fast as the canary answers; every answered id must be in the log. Prints one JSON object.

    .venv/bin/python tests/bench/bench_canary.py [--clients 50] [--requests 30000] [--new-connections]
                                                 [--client-sched batch|normal]

The load generator runs as SCHED_BATCH by default (sched(7)): on a small machine it shares
the CPUs with the canary, and a normal task woken by each answer preempts the canary that
just sent it (the scheduler's wakeup preemption), so the figure would mostly measure that
ping-pong. ``--client-sched normal`` measures it that way too; the JSON says which.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from no_docker.canary.process import started_canary


class _Client(asyncio.Protocol):
    """One keep-alive client: sends the next request when the whole answer is in.

    A bare protocol, not asyncio streams: the client shares the machine with the canary, and
    the less CPU it burns, the more the figure measures the canary.
    """

    def __init__(self, ids: list[int], answered: list[int], done: asyncio.Future[None]) -> None:
        self.ids, self.answered, self.done = iter(ids), answered, done
        self.buffer = b""
        self.current = -1
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._next()

    def _next(self) -> None:
        assert self.transport is not None
        self.current = next(self.ids, -1)
        if self.current < 0:
            self.transport.close()
            if not self.done.done():
                self.done.set_result(None)
            return
        self.transport.write(b"GET /v1.50/containers/json?id=%d HTTP/1.1\r\nHost: api.moby.localhost\r\n"
                             b"User-Agent: bench\r\n\r\n" % self.current)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end]
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        if len(self.buffer) < end + 4 + length:
            return
        self.buffer = self.buffer[end + 4 + length:]
        if head.startswith(b"HTTP/1.1 200 "):
            self.answered.append(self.current)
        self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _client(path: str, ids: list[int], answered: list[int], new_connections: bool) -> None:
    loop = asyncio.get_running_loop()
    chunks = [[ident] for ident in ids] if new_connections else [ids]
    for chunk in chunks:
        done: asyncio.Future[None] = loop.create_future()
        await loop.create_unix_connection(lambda chunk=chunk, done=done: _Client(chunk, answered, done), path)
        await done


async def _load(path: str, clients: int, requests: int, new_connections: bool) -> tuple[list[int], float]:
    answered: list[int] = []
    shares = [list(range(c, requests, clients)) for c in range(clients)]
    started = time.perf_counter()
    await asyncio.gather(*(_client(path, share, answered, new_connections) for share in shares))
    return answered, time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (proc(5): fields 14 and 15, after the ``)`` that ends comm)."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rfind(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(clients: int, requests: int, new_connections: bool, client_sched: str = "batch") -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        work = Path(tmp)
        sock = str(work / "docker.sock")
        with started_canary(work, unix=[sock]) as canary:
            # Only now, so that the canary (already started) keeps the normal policy.
            policy = os.SCHED_BATCH if client_sched == "batch" else os.SCHED_OTHER
            os.sched_setscheduler(0, policy, os.sched_param(0))
            canary_sched = "normal" if os.sched_getscheduler(canary.proc.pid) == os.SCHED_OTHER else "other"
            cpu_before = _cpu_seconds(canary.proc.pid)
            answered, seconds = asyncio.run(_load(sock, clients, requests, new_connections))
            canary_cpu = _cpu_seconds(canary.proc.pid) - cpu_before
            client_cpu = time.process_time()
            status = canary.stop()
            records = canary.records()
    logged = [int(r["params"][0][1]) for r in records if r["kind"] == "request"]
    lost = set(answered) - set(logged)
    seqs = [r["seq"] for r in records]
    return {
        "bench": "canary", "socket": "unix", "clients": clients, "requests": requests,
        "client_sched": client_sched, "canary_sched": canary_sched,
        "connection_per_request": new_connections,
        "answered": len(answered), "in_log": len(logged), "lost": len(lost),
        "records": len(records), "seq_without_gaps": seqs == list(range(1, len(seqs) + 1)),
        "seconds": round(seconds, 3), "recorded_requests_per_s": round(len(logged) / seconds, 1),
        "canary_cpu_us_per_request": round(canary_cpu / max(1, len(logged)) * 1e6, 1),
        "bench_client_cpu_us_per_request": round(client_cpu / max(1, len(answered)) * 1e6, 1),
        "canary_exit": status, "cpus": os.cpu_count(), "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=30000)
    parser.add_argument("--new-connections", action="store_true", help="one connection per request")
    parser.add_argument("--client-sched", choices=("batch", "normal"), default="batch",
                        help="scheduling policy of the load generator (default batch, see above)")
    args = parser.parse_args(argv)
    result = run(args.clients, args.requests, args.new_connections, args.client_sched)
    print(json.dumps(result))
    return 0 if result["lost"] == 0 and result["answered"] == args.requests else 1


if __name__ == "__main__":
    sys.exit(main())
