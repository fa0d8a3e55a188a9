"""The canary process: listeners, ready file, records, seq, peers, signals, durability."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from no_docker.canary.process import serve_argv, started_canary

PING = b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n"


def ask(address, family=socket.AF_UNIX, request: bytes = PING) -> bytes:
    """Send one request on a fresh connection, return the whole answer (the canary keeps alive,
    so read until the announced body is in)."""
    with socket.socket(family) as sock:
        sock.settimeout(10)
        sock.connect(address)
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += sock.recv(65536)
        return data


def test_every_listener_kind_with_port_0_and_seq_without_gaps(tmp_path):
    sock_path = tmp_path / "deep" / "er" / "docker.sock"
    with started_canary(tmp_path, unix=[str(sock_path)], tcp=["127.0.0.1:0", "[::1]:0"],
                        abstract=[f"no-docker-test-{os.getpid()}"]) as canary:
        assert canary.ready["pid"] == canary.proc.pid
        kinds = [(entry["kind"], entry["address"]) for entry in canary.ready["listeners"]]
        assert kinds == [("unix", str(sock_path)), ("tcp", "127.0.0.1:0"), ("tcp", "[::1]:0"),
                         ("abstract", f"no-docker-test-{os.getpid()}")]
        v4, v6 = canary.listener("tcp", 0)["port"], canary.listener("tcp", 1)["port"]
        assert v4 > 0 and v6 > 0
        assert stat.S_ISSOCK(sock_path.stat().st_mode)
        for _ in range(3):
            assert ask(str(sock_path)).startswith(b"HTTP/1.1 200 OK")
            assert ask(("127.0.0.1", v4), socket.AF_INET).startswith(b"HTTP/1.1 200 OK")
            assert ask(("::1", v6), socket.AF_INET6).startswith(b"HTTP/1.1 200 OK")
            assert ask(f"\0no-docker-test-{os.getpid()}").startswith(b"HTTP/1.1 200 OK")
        records = canary.records()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len(records) == 4 * 3 * 2  # a connection and a request record per ask
    for record in records:
        assert {"kind", "seq", "time", "listener", "conn"} <= record.keys()
    by_listener = {r["listener"] for r in records}
    assert by_listener == {str(sock_path), "127.0.0.1:0", "[::1]:0", f"no-docker-test-{os.getpid()}"}
    assert len({r["conn"] for r in records}) == 12


def test_unix_peer_is_the_connecting_process_by_so_peercred(tmp_path, spawn):
    with started_canary(tmp_path, unix=[str(tmp_path / "d.sock")]) as canary:
        code = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                "s.sendall(b'GET /_ping HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); s.recv(4096)")
        child = spawn([sys.executable, "-c", code, str(tmp_path / "d.sock")])
        assert child.wait(30) == 0
        connection = next(r for r in canary.records() if r["kind"] == "connection")
    assert connection["peer"]["pid"] == child.pid
    assert (connection["peer"]["uid"], connection["peer"]["gid"]) == (os.getuid(), os.getgid())
    assert connection["peer"]["comm"].startswith("python")


def test_tcp_peer_is_the_client_address(tmp_path):
    with started_canary(tmp_path, tcp=["127.0.0.1:0"]) as canary:
        port = canary.listener("tcp")["port"]
        with socket.create_connection(("127.0.0.1", port)) as sock:
            local_port = sock.getsockname()[1]
            sock.sendall(PING)
            sock.recv(4096)
        connection = next(r for r in canary.records() if r["kind"] == "connection")
    assert connection["peer"] == {"address": "127.0.0.1", "port": local_port}


def test_sigterm_stops_cleanly_removes_its_sockets_and_leaves_a_complete_log(tmp_path):
    sock_path = tmp_path / "d.sock"
    with started_canary(tmp_path, unix=[str(sock_path)]) as canary:
        ask(str(sock_path))
        assert canary.stop() == 0
        assert not sock_path.exists()
        assert canary.complaints() == ""
        lines = canary.log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
    assert stat.S_IMODE(canary.log.stat().st_mode) == 0o600  # headers may carry credentials


def test_a_restarted_canary_continues_seq_in_the_same_log(tmp_path):
    sock_path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[sock_path]) as canary:
        ask(sock_path)
        canary.stop()
    # A torn last line, as a SIGKILL in the middle of a large write would leave it.
    with canary.log.open("ab") as log:
        log.write(b'{"kind":"request","seq":3,"ti')
    with started_canary(tmp_path, unix=[sock_path]) as canary:
        ask(sock_path)
        canary.stop()
        seqs = [r["seq"] for r in canary.records()]
    assert seqs == [1, 2, 3, 4]


def test_a_removed_log_with_its_wire_file_left_is_refused_not_mixed(tmp_path):
    # Found by the newcomer pass: `rm canary.jsonl` and a new `canary serve` on it appended
    # the new session's pieces to the old canary.jsonl.wire under the same connection seqs;
    # `canary show` then read them as one ("... 199 bytes came before it; the rest is not read").
    sock_path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[sock_path]) as canary:
        ask(sock_path)
        canary.stop()
    wire = canary.log.with_name(canary.log.name + ".wire")
    kept = wire.read_bytes()
    assert kept
    canary.log.unlink()
    done = subprocess.run(serve_argv(canary.log, tmp_path / "ready2", unix=[sock_path]),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"no-docker canary: --log {canary.log}: the log has no record, but its wire file "
                           f"{wire} holds {len(kept)} bytes of an earlier log; remove {wire} too, or give "
                           "another --log\n")
    assert wire.read_bytes() == kept and not (tmp_path / "ready2").exists()
    wire.unlink()  # both removed: a fresh session, seq from 1
    with started_canary(tmp_path, unix=[sock_path]) as again:
        ask(sock_path)
        again.stop()
        assert [r["seq"] for r in again.records()] == [1, 2]


def test_a_live_socket_is_never_taken_over_but_a_stale_one_is(tmp_path):
    sock_path = tmp_path / "d.sock"
    live = socket.socket(socket.AF_UNIX)
    live.bind(str(sock_path))
    live.listen(1)
    try:
        done = subprocess.run(serve_argv(tmp_path / "log", tmp_path / "ready", unix=[str(sock_path)]),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 1
        assert done.stderr == f"no-docker canary: --unix {sock_path}: a server already listens there; " \
                              "not taking it over\n"
        assert not (tmp_path / "ready").exists()
    finally:
        live.close()
    # Closed without unlink: a stale socket file of a dead server, which the canary replaces.
    with started_canary(tmp_path, unix=[str(sock_path)]):
        assert ask(str(sock_path)).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize(("argv", "message"), [
    (["serve", "--log", "x"], "give at least one listener"),
    (["serve", "--unix", "/tmp/a", "--tcp", "10.0.0.1:2375", "--log", "x"], "not a loopback address"),
    (["serve", "--tcp", "127.0.0.1:99999", "--log", "x"], "port must be a number from 0 to 65535"),
    (["serve", "--tcp", "2375", "--log", "x"], "expected HOST:PORT"),
    (["serve", "--unix", "/tmp/a", "/tmp/a", "--log", "x"], "given twice"),
    (["serve", "--unix", "/tmp/a"], "the following arguments are required: --log"),
    (["serve", "--unix", "/tmp/a", "--log", "x", "--mode", "maybe"], "invalid choice"),
    (["serve", "--unix", "/tmp/" + "a" * 120, "--log", "x"], "longer than the 107 bytes"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_command_lines_are_one_line_and_exit_2(argv, message):
    done = subprocess.run([sys.executable, "-m", "no_docker.canary", *argv], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2, done
    assert done.stderr.startswith("no-docker canary: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr
    assert done.stderr.count("no-docker canary") == 1


def test_no_docker_canary_is_the_same_command(tmp_path):
    no_docker = Path(sys.executable).parent / "no-docker"
    if not no_docker.exists():
        pytest.skip("no-docker console script not installed")
    done = subprocess.run([str(no_docker), "canary", "serve", "--log", "x"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "give at least one listener" in done.stderr


async def _hammer(path: str, answered: list[int], stop: asyncio.Event, client: int) -> None:
    try:
        reader, writer = await asyncio.open_unix_connection(path)
        n = 0
        while not stop.is_set():
            n += 1
            ident = client * 1_000_000 + n
            writer.write(f"GET /_ping?id={ident} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            answered.append(ident)
    except (OSError, asyncio.IncompleteReadError):
        return  # the canary was killed under us: what was answered before counts


def test_answered_implies_in_the_log_even_after_sigkill(tmp_path):
    sock_path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[sock_path]) as canary:
        answered: list[int] = []

        async def scenario() -> None:
            stop = asyncio.Event()
            clients = [asyncio.create_task(_hammer(sock_path, answered, stop, c)) for c in range(20)]
            while len(answered) < 2000:
                await asyncio.sleep(0.01)
            # SIGKILL while the clients are mid-flight: no chance to flush anything.
            os.kill(canary.proc.pid, signal.SIGKILL)
            await asyncio.wait_for(asyncio.gather(*clients), 30)

        asyncio.run(scenario())
        assert canary.proc.wait(10) == -signal.SIGKILL
        logged = {int(r["params"][0][1]) for r in canary.records() if r["kind"] == "request"}
    missing = set(answered) - logged
    assert not missing, f"{len(missing)} answered requests are not in the log, e.g. {sorted(missing)[:5]}"
    assert len(answered) >= 2000


def test_the_canary_is_a_neutral_witness():
    # It must not share code with what it witnesses: no supervisor, no mutants.
    code = ("import sys, no_docker.canary.cli, no_docker.canary.server, no_docker.canary.show, "
            "no_docker.canary.process; parts = ('no_docker.supervisor', 'no_docker.mutants'); "
            "print(sorted(m for m in sys.modules if m.startswith(parts)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_sigint_stops_it_like_sigterm(tmp_path):
    sock_path = tmp_path / "d.sock"
    with started_canary(tmp_path, unix=[str(sock_path)]) as canary:
        ask(str(sock_path))
        canary.proc.send_signal(signal.SIGINT)
        assert canary.proc.wait(30) == 0
        assert not sock_path.exists() and canary.complaints() == ""
        assert [r["kind"] for r in canary.records()] == ["connection", "request"]


def test_serve_says_on_stderr_once_it_is_ready_and_nothing_on_stdout(tmp_path):
    # Issue 18 item 11: a user starting `canary serve` by hand learns that it listens (the real
    # TCP port included) and where the log is, without --ready; stdout stays empty.
    sock_path = tmp_path / "run" / "d.sock"
    log, ready = tmp_path / "c.jsonl", tmp_path / "c.ready"
    out, err = tmp_path / "out", tmp_path / "err"
    argv = serve_argv(log, ready, unix=[str(sock_path)], tcp=["127.0.0.1:0"], abstract=[f"nd-{os.getpid()}"])
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while b"\n" not in err.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_bytes()
            time.sleep(0.02)
        assert ready.exists()  # the line comes after the ready file
        port = next(e["port"] for e in json.loads(ready.read_text())["listeners"] if e["kind"] == "tcp")
        assert port != 0
        assert err.read_text() == (
            f"no-docker canary: ready (pid {proc.pid}), answering on unix {sock_path}, tcp 127.0.0.1:{port}, "
            f"abstract @nd-{os.getpid()}; recording to {log}\n")
        ask(str(sock_path))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert out.read_bytes() == b""
    assert err.read_text().count("\n") == 1  # once, and nothing more at a clean stop


def test_the_ready_line_is_one_line_and_says_refuse():
    from no_docker.canary.server import ready_line

    entries = [{"kind": "tcp", "address": "[::1]:0", "host": "::1", "port": 2375},
               {"kind": "unix", "address": "/tmp/a\nb", "path": "/tmp/a\nb"}]
    line = ready_line(entries, Path("/l/c.jsonl"), 7, "refuse")
    assert line == ("no-docker canary: ready (pid 7), refusing every request (--mode refuse) on "
                    "tcp [::1]:2375, unix /tmp/a\\nb; recording to /l/c.jsonl")
