"""``--publish`` throughput: connections/s and bulk MB/s through the supervisor's forwarder
(host loopback -> the run's loopback), against the same server reached directly on the host.

    python tests/bench/bench_publish.py [--connections N] [--megabytes M]

One JSON document on stdout. The server (one per measurement) answers each connection: a line
"ping" gets "pong"; a line "bulk N" gets N bytes. Connections are sequential (each a full
connect/exchange/close), so the figure is latency-bound, as a distributed mutation worker's
requests are.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SERVER = r"""
import socket, sys
port = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(128)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    line = f.readline().split()
    f.close()  # the file object holds the socket open: the client waits for the close
    if not line or line[0] == b"quit":
        c.close()
        break
    if line[0] == b"bulk":
        left = int(line[1])
        chunk = b"x" * 65536
        while left > 0:
            c.sendall(chunk[:left])
            left -= len(chunk)
    else:
        c.sendall(b"pong\n")
    c.close()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port: int, line: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(line)
        got = 0
        while chunk := c.recv(1 << 20):
            got += len(chunk)
        return got


def wait_ready(port: int, deadline: float) -> None:
    while True:
        try:
            if exchange(port, b"ping\n") == 5:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the server never answered")
        time.sleep(0.05)


def measure(argv: list[str], port: int, connections: int, megabytes: int, cwd: str) -> dict:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(port, time.monotonic() + 30)
        t0 = time.perf_counter()
        for _ in range(connections):
            exchange(port, b"ping\n")
        conn_s = time.perf_counter() - t0
        size = megabytes << 20
        t0 = time.perf_counter()
        got = exchange(port, b"bulk %d\n" % size)
        bulk_s = time.perf_counter() - t0
        try:
            exchange(port, b"quit\n")
        except OSError:
            pass
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return {"connections": connections, "connections_per_s": round(connections / conn_s, 1),
            "ms_per_connection": round(conn_s / connections * 1000, 3),
            "bulk_megabytes": megabytes, "bulk_received_ok": got == size,
            "bulk_mb_per_s": round(size / bulk_s / 1e6, 1)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--connections", type=int, default=500)
    p.add_argument("--megabytes", type=int, default=256)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as work:
        Path(work, "server.py").write_text(SERVER)
        port = free_port()
        direct = measure([sys.executable, "server.py", str(port)], port, args.connections, args.megabytes,
                         work)
        port = free_port()
        published = measure([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--quiet",
                             "--publish", str(port), "--", sys.executable, "server.py", str(port)],
                            port, args.connections, args.megabytes, work)
    doc = {"direct": direct, "published": published,
           "connection_overhead_ms": round(published["ms_per_connection"] - direct["ms_per_connection"], 3),
           "cpus": os.cpu_count()}
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
