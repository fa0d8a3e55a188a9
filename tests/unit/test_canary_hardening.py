"""Bad input against a real canary: it never crashes, bounds its memory, records every
connection, hangs up on idle ones, and keeps answering the others."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest
from no_docker.canary.framing import MAX_HEAD
from no_docker.canary.process import started_canary

PING = b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    work = tmp_path_factory.mktemp("canary-hard")
    with started_canary(work, unix=[str(work / "d.sock")], extra=["--idle-timeout", "3"]) as running:
        yield running
        # Nothing went wrong inside: asyncio logs an exception escaping a protocol callback to stderr.
        assert running.proc.poll() is None, running.stderr()
        assert "Traceback" not in running.stderr() and "Error" not in running.stderr(), running.stderr()


def connect(canary) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(canary.listener("unix")["path"])
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def still_answers(canary) -> None:
    with connect(canary) as sock:
        sock.sendall(PING)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
    assert canary.proc.poll() is None


def records_of(canary, conn: int) -> list[dict]:
    return [r for r in canary.records() if r["conn"] == conn]


def last_conn(canary) -> int:
    return max((r["conn"] for r in canary.records()), default=0)


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def test_random_bytes_are_a_raw_record_and_the_canary_hangs_up(canary):
    noise = bytes(range(256)) * 4
    with connect(canary) as sock:
        sock.sendall(noise)
        assert read_all(sock) == b""
    conn = last_conn(canary)
    raw = [r for r in records_of(canary, conn) if r["kind"] == "raw"]
    assert len(raw) == 1 and raw[0]["raw_kind"] == "garbage"
    still_answers(canary)


def test_half_a_request_then_close_is_recorded_as_incomplete(canary):
    with connect(canary) as sock:
        sock.sendall(b"POST /v1.50/containers/create HTTP/1.1\r\nHost: x\r\nContent-Le")
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn_records = records_of(canary, last_conn(canary))
        if any(r["kind"] == "raw" for r in conn_records):
            break
        time.sleep(0.05)
    kinds = [(r["kind"], r.get("raw_kind")) for r in conn_records]
    assert kinds == [("connection", None), ("raw", "incomplete")]
    still_answers(canary)


def test_a_silent_connection_is_closed_after_the_idle_timeout(canary):
    with connect(canary) as sock:
        sock.sendall(b"GET /_pi")  # a valid start, then nothing
        started = time.monotonic()
        assert read_all(sock) == b""  # the canary hung up (idle timeout 3 s)
        assert time.monotonic() - started < 30
    still_answers(canary)


def test_an_oversized_header_is_recorded_before_the_431(canary):
    # Past Go's read limit for a head (MAX_HEAD: 1 MiB and its bufio slop), as Go answers it.
    with connect(canary) as sock:
        sock.sendall(b"GET /_ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n")
        answer = read_all(sock)
    assert answer.split(b"\r\n")[0].endswith(b" 431 Request Header Fields Too Large")
    raw = [r for r in records_of(canary, last_conn(canary)) if r["kind"] == "raw"]
    assert len(raw) == 1 and raw[0]["raw_kind"] == "bad-http" and raw[0]["status"] == 431
    still_answers(canary)


def test_a_100_mib_body_is_hashed_whole_kept_to_1_mib_and_memory_stays_bounded(canary):
    before = peak_rss_kib(canary.proc.pid)
    chunk = bytes(range(256)) * 4096  # 1 MiB, not valid UTF-8
    total = 100
    digest = hashlib.sha256()
    with connect(canary) as sock:
        sock.sendall(b"POST /v1.50/images/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-tar\r\n"
                     b"Content-Length: %d\r\n\r\n" % (total * len(chunk)))
        for _ in range(total):
            sock.sendall(chunk)
            digest.update(chunk)
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200")
    time.sleep(0.2)  # let the canary see the close: nothing more may be recorded for it
    connection, record = records_of(canary, last_conn(canary))
    assert connection["kind"] == "connection" and record["kind"] == "request"
    assert record["body_len"] == total * len(chunk)
    assert record["body_sha256"] == digest.hexdigest()
    assert record["body_encoding"] == "base64" and record["body_truncated"] is True
    assert len(record["body"]) == 4 * (len(chunk) + 2) // 3
    # Measured: about +5 MB (the kept MiB, its base64 and the JSON line); 100 MB if it held the body.
    assert peak_rss_kib(canary.proc.pid) - before < 30 * 1024, "the canary held the body in memory"
    still_answers(canary)


def test_a_client_that_never_reads_is_bounded_and_does_not_block_others(canary):
    before = peak_rss_kib(canary.proc.pid)
    greedy = connect(canary)
    greedy.setblocking(False)
    sent = 0
    pipelined = PING * 1000
    hung_up = False
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not hung_up:
            try:
                sent += greedy.send(pipelined)
            except BlockingIOError:
                # Both directions are full: the canary stopped reading it; others go on.
                still_answers(canary)
                time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                hung_up = True  # idle (nothing readable) past --idle-timeout: aborted
    finally:
        greedy.close()
    assert sent > 0 and hung_up
    assert peak_rss_kib(canary.proc.pid) - before < 40 * 1024


def test_500_connections_opened_and_dropped_are_each_recorded(canary):
    first = last_conn(canary) + 1
    socks = [connect(canary) for _ in range(500)]
    for sock in socks:
        sock.close()
    still_answers(canary)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        conns = {r["conn"] for r in canary.records() if r["kind"] == "connection" and r["conn"] >= first}
        if len(conns) >= 501:
            break
        time.sleep(0.1)
    assert len(conns) == 501
    records = canary.records()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def test_a_client_that_half_closes_after_its_request_still_gets_every_answer(canary):
    # shutdown(SHUT_WR) right after the request, as socat and nc -N do: the EOF may arrive
    # while a request is between being parsed and being answered (regression: hung up then).
    two = PING + b"GET /v1.50/containers/json HTTP/1.1\r\nHost: x\r\n\r\n"
    for round_ in range(80):
        with connect(canary) as sock:
            sock.sendall(PING if round_ % 2 else two)
            sock.shutdown(socket.SHUT_WR)
            answer = read_all(sock)
        assert answer.count(b"HTTP/1.1 200 OK") == (1 if round_ % 2 else 2), (round_, answer[:200])


def test_pipelined_requests_of_a_client_that_leaves_are_each_recorded(canary):
    # Whether the canary got to answer them or not, three requests sent are three records.
    three = b"".join(b"DELETE /v1.50/images/img%d HTTP/1.1\r\nHost: x\r\n\r\n" % n for n in range(3))
    first = last_conn(canary) + 1
    for _ in range(30):
        with connect(canary) as sock:
            sock.sendall(three)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        records = canary.records()
        per_conn = {conn: [r for r in records if r["conn"] == conn and r["kind"] == "request"]
                    for conn in range(first, first + 30)}
        if all(len(found) == 3 for found in per_conn.values()):
            break
        time.sleep(0.1)
    for conn, found in per_conn.items():
        assert [r["path"] for r in found] == [f"/v1.50/images/img{n}" for n in range(3)], (conn, found)
        for record in found:
            assert record["status"] == 200 or (record["status"] == 0 and record["unanswered"] is True)
