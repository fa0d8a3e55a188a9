"""The canary frames requests as Go's net/http does (dockerd and podman are Go servers).

Issue 27, canary finding 2: an HTTP/1.0 request with ``Transfer-Encoding: chunked`` and a
``Content-Length`` was recorded as one POST with a DELETE in its "chunked" body; Go ignores
Transfer-Encoding on HTTP/1.0 (transfer.go parseTransferEncoding, "Issue 12785"), frames
the body by Content-Length and executes the DELETE behind it.

The table is transcribed from Go's own tables (golang/go, src/net/http):
readrequest_test.go ``reqTests`` and ``badRequestTests``, request_test.go
``readRequestErrorTests``, transfer_test.go ``TestParseTransferEncoding`` and
``TestParseContentLength``, response_test.go's "Issue 12785" cases (the same
parseTransferEncoding reads requests), and the issue's own cases. Each row says what Go
does: the requests it reads (method, target, body length) and whether it then rejects
(400, or 501 for a transfer coding, as server.go answers a readRequest error). The
accounting rule (DESIGN §6, issue 27): the canary never records fewer requests than the
engine would execute, and where Go rejects, the canary's record says so (a ``Bad``: a
``bad-http`` record with that status). Three rows are Go rejections the canary records as a
request instead (a URI or Host Go refuses; the canary does not check them): more, never
fewer, so they are listed in ``RECORDED_THOUGH_GO_REJECTS``; two more are 400s to Go and ``raw`` records
to the canary (``RAW_THOUGH_GO_ANSWERS_400``).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from no_docker.canary.framing import MAX_HEAD, Bad, Body, End, Framer, Head, Raw, parse_head
from no_docker.canary.process import started_canary

from tests.canary_wire_model import FRAMINGS, GO_BUFIO, GO_READ_LIMIT, go_reads


@dataclass(frozen=True)
class Go:
    requests: tuple[tuple[str, str, int], ...]  # (method, target, body length) Go reads, in order
    rejects: int | None = None  # the status Go answers after them; None: it reads on (or waits)


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("latin-1")


def one(method: str, target: str, length: int = 0) -> Go:
    return Go(((method, target, length),))


ROWS: dict[str, tuple[bytes, Go]] = {
    # readrequest_test.go reqTests
    "req/baseline-absolute-uri": (
        b"GET http://www.techcrunch.com/ HTTP/1.1\r\nHost: www.techcrunch.com\r\nUser-Agent: Fake\r\n"
        b"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
        b"Accept-Language: en-us,en;q=0.5\r\nAccept-Encoding: gzip,deflate\r\n"
        b"Accept-Charset: ISO-8859-1,utf-8;q=0.7,*;q=0.7\r\nKeep-Alive: 300\r\nContent-Length: 7\r\n"
        b"Proxy-Connection: keep-alive\r\n\r\nabcdef\n",
        one("GET", "http://www.techcrunch.com/", 7)),
    "req/get-no-body": (b"GET / HTTP/1.1\r\nHost: foo.com\r\n\r\n", one("GET", "/")),
    "req/scheme-relative-path": (b"GET //user@host/is/actually/a/path/ HTTP/1.1\r\nHost: test\r\n\r\n",
                                 one("GET", "//user@host/is/actually/a/path/")),
    "req/bogus-relative-path": (b"GET ../../../../etc/passwd HTTP/1.1\r\nHost: test\r\n\r\n", Go((), 400)),
    "req/missing-url": (b"GET  HTTP/1.1\r\nHost: test\r\n\r\n", Go((), 400)),
    "req/chunked-with-trailer": (
        b"POST / HTTP/1.1\r\nHost: foo.com\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nfoo\r\n3\r\nbar\r\n0\r\nTrailer-Key: Trailer-Value\r\n\r\n", one("POST", "/", 6)),
    "req/chunked-and-bogus-content-length": (
        b"POST / HTTP/1.1\r\nHost: foo.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 9999\r\n\r\n"
        b"3\r\nfoo\r\n3\r\nbar\r\n0\r\n\r\n", one("POST", "/", 6)),
    "req/connect-domain": (b"CONNECT www.google.com:443 HTTP/1.1\r\n\r\n",
                           one("CONNECT", "www.google.com:443")),
    "req/connect-ip": (b"CONNECT 127.0.0.1:6060 HTTP/1.1\r\n\r\n", one("CONNECT", "127.0.0.1:6060")),
    "req/connect-rpc": (b"CONNECT /_goRPC_ HTTP/1.1\r\n\r\n", one("CONNECT", "/_goRPC_")),
    "req/ssdp-notify": (b"NOTIFY * HTTP/1.1\r\nServer: foo\r\n\r\n", one("NOTIFY", "*")),
    "req/options-star": (b"OPTIONS * HTTP/1.1\r\nServer: foo\r\n\r\n", one("OPTIONS", "*")),
    "req/connection-close": (b"GET / HTTP/1.1\r\nHost: issue8261.com\r\nConnection: close\r\n\r\n",
                             one("GET", "/")),
    "req/head-content-length-0": (
        b"HEAD / HTTP/1.1\r\nHost: issue8261.com\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        one("HEAD", "/")),
    # readrequest_test.go badRequestTests
    "bad/connect-host": (crlf("CONNECT []%20%48%54%54%50%2f%31%2e%31%0a%4d%79%48%65%61%64%65%72%3a"
                              "%20%31%32%33%0a%0a HTTP/1.0\n\n"), Go((), 400)),
    "bad/smuggle-two-content-length": (crlf("POST / HTTP/1.1\nContent-Length: 3\nContent-Length: 4\n\nabc"),
                                       Go((), 400)),
    "bad/smuggle-two-content-length-head": (
        crlf("HEAD / HTTP/1.1\nHost: foo\nContent-Length: 4\nContent-Length: 5\n\n1234"), Go((), 400)),
    "bad/leading-space-in-header": (crlf("HEAD / HTTP/1.1\n Host: foo\nContent-Length: 5\n\n"), Go((), 400)),
    "bad/leading-tab-in-header": (crlf("HEAD / HTTP/1.1\n\tHost: foo\nContent-Length: 5\n\n"), Go((), 400)),
    # request_test.go readRequestErrorTests
    "err/0-header": (b"GET / HTTP/1.1\r\nheader:foo\r\n\r\n", one("GET", "/")),
    "err/1-unexpected-eof": (b"GET / HTTP/1.1\r\nheader:foo\r\n", Go(())),
    "err/2-eof": (b"", Go(())),
    "err/3-head": (b"HEAD / HTTP/1.1\r\n\r\n", one("HEAD", "/")),
    "err/4-content-length-10-and-0": (
        b"POST / HTTP/1.1\r\nContent-Length: 10\r\nContent-Length: 0\r\n\r\nGopher hey\r\n", Go((), 400)),
    "err/5-content-length-10-and-6": (
        b"POST / HTTP/1.1\r\nContent-Length: 10\r\nContent-Length: 6\r\n\r\nGopher\r\n", Go((), 400)),
    "err/6-content-length-6-three-times": (
        b"PUT / HTTP/1.1\r\nContent-Length: 6 \r\nContent-Length: 6\r\nContent-Length:6\r\n\r\nGopher\r\n",
        one("PUT", "/", 6)),
    "err/7-content-length-1-and-6": (b"PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 6 \r\n\r\n",
                                     Go((), 400)),
    "err/8-content-length-empty-and-3": (b"POST / HTTP/1.1\r\nContent-Length:\r\nContent-Length: 3\r\n\r\n",
                                         Go((), 400)),
    "err/9-head-content-length-0-twice": (b"HEAD / HTTP/1.1\r\nContent-Length:0\r\nContent-Length: 0\r\n\r\n",
                                          one("HEAD", "/")),
    "err/10-two-hosts": (b"HEAD / HTTP/1.1\r\nHost: foo\r\nHost: bar\r\n\r\n\r\n\r\n", Go((), 400)),
    # transfer_test.go TestParseTransferEncoding (HTTP/1.1)
    "te/fugazi": (b"POST / HTTP/1.1\r\nTransfer-Encoding: fugazi\r\n\r\n", Go((), 501)),
    "te/three-lines": (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n"
                       b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n", Go((), 501)),
    "te/empty": (b"POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n", Go((), 501)),
    "te/chunked-identity": (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", Go((), 501)),
    "te/chunked-then-identity-lines": (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n", Go((), 501)),
    "te/vertical-tab-chunked": (b"POST / HTTP/1.1\r\nTransfer-Encoding: \x0bchunked\r\n\r\n", Go((), 501)),
    "te/chunked": (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", one("POST", "/", 0)),
    "te/chunked-upper-case": (b"POST / HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n1\r\nx\r\n0\r\n\r\n",
                              one("POST", "/", 1)),
    # transfer_test.go TestParseContentLength
    "cl/empty": (b"POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", Go((), 400)),
    "cl/3": (b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", one("POST", "/", 3)),
    "cl/plus-3": (b"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc", Go((), 400)),
    "cl/minus-3": (b"POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\nabc", Go((), 400)),
    "cl/2**63": (b"POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", Go((), 400)),
    # Issue 12785 (response_test.go; parseTransferEncoding is the same for a request): on
    # HTTP/1.0 any Transfer-Encoding is ignored, the body is Content-Length's or none
    "1.0/bogus-te-no-length": (b"POST /a HTTP/1.0\r\nTransfer-Encoding: bogus\r\n\r\n", one("POST", "/a")),
    "1.0/bogus-te-with-length": (b"POST /a HTTP/1.0\r\nTransfer-Encoding: bogus\r\nContent-Length: 10\r\n\r\n"
                                 b"Body here\n", one("POST", "/a", 10)),
    "1.0/two-te-lines-ignored": (b"POST /a HTTP/1.0\r\nTransfer-Encoding: gzip\r\n"
                                 b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nab",
                                 one("POST", "/a", 2)),
    # the issue: the DELETE hidden in a "chunk" is a request to Go
    "issue27/1.0-chunked-and-length-hides-a-delete": (
        b"POST /v1.50/containers/create HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 2\r\n\r\n{}DELETE /v1.50/containers/web?force=1 HTTP/1.0\r\n\r\n",
        Go((("POST", "/v1.50/containers/create", 2), ("DELETE", "/v1.50/containers/web?force=1", 0)))),
    "issue27/1.0-chunked-no-length-the-chunk-is-a-bad-request-line": (
        b"POST /v1.50/build HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n", Go((("POST", "/v1.50/build", 0),), 400)),
    "issue27/1.1-chunked-and-length-is-chunked": (
        b"POST /v1.50/build HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n", one("POST", "/v1.50/build", 2)),
    "issue27/1.1-chunked-and-conflicting-lengths": (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
        Go((), 400)),
    "issue27/1.1-chunked-and-bad-length": (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n", Go((), 400)),
}

# Go rejects these at readRequest (URI or Host checks); the canary does not check the URI or
# the Host header, so it records the request: one record more than the engine executes,
# never one fewer.
RECORDED_THOUGH_GO_REJECTS = {
    "req/bogus-relative-path": one("GET", "../../../../etc/passwd"),
    "bad/connect-host": one("CONNECT", "[]%20%48%54%54%50%2f%31%2e%31%0a%4d%79%48%65%61%64%65%72%3a"
                                       "%20%31%32%33%0a%0a"),
    "err/10-two-hosts": one("HEAD", "/"),
    # Current Go checks every Content-Length before chunked; older Go (1.16, as read) deletes them
    # unchecked in parseTransferEncoding and executes the request, so the canary takes the head
    # and waits for the chunked body (the request is recorded, unanswered, when the connection ends).
    # Go 1.22 refuses an empty Content-Length; before it (podman 4.3.1's go1.19.8) it is none.
    "cl/empty": one("POST", "/"),
    "issue27/1.1-chunked-and-conflicting-lengths": Go(()),
    "issue27/1.1-chunked-and-bad-length": Go(()),
}

# Go answers these 400 (a malformed request line); the canary, which sees that no request
# line can start there, records the bytes as ``raw`` ``garbage`` and hangs up unanswered.
# No request either way, the bytes in a record either way.
RAW_THOUGH_GO_ANSWERS_400 = {"req/missing-url",
                             "issue27/1.0-chunked-no-length-the-chunk-is-a-bad-request-line"}


def rejected_as_go_does(name: str, stopped: Bad | Raw | None, status: int) -> bool:
    if name in RAW_THOUGH_GO_ANSWERS_400:
        return isinstance(stopped, Raw) and status == 400
    return isinstance(stopped, Bad) and stopped.status == status


def frame(data: bytes) -> tuple[list[tuple[str, str, int]], Bad | Raw | None, int]:
    """What the framer makes of ``data``: complete requests, the verdict that stopped it, and
    how many bytes are neither (pending: a part of a request, or empty lines)."""
    framer = Framer()
    framer.feed(data)
    requests: list[tuple[str, str, int]] = []
    head: Head | None = None
    length = 0
    while (event := framer.next_event()) is not None:
        if isinstance(event, Head):
            head, length = event, 0
        elif isinstance(event, Body):
            length += len(event.data)
        elif isinstance(event, End):
            assert head is not None
            requests.append((head.method, head.target, length))
            head = None
        else:
            return requests, event, len(framer.pending)
    return requests, None, len(framer.pending)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_canary_frames_as_go_does(name):
    data, go = ROWS[name]
    want = RECORDED_THOUGH_GO_REJECTS.get(name, go)
    requests, stopped, _ = frame(data)
    assert requests == list(want.requests)
    if want.rejects is None:
        assert stopped is None or isinstance(stopped, Raw), stopped
    else:
        assert rejected_as_go_does(name, stopped, want.rejects), stopped


def test_never_fewer_requests_than_go_reads_and_every_rejection_is_a_bad():
    # The accounting rule over the whole table: every request Go would execute is recorded
    # (the canary's list starts with Go's), and a Go rejection is a Bad unless it is one of the
    # listed rows where the canary records a request instead.
    for name, (data, go) in ROWS.items():
        requests, stopped, _ = frame(data)
        assert requests[:len(go.requests)] == list(go.requests), name
        if go.rejects is not None and name not in RECORDED_THOUGH_GO_REJECTS:
            assert rejected_as_go_does(name, stopped, go.rejects), name


@pytest.mark.parametrize("value, ok", [
    (b"0", True), (b"3", True), (b"010", True), (b"9223372036854775807", True),
    (b"9223372036854775808", False), (b"+3", False), (b"-3", False), (b"0x3", False),
    (b"3 3", False), (b"\xd9\xa3", False),  # ARABIC-INDIC DIGIT THREE: not an ASCII digit
])
def test_content_length_values_as_strconv_parseuint_10_63(value, ok):
    parsed = parse_head(b"POST / HTTP/1.1\r\nContent-Length: " + value, 0)
    assert isinstance(parsed, Head) == ok, parsed
    if ok:
        assert isinstance(parsed, Head) and parsed.length == int(value)


def test_an_empty_content_length_is_none_as_go_before_1_22_reads_it():
    # parseContentLength before Go 1.22: "" is -1, no Content-Length, and the request runs.
    parsed = parse_head(b"POST / HTTP/1.1\r\nContent-Length: ", 0)
    assert isinstance(parsed, Head) and parsed.length == 0 and not parsed.chunked
    assert isinstance(parse_head(b"POST / HTTP/1.1\r\nContent-Length:\r\nContent-Length: 3", 0), Bad)


@pytest.mark.parametrize("version, keep_alive", [
    ("HTTP/1.0", False), ("HTTP/1.1", True), ("HTTP/1.2", True)])
def test_keep_alive_as_go_should_close(version, keep_alive):
    # transfer.go shouldClose: HTTP/1.0 closes unless keep-alive; 1.1 and later unless close.
    plain = parse_head(f"GET / {version}".encode(), 0)
    asked = parse_head(f"GET / {version}\r\nConnection: keep-alive".encode(), 0)
    both = parse_head(f"GET / {version}\r\nConnection: keep-alive, close".encode(), 0)
    assert isinstance(plain, Head) and isinstance(asked, Head) and isinstance(both, Head)
    assert (plain.keep_alive, asked.keep_alive, both.keep_alive) == (keep_alive, True, False)


@pytest.mark.parametrize("connection, answers", [("keep-alive", 2), ("close", 1)])
def test_the_delete_hidden_in_an_http_1_0_chunk_is_a_request_record(tmp_path, connection, answers):
    # The bypass on a real canary: one POST with the DELETE in its body, before.
    post = (b"POST /v1.50/containers/create HTTP/1.0\r\nConnection: " + connection.encode() +
            b"\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}")
    delete = b"DELETE /v1.50/containers/web?force=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    path = str(tmp_path / "d.sock")
    with started_canary(tmp_path, unix=[path]) as canary:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(20)
            sock.connect(path)
            sock.sendall(post + delete)
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert canary.stop() == 0 and canary.complaints() == ""
        records = [r for r in canary.records() if r["kind"] in ("request", "raw")]
    assert [(r["kind"], r.get("method"), r.get("path"), r.get("body_len")) for r in records] == [
        ("request", "POST", "/v1.50/containers/create", 2), ("request", "DELETE", "/v1.50/containers/web", 0)]
    # Go answers both on keep-alive; with close it answers the POST and never reads on. The
    # canary records the DELETE either way (unanswered then): never fewer than Go executes.
    assert answer.count(b"HTTP/1.0 ") == answers
    assert records[1]["status"] == (204 if answers == 2 else 0)


def heads_and_bodies(data: bytes) -> list[tuple[str, str, bytes]]:
    """Every request the framer gives a head for (the canary records each), with its body so far."""
    framer = Framer()
    framer.feed(data)
    out: list[tuple[str, str, bytes]] = []
    while (event := framer.next_event()) is not None:
        if isinstance(event, Head):
            out.append((event.method, event.target, b""))
        elif isinstance(event, Body):
            method, target, body = out[-1]
            out[-1] = (method, target, body + event.data)
        elif isinstance(event, Bad | Raw):
            break
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FRAMINGS)
@example(b"GET /_ping HTTP/1.1\r\nHost: d\r\nX-A: a\r\n b\r\n\r\nDELETE /containers/web?force=1 HTTP/1.1\r\n"
         b"Host: d\r\n\r\n")  # rt4 C1
@example(b"DELETE /containers/web?force=1&pad=" + b"A" * 9000 + b" HTTP/1.1\r\nHost: d\r\n\r\n")  # rt4 C2
@example(b"POST /build HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n"
         b"Content-Length: 2\r\n\r\n0\r\n\r\nDELETE /containers/web?force=1 HTTP/1.1\r\nHost: d\r\n\r\n")
def test_differential_never_fewer_requests_than_the_go_model_executes(data):
    # rt4 C1/C2: the model of Go's server (tests/canary_wire_model.py, written from the Go source)
    # says which requests dockerd/podman execute of these bytes; the canary's must start with them.
    go = go_reads(data)
    assert heads_and_bodies(data)[:len(go.requests)] == list(go.requests), go


@pytest.mark.parametrize("later", [False, True])
def test_a_head_at_gos_read_limit_is_a_request_and_one_past_it_go_refuses(later):
    # The largest head Go reads: its read limit (1 MiB + 4096), plus, for a request after the
    # first, the 4096 bytes of its bufio buffer that may hold it already.
    before = b"GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n" if later else b""
    limit = GO_READ_LIMIT + (GO_BUFIO if later else 0)
    start = b"DELETE /containers/web?force=1 HTTP/1.1\r\nHost: d\r\nX-Pad: "
    at_limit = start + b"a" * (limit - len(start) - 4) + b"\r\n\r\n"
    assert len(at_limit) == limit <= MAX_HEAD
    assert len(go_reads(before + at_limit).requests) == 1 + later
    assert heads_and_bodies(before + at_limit)[-1][:2] == ("DELETE", "/containers/web?force=1")
    past = go_reads(before + at_limit[:-4] + b"a\r\n\r\n")
    assert (len(past.requests), past.rejects) == (int(later), 431)
