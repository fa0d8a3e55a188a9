"""Benchmark: what the connect mediation (P12) costs a connect(), inside a real run.

The same program runs twice, alternated round by round: under ``no-docker run`` (every
connect goes through the supervisor) and outside (plain kernel). It times ``connect`` +
``close`` on a fresh socket (the socket() call is outside the timing) to a pathname unix
server it bound itself in its ``/tmp``, and to a loopback TCP server of its own, and counts
connects per second. Prints one JSON object: medians in µs, the added median per connect
(DESIGN §10: <= 50 µs), connects/s inside against outside.

``--floor`` measures what no mediator written in Python can go below, on the same program,
without bwrap or the supervisor around it: a child under the same filter (in a network
namespace of its own), answered by a thread of this process that does nothing but receive
and answer ``SECCOMP_USER_NOTIF_FLAG_CONTINUE``, once after ``poll`` (``poll``) and once
blocking in RECV (``recv``), each with and without SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
(``-sync``); ``mediator`` is the real ``Mediator`` in the same set-up, ``kernel`` the child
under no filter. ``added_us`` is each against ``kernel``.

    .venv/bin/python tests/bench/bench_mediation.py [--connects 3000] [--rounds 3] [--floor]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


# kernel: no filter; poll/recv: the do-nothing floor, after poll() or blocking in RECV; -sync: with
# SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (as the Mediator sets it); mediator: the real one.
FLOOR_KINDS = ("kernel", "poll", "recv", "poll-sync", "recv-sync", "mediator")


def _do_nothing(listener: int, use_poll: bool, sync: bool) -> None:
    """The floor: receive each notification and let the kernel do the connect. Never sound
    (FLAG_CONTINUE after nothing); only what the round trip through a Python thread costs."""
    import _signal
    import fcntl
    import select

    from no_docker.supervisor.isolation import mediation

    _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    if sync:
        fcntl.ioctl(listener, mediation.SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                    mediation.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
    recv, send = mediation.SECCOMP_IOCTL_NOTIF_RECV, mediation.SECCOMP_IOCTL_NOTIF_SEND
    size, pack, ioctl = mediation.NOTIF.size, mediation.NOTIF_RESP.pack, fcntl.ioctl
    hangup = select.POLLHUP | select.POLLERR | select.POLLNVAL
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    buf = bytearray(size)
    zero = bytes(size)
    while True:
        if use_poll and any(ev & hangup for _, ev in poller.poll()):
            return
        buf[:] = zero
        try:
            ioctl(listener, recv, buf, True)
        except OSError:
            if poller.poll(0):  # POLLHUP: every task of the filter is gone (Linux 6.11: RECV returns)
                return
            continue
        try:
            ioctl(listener, send, pack(int.from_bytes(buf[:8], "little"), 0, 0,
                                       mediation.SECCOMP_USER_NOTIF_FLAG_CONTINUE))
        except OSError:
            pass


def floor_once(kind: str, connects: int) -> dict:
    """PROGRAM in a child under the mediation filter (in a network namespace of its own: needs
    root) answered by KIND (FLOOR_KINDS), in this process."""
    import _thread
    import socket

    from no_docker.supervisor.isolation import mediation
    from no_docker.supervisor.isolation import syscalls as linux

    linux.load()  # before fork: no import in the child
    work = tempfile.mkdtemp(prefix="bench-floor-")
    parent, child = socket.socketpair()
    out_r, out_w = os.pipe()
    argv = [sys.executable, "-I", "-c", PROGRAM, str(connects), work]
    pid = os.fork()
    if pid == 0:
        try:
            parent.close()
            os.dup2(out_w, 1)
            if kind != "kernel":
                linux.unshare(linux.CLONE_NEWNET)
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # lo up
                    import fcntl
                    import struct
                    fcntl.ioctl(s, 0x8914, struct.pack("=16sH22x", b"lo", 0x1 | 0x8 | 0x40))
                listener = linux.install_filter(mediation.program(os.uname().machine),
                                                mediation.SECCOMP_FILTER_FLAG_NEW_LISTENER
                                                | mediation.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
                socket.send_fds(child, [b"L"], [listener])
                os.close(listener)
            child.recv(1)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    child.close()
    os.close(out_w)
    mediator = None
    try:
        if kind != "kernel":
            _msg, fds, _f, _a = socket.recv_fds(parent, 16, 1)
            listener = fds[0]
            if kind == "mediator":
                mediator = mediation.Mediator(listener)
                mediator.start()
                netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    mediator.set_run_netns(netns)
                finally:
                    os.close(netns)
            else:
                floor_args = (listener, kind.startswith("poll"), kind.endswith("sync"))
                _thread.start_new_thread(_do_nothing, floor_args)
        parent.send(b"g")
        out = b""
        while chunk := os.read(out_r, 65536):
            out += chunk
        _, status = os.waitpid(pid, 0)
        pid = -1
        if status != 0:
            raise RuntimeError(f"floor child ({kind}) exited with status {status:#x}")
        return json.loads(out.decode().strip().splitlines()[-1])
    finally:
        if pid > 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        if mediator is not None:
            mediator.stop()
        os.close(out_r)
        parent.close()
        shutil.rmtree(work, ignore_errors=True)


def floor(connects: int, rounds: int) -> dict:
    samples: dict[str, dict[str, list[float]]] = {kind: {} for kind in FLOOR_KINDS}
    for _ in range(rounds):
        for kind in FLOOR_KINDS:
            for family, figures in floor_once(kind, connects).items():
                for key, value in figures.items():
                    samples[kind].setdefault(f"{family}_{key}", []).append(value)
    med = {kind: {k: round(statistics.median(v), 2) for k, v in d.items()} for kind, d in samples.items()}
    def added(kind: str, family: str) -> float:
        return round(med[kind][f"{family}_median_us"] - med["kernel"][f"{family}_median_us"], 2)

    return {
        "connects": connects, "rounds": rounds, **med,
        "added_us": {kind: {family: added(kind, family) for family in ("unix", "tcp")}
                     for kind in FLOOR_KINDS if kind != "kernel"},
        "load_average": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connects", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--floor", action="store_true",
                   help="the do-nothing floor and the mediator alone (no bwrap, no supervisor)")
    args = p.parse_args(argv)
    if args.connects < 10 or args.rounds < 1:
        p.error(f"--connects must be >= 10 and --rounds >= 1 (got {args.connects}, {args.rounds})")
    if args.floor:
        json.dump(floor(args.connects, args.rounds), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
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
