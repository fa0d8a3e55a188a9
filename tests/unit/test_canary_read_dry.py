"""Issue 27 (canary, finding 1): bytes still queued in the canary's socket when a connection
ends are read and recorded, on every path that ends it. Before, a client that pipelined
without reading its answers, then closed, left ~233 KB (~3300 complete requests the kernel
had accepted from it) in no record; so did SIGTERM and the idle timeout.

Each test pipelines fixed-size DELETEs on a real unix socket until the kernel accepts no
more (the canary stopped reading: the client reads no answer), ends the connection one way,
and then requires the log to hold every complete request sent, in order, and the records to
cover every byte sent without a gap. On a unix socket every byte ``send`` accepted is in the
canary's receive queue (unix(7): there is no send queue of the client's own), so "sent" is
exactly what the canary must account for."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import time

import pytest
from no_docker.canary.process import started_canary
from no_docker.canary.recorder import Recorder
from no_docker.canary.server import Canary, EngineConnection, ListenerSpec

from tests.unit.test_canary_witness import covers, req

SIZE = len(b"DELETE /v1.50/containers/c000000?force=1 HTTP/1.1\r\nHost: docker\r\n\r\n")


def delete(n: int) -> bytes:
    data = b"DELETE /v1.50/containers/c%06d?force=1 HTTP/1.1\r\nHost: docker\r\n\r\n" % n
    assert len(data) == SIZE
    return data


PAYLOAD = b"".join(delete(n) for n in range(40_000))  # 2.8 MB: more than any socket queue holds


def pipeline_until_full(sock: socket.socket, quiet: float = 1.0, timeout: float = 30.0) -> int:
    """Send PAYLOAD without reading until the socket has taken nothing for ``quiet`` seconds
    (both directions full: the canary paused reading it). The bytes the kernel accepted."""
    sock.setblocking(False)
    sent = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and sent < len(PAYLOAD):
        _, writable, _ = select.select([], [sock], [], quiet)
        if not writable:
            return sent
        try:
            sent += sock.send(PAYLOAD[sent:sent + 65536])
        except BlockingIOError:
            continue
    raise AssertionError(f"the canary never stopped reading ({sent} bytes sent)")


def wait_for(canary, conn: int, want: int, timeout: float = 20.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in canary.records() if r["conn"] == conn and r["kind"] in ("request", "raw")]
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def check_every_byte_sent_is_recorded(found: list[dict], sent: int) -> None:
    complete, rest = divmod(sent, SIZE)
    requests = [r for r in found if r["kind"] == "request"]
    assert len(requests) == complete, f"{len(requests)} requests recorded of {complete} sent ({sent} bytes)"
    assert [r["path"] for r in requests] == [f"/v1.50/containers/c{n:06d}" for n in range(complete)]
    raws = [r for r in found if r["kind"] == "raw"]
    assert [r["raw_kind"] for r in raws] == (["incomplete"] if rest else [])
    covers(sorted(found, key=lambda r: r["offset"]), sent)


@pytest.fixture
def canary(tmp_path):
    with started_canary(tmp_path, unix=[str(tmp_path / "d.sock")], extra=["--idle-timeout", "2"]) as running:
        yield running


def connect(canary) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(canary.listener("unix")["path"])
    return sock


def test_a_client_that_pipelines_without_reading_then_closes_is_recorded_whole(canary):
    sock = connect(canary)
    try:
        sent = pipeline_until_full(sock)
    finally:
        sock.close()
    assert sent > 32 * 1024  # the shape of the issue: many requests, a part never read before
    found = wait_for(canary, 1, sent // SIZE)
    check_every_byte_sent_is_recorded(found, sent)
    assert canary.complaints() == ""


def test_sigterm_while_a_client_pipelines_records_what_its_socket_holds(canary):
    sock = connect(canary)
    try:
        sent = pipeline_until_full(sock)
        canary.proc.send_signal(signal.SIGTERM)
        assert canary.proc.wait(20) == 0, canary.stderr()
    finally:
        sock.close()
    check_every_byte_sent_is_recorded(wait_for(canary, 1, 0, timeout=0), sent)
    records = canary.records()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert canary.complaints() == ""


def test_the_idle_timeout_records_what_the_socket_of_a_silent_client_holds(canary):
    sock = connect(canary)
    try:
        sent = pipeline_until_full(sock)
        found = wait_for(canary, 1, sent // SIZE)  # the client neither reads nor closes
    finally:
        sock.close()
    check_every_byte_sent_is_recorded(found, sent)
    unsent = [r for r in canary.records() if r["kind"] == "unsent"]
    assert unsent and "aborted" in unsent[0]["reason"]


# --- every path that ends a connection, in process: the canary's socket is one end of a socketpair,
# and what the test leaves in it is what the kernel still holds when the connection ends --------

class Transport(asyncio.Transport):
    """What an EngineConnection uses of its asyncio transport, over a real socket."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock, self.out, self.closed, self.paused = sock, bytearray(), False, False

    def get_extra_info(self, name: str, default=None):
        return {"socket": self.sock}.get(name, default)

    def write(self, data: bytes) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    abort = close

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


ATTACH = req("POST", "/v1.50/containers/web/attach?stream=1&stdin=1", "Connection: Upgrade", "Upgrade: tcp")
TLS_HELLO = b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40
BAD = b"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
PING_CLOSE = req("GET", "/_ping", "Connection: close")
QUEUED = PAYLOAD[:5 * SIZE]


def one_connection(tmp_path, first: bytes, queued: bytes, end) -> tuple[list[dict], bytes]:
    """Feed ``first`` as a read, leave ``queued`` in the socket, end the connection with
    ``end(conn)``: the records of the connection and what it answered."""
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        theirs.sendall(queued)
        recorder = Recorder(tmp_path / "log.jsonl")

        async def run() -> bytes:
            listener = ListenerSpec("unix", "/d.sock", path="/d.sock")
            conn = EngineConnection(Canary(recorder, idle_timeout=5.0), listener)
            transport = Transport(ours)
            conn.connection_made(transport)
            conn.data_received(first)
            end(conn)
            return bytes(transport.out)

        answer = asyncio.run(run())
        recorder.close()
        records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_bytes().splitlines()]
        records = [r for r in records if r["kind"] in ("request", "raw")]
        return records, answer
    finally:
        ours.close()
        theirs.close()


ENDINGS = {
    "reset": lambda conn: conn.connection_lost(ConnectionResetError(104, "reset")),
    "sigterm": lambda conn: conn.shutdown(),
    "idle": lambda conn: conn.reap_if_idle(1e12),
    "eof-while-paused": lambda conn: (conn.pause_writing(), conn.eof_received(),
                                      conn.connection_lost(BrokenPipeError(32, "pipe"))),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_ending_reads_the_socket_dry_before_the_last_record(tmp_path, ending):
    records, _ = one_connection(tmp_path, delete(0)[:30], QUEUED[30:], ENDINGS[ending])
    check_every_byte_sent_is_recorded(records, len(QUEUED))


def test_requests_queued_behind_one_that_ends_the_connection_are_recorded_unanswered(tmp_path):
    records, answer = one_connection(tmp_path, PING_CLOSE, QUEUED, lambda conn: None)
    assert answer.count(b"HTTP/1.1 200 OK") == 1 and b"Connection: close" in answer
    assert [(r["path"], r["status"]) for r in records] == [("/_ping", 200)] + [
        (f"/v1.50/containers/c{n:06d}", 0) for n in range(5)]
    assert all(r.get("unanswered") for r in records[1:])
    covers(records, len(PING_CLOSE + QUEUED))


@pytest.mark.parametrize("first, kind, status", [(BAD, "bad-http", 400), (TLS_HELLO, "tls", None)])
def test_bytes_queued_behind_what_is_not_a_request_are_in_its_raw_record(tmp_path, first, kind, status):
    records, answer = one_connection(tmp_path, first, QUEUED, lambda conn: None)
    assert [(r["raw_kind"], r.get("status")) for r in records] == [(kind, status)]
    covers(records, len(first + QUEUED))
    assert answer.startswith(b"HTTP/1.1 400 ") == (status == 400)


def test_bytes_queued_after_a_101_are_in_the_stream_record(tmp_path):
    stdin = b"rm -rf / --no-preserve-root\n" * 1000
    records, answer = one_connection(
        tmp_path, ATTACH, stdin, lambda conn: conn.connection_lost(ConnectionResetError(104, "reset")))
    assert answer.startswith(b"HTTP/1.1 101 ")
    assert [(r["kind"], r.get("raw_kind"), r["bytes_len"]) for r in records] == [
        ("request", None, len(ATTACH)), ("raw", "stream", len(stdin))]
    covers(records, len(ATTACH + stdin))
