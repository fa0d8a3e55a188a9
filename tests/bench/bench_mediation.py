"""Benchmark: what the connect mediation (P12) costs a connect(), inside a real run.

The same program runs twice, alternated round by round: under ``no-docker run`` (every
connect goes through the supervisor) and outside (plain kernel). It times ``connect`` +
``close`` on a fresh socket (the socket() call is outside the timing) to a pathname unix
server it bound itself in its ``/tmp``, and to a loopback TCP server of its own, and counts
connects per second. Prints one JSON object: medians in µs, the added median per connect
(DESIGN §10: <= 50 µs), connects/s inside against outside.

    .venv/bin/python tests/bench/bench_mediation.py [--connects 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = r"""
import json, os, socket, sys, threading, time
n = int(sys.argv[1])
d = sys.argv[2]
path = os.path.join(d, "bench-%d.sock" % os.getpid())
unix = socket.socket(socket.AF_UNIX); unix.bind(path); unix.listen(4096)
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(4096)
port = tcp.getsockname()[1]
def drain(srv):
    while True:
        try:
            c, _ = srv.accept()
        except OSError:
            return
        c.close()
for srv in (unix, tcp):
    threading.Thread(target=drain, args=(srv,), daemon=True).start()
out = {}
for label, family, address in (("unix", socket.AF_UNIX, path), ("tcp", socket.AF_INET, ("127.0.0.1", port))):
    times = []
    start = time.perf_counter()
    for _ in range(n):
        s = socket.socket(family)
        t0 = time.perf_counter_ns()
        s.connect(address)
        s.close()
        times.append(time.perf_counter_ns() - t0)
    wall = time.perf_counter() - start
    times.sort()
    out[label] = {"median_us": times[len(times) // 2] / 1000, "p90_us": times[int(len(times) * 0.9)] / 1000,
                  "connects_per_s": round(n / wall)}
os.unlink(path)
print(json.dumps(out))
"""


def once(argv: list[str], work: str) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]}... exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connects", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    if args.connects < 10 or args.rounds < 1:
        p.error(f"--connects must be >= 10 and --rounds >= 1 (got {args.connects}, {args.rounds})")
    samples: dict[str, dict[str, list[float]]] = {"inside": {}, "outside": {}}
    with tempfile.TemporaryDirectory(prefix="bench-mediation-") as work:
        program = [sys.executable, "-I", "-c", PROGRAM, str(args.connects)]
        inside = [sys.executable, "-m", "no_docker.supervisor.cli", "run", "--quiet", "--", *program, "/tmp"]
        outside = [*program, work]
        for _ in range(args.rounds):
            for where, cmd in (("inside", inside), ("outside", outside)):
                result = once(cmd, work)
                for family, figures in result.items():
                    for key, value in figures.items():
                        samples[where].setdefault(f"{family}_{key}", []).append(value)
    med = {where: {k: round(statistics.median(v), 2) for k, v in d.items()} for where, d in samples.items()}
    doc = {
        "connects": args.connects, "rounds": args.rounds,
        "inside": med["inside"], "outside": med["outside"],
        "added_median_us": {family: round(med["inside"][f"{family}_median_us"]
                                          - med["outside"][f"{family}_median_us"], 2)
                            for family in ("unix", "tcp")},
        "target_added_us": 50,
        "load_average": os.getloadavg()[0],
    }
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
