"""Issue 19: the six cases in which the canary missed or mis-recorded what a client sent,
each on real sockets of a real canary, the records compared byte for byte with what was sent.
(The hypothesis property over framings is tests/property/test_canary_accounting.py.)"""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import struct
import time

import pytest
from no_docker.canary.framing import MAX_HEAD
from no_docker.canary.process import started_canary
from no_docker.canary.records import parse_log
from no_docker.canary.show import render, summarize


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    work = tmp_path_factory.mktemp("canary-witness")
    with started_canary(work, unix=[str(work / "d.sock")], tcp=["127.0.0.1:0"],
                        extra=["--idle-timeout", "5"]) as running:
        yield running
        assert running.proc.poll() is None, running.stderr()
        assert "Traceback" not in running.stderr() and "Error" not in running.stderr(), running.stderr()


def unix(canary) -> socket.socket:
    """A connection; ``conn_of`` called before it is the canary's ``conn`` number for it (this
    module makes one connection at a time, and each earlier one is recorded by then)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(canary.listener("unix")["path"])
    return sock


def tcp(canary) -> socket.socket:
    sock = socket.socket(socket.AF_INET)
    sock.settimeout(20)
    sock.connect(("127.0.0.1", canary.listener("tcp")["port"]))
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def conn_of(canary) -> int:
    """The ``conn`` number the next connection gets."""
    return sum(1 for r in canary.records() if r["kind"] == "connection") + 1


def records_of(canary, conn: int, want: int = 0, timeout: float = 10.0) -> list[dict]:
    """Request and raw records of ``conn``, once at least ``want`` are there."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in canary.records() if r["conn"] == conn and r["kind"] in ("request", "raw")]
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def raw_bytes(record: dict) -> bytes:
    return base64.b64decode(record["bytes"])


def covers(records: list[dict], total: int) -> None:
    offset = 0
    for record in records:
        assert record["offset"] == offset, record
        offset += record["bytes_len"]
    assert offset == total


def req(method: str, target: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: docker", *headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# --- case 1: a pipelined request after an Upgrade header --------------------------------------

@pytest.mark.parametrize("upgrade", [("Connection: Upgrade", "Upgrade: tcp"), ("Upgrade: foo",),
                                     ("Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c")])
def test_a_request_pipelined_after_an_upgrade_header_is_recorded_and_answered(canary, upgrade):
    first = req("DELETE", "/containers/a?force=1", *upgrade)
    second = req("DELETE", "/containers/b?force=1")
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(first + second)
        sock.shutdown(socket.SHUT_WR)
        answer = read_all(sock)
    assert answer.count(b"HTTP/1.1 204 No Content") == 2
    found = records_of(canary, conn, 2)
    assert [(r["method"], r["path"], r["query"], r["status"]) for r in found] == [
        ("DELETE", "/containers/a", "force=1", 204), ("DELETE", "/containers/b", "force=1", 204)]
    covers(found, len(first + second))


def test_an_h2c_upgrade_then_the_h2_preface_is_a_request_then_a_raw_h2_record(canary):
    first = req("GET", "/_ping", "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c")
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(first + preface)
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock).startswith(b"HTTP/1.1 200 OK")
    request, raw = records_of(canary, conn, 2)
    assert (request["method"], request["path"]) == ("GET", "/_ping")
    assert (raw["raw_kind"], raw_bytes(raw)) == ("h2-preface", preface)
    covers([request, raw], len(first + preface))


def test_after_an_attach_101_what_the_client_sends_is_one_stream_record(canary):
    # docker run -i / exec -i: stdin goes into the hijacked stream; a DELETE after the 101 is
    # stream too (an engine would hand it to the container), and is kept byte for byte.
    attach = req("POST", "/v1.50/containers/c1/attach?stream=1&stdin=1", "Connection: Upgrade",
                 "Upgrade: tcp")
    stdin = b"echo hello\n" + req("DELETE", "/containers/b?force=1")
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(attach + stdin[:5])
        head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 101 Switching Protocols")
        assert read_all(sock) == b""  # the canary's side of the stream ends at once
        sock.sendall(stdin[5:])  # the client's side goes on until it closes
        sock.shutdown(socket.SHUT_WR)
    request, stream = records_of(canary, conn, 2)
    assert (request["path"], request["status"]) == ("/v1.50/containers/c1/attach", 101)
    assert (stream["raw_kind"], raw_bytes(stream), stream["bytes_len"]) == ("stream", stdin, len(stdin))
    covers([request, stream], len(attach + stdin))


# --- case 3: a complete POST, then a reset ----------------------------------------------------

def test_a_complete_post_then_an_immediate_reset_keeps_its_body_and_its_peer(canary):
    body = json.dumps({"Image": "alpine", "Cmd": ["rm", "-rf", "/"], "pad": "x" * 60}).encode()
    sent = req("POST", "/v1.50/containers/create", "Content-Type: application/json", body=body)
    conn = conn_of(canary)
    sock = tcp(canary)
    local_port = sock.getsockname()[1]
    sock.sendall(sent)
    reset(sock)
    (record,) = records_of(canary, conn, 1)
    assert (record["method"], record["path"], record["body"], record["body_len"]) == (
        "POST", "/v1.50/containers/create", body.decode(), len(body))
    assert record.get("body_complete", True) is True
    covers([record], len(sent))
    connection = next(r for r in canary.records() if r["conn"] == conn and r["kind"] == "connection")
    assert connection["peer"] == {"address": "127.0.0.1", "port": local_port}


# --- case 5: complete requests before a parse error -------------------------------------------

@pytest.mark.parametrize("bad", [
    b"GET /x HTTP/1.1\r\nBad Header\r\n\r\n",
    b"POST /v1.50/containers/create HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    b"POST /build HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n",  # past Go's read limit
])
def test_requests_before_a_parse_error_are_requests_and_the_rest_is_bad_http(canary, bad):
    good = req("GET", "/_ping") + req("DELETE", "/v1.50/images/foo")
    conn = conn_of(canary)
    with tcp(canary) as sock:
        sock.sendall(good + bad)
        answer = read_all(sock)
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert re.search(rb"HTTP/1.1 (400|431|501) ", answer) and answer.endswith(b"}\n")
    ping, delete, raw = records_of(canary, conn, 3)
    assert [(r["method"], r["path"], r["status"]) for r in (ping, delete)] == [
        ("GET", "/_ping", 200), ("DELETE", "/v1.50/images/foo", 200)]
    assert raw["raw_kind"] == "bad-http" and raw["status"] in (400, 431, 501) and raw["bytes_len"] == len(bad)
    assert raw_bytes(raw) == bad[:4096] and "\n" not in raw["summary"]
    covers([ping, delete, raw], len(good + bad))


def test_a_request_after_connection_close_is_recorded_unanswered(canary):
    sent = req("GET", "/_ping", "Connection: close") + req("DELETE", "/v1.50/images/foo")
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        answer = read_all(sock)
    assert time.monotonic() - started < 2.5, "the canary hung up only at the idle timeout (5 s)"
    assert answer.count(b"HTTP/1.1 ") == 1 and b"Connection: close" in answer
    ping, delete = records_of(canary, conn, 2)
    assert (ping["path"], ping["status"]) == ("/_ping", 200)
    assert (delete["method"], delete["path"], delete["status"], delete["unanswered"]) == (
        "DELETE", "/v1.50/images/foo", 0, True)
    covers([ping, delete], len(sent))


def test_content_length_and_transfer_encoding_is_a_chunked_request_then_the_connection_ends(canary):
    smuggle = req("DELETE", "/v1.50/images/hidden")
    sent = (b"POST /v1.50/build HTTP/1.1\r\nHost: docker\r\nContent-Length: 4\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n") + smuggle
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        answer = read_all(sock)
    assert time.monotonic() - started < 2.5, "the canary hung up only at the idle timeout (5 s)"
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.count(b"HTTP/1.1 ") == 1
    build, hidden = records_of(canary, conn, 2)
    assert (build["path"], build["body"], build["status"]) == ("/v1.50/build", "abc", 200)
    assert (hidden["path"], hidden["status"], hidden["unanswered"]) == ("/v1.50/images/hidden", 0, True)
    covers([build, hidden], len(sent))


# --- case 6: half of a pipelined request ------------------------------------------------------

@pytest.mark.parametrize("ending", ["shutdown", "reset"])
def test_half_of_a_pipelined_request_is_a_raw_record_with_its_bytes(canary, ending):
    ping = req("GET", "/_ping")
    half = b"DELETE /images/foo HTTP/1.1\r\nHost: x\r\n"
    conn = conn_of(canary)
    sock = tcp(canary)
    sock.sendall(ping + half)
    if ending == "shutdown":
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock).startswith(b"HTTP/1.1 200 OK")
        sock.close()
    else:
        records_of(canary, conn, 1)  # the ping is answered: the canary has read the half too
        reset(sock)
    request, raw = records_of(canary, conn, 2)
    assert request["path"] == "/_ping"
    assert (raw["raw_kind"], raw_bytes(raw), raw["bytes_len"]) == ("incomplete", half, len(half))
    covers([request, raw], len(ping + half))


# --- case 2: SIGTERM --------------------------------------------------------------------------

def barrier(path: str) -> None:
    """A ping answered: the canary's loop has read what was sent before it."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(path)
        sock.sendall(req("GET", "/_ping"))
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")


def test_sigterm_records_half_sent_bodies_once_and_unanswered(tmp_path):
    path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[path]) as canary:
        socks, parts = [], []
        for n in range(5):
            body = json.dumps({"Image": f"img{n}", "Cmd": ["sh"]}).encode()
            whole, unsent = req("POST", f"/v1.50/containers/create?name=c{n}", body=body), len(body) // 2
            part = whole[:len(whole) - unsent]
            parts.append(("/v1.50/containers/create", body[:len(body) - unsent].decode()))
            socks.append(socket.socket(socket.AF_UNIX))
            socks[-1].connect(path)
            socks[-1].sendall(part)
        build = (b"POST /v1.50/build HTTP/1.1\r\nHost: docker\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"5\r\nhello\r\n4\r\nwor")
        socks.append(socket.socket(socket.AF_UNIX))
        socks[-1].connect(path)
        socks[-1].sendall(build)
        barrier(path)
        assert canary.stop() == 0
        assert canary.complaints() == ""
        records = canary.records()
        for sock in socks:
            sock.close()
    requests = [r for r in records if r["kind"] == "request" and r["path"] != "/_ping"]
    assert sorted((r["path"], r["body"]) for r in requests) == sorted([*parts, ("/v1.50/build", "hellowor")])
    for record in requests:
        assert (record["body_complete"], record["status"], record["unanswered"]) == (False, 0, True)
    assert not [r for r in records if r["kind"] == "raw"]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def test_sigterm_under_pipelined_deletes_records_each_once_and_claims_only_answers_sent(tmp_path):
    path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[path]) as canary:
        socks = []
        for _ in range(10):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(20)
            sock.connect(path)
            socks.append(sock)
        for c, sock in enumerate(socks):
            sock.sendall(b"".join(req("DELETE", f"/v1.50/images/i{c}-{n}") for n in range(30)))
        canary.proc.send_signal(signal.SIGTERM)
        answers = [read_all(sock) for sock in socks]
        assert canary.proc.wait(20) == 0 and canary.complaints() == ""
        for sock in socks:
            sock.close()
        records = canary.records()
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    unsent = {seq for r in records if r["kind"] == "unsent" for seq in r["seqs"]}
    for c, answer in enumerate(answers):
        conn = c + 1
        mine = [r for r in records if r["conn"] == conn and r["kind"] in ("request", "raw")]
        requests = [r for r in mine if r["kind"] == "request"]
        # What the canary read is a prefix of what was sent, each request once; a raw record
        # can only be the half request it read last, never a whole DELETE again.
        assert [r["path"] for r in requests] == [f"/v1.50/images/i{c}-{n}" for n in range(len(requests))]
        assert all(r["kind"] == "request" for r in mine[:-1])
        if mine and mine[-1]["kind"] == "raw":
            assert mine[-1]["raw_kind"] == "incomplete" and raw_bytes(mine[-1]).count(b"DELETE") <= 1
        if mine:
            covers(mine, sum(r["bytes_len"] for r in mine))
        # Every answer claimed (status != 0, not unsent) reached the client, and nothing else.
        claimed = [r for r in requests if r["status"] != 0 and r["seq"] not in unsent]
        assert answer.count(b"HTTP/1.1 ") == len(claimed), (conn, len(claimed))


# --- case 4: seq resumes from any log ---------------------------------------------------------

def test_seq_resumes_after_a_last_record_longer_than_64_kib(tmp_path):
    path = str(tmp_path / "d.sock")
    body = b"x" * 200_000
    with started_canary(tmp_path, unix=[path]) as canary:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            sock.sendall(req("POST", "/v1.50/containers/create", body=body))
            assert sock.recv(4096).startswith(b"HTTP/1.1 201")
        canary.stop()
    assert len(canary.log.read_bytes().splitlines()[-1]) > 1 << 16
    with started_canary(tmp_path, unix=[path]) as canary:
        barrier(path)
        canary.stop()
        seqs = [r["seq"] for r in canary.records()]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 4


def test_show_flags_a_seq_that_does_not_increase():
    lines = [json.dumps({"kind": "connection", "seq": s, "listener": "l", "conn": s}).encode()
             for s in (1, 2, 1)]
    summary = summarize(parse_log(lines))
    assert summary.seq_problems == ["line 3: seq 1 after seq 2"]
    assert "seq 1 after seq 2" in render(summary)


def test_show_keeps_one_line_per_record_whatever_a_summary_holds():
    records = [{"kind": "raw", "seq": 1, "listener": "l", "conn": 1, "summary": "bad\r\nHTTP\x1b[2J"},
               {"kind": "unsent", "seq": 2, "listener": "l", "conn": 1, "seqs": [1], "reason": "x"}]
    text = render(summarize(parse_log(json.dumps(r).encode() for r in records)))
    table = text.split("\n\n")[0].splitlines()
    assert len(table) == 3 and "\x1b" not in text and "unsent" in text


def test_a_client_that_pipelines_half_closes_and_reads_late_gets_every_answer(canary):
    # The answers pile up past the transport's high-water mark, so the canary stops reading
    # and answering until the client reads; the half-close must not cut that short.
    count = 3000
    sent = b"".join(req("GET", f"/v1.50/containers/json?id={n}") for n in range(count))
    conn = conn_of(canary)
    with unix(canary) as sock:
        sock.sendall(sent)
        sock.shutdown(socket.SHUT_WR)
        time.sleep(0.5)
        answer = read_all(sock)
    assert answer.count(b"HTTP/1.1 200 OK") == count
    found = records_of(canary, conn, count)
    assert [r["query"] for r in found] == [f"id={n}" for n in range(count)]
    assert all(r["status"] == 200 for r in found)
    covers(found, len(sent))
