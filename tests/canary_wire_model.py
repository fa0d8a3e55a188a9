"""What the canary must record for bytes a test sends: a model of well-formed requests.

A test builds requests with ``make_request`` (it knows where each head ends and which wire
bytes are body data), joins them, maybe adds a tail that is no request, cuts the whole at a
point, and sends that prefix. ``expected`` says, item by item, what the log must hold for it;
``compare`` checks a connection's records against that, byte for byte, and checks that the
records cover the bytes sent without a gap or an overlap.
"""

from __future__ import annotations

import base64
import socket
import time
from dataclasses import dataclass

from hypothesis import strategies as st

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")
TARGETS = ("/_ping", "/v1.50/containers/json?all=1", "/v1.50/containers/create", "/v1.50/images/x?force=1",
           "/containers/a", "/v1.41/volumes/prune?filters=%7B%7D")
EXTRA_HEADERS = (
    (), (("Connection", "Upgrade"), ("Upgrade", "tcp")), (("Upgrade", "foo"),),
    (("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAARAAAAA")),
    (("Content-Type", "application/json"), ("X-Registry-Auth", "e30=")),
)
# Tails that are not a request: garbage, an h2 preface, TLS, requests a server rejects.
TAILS = (
    b"\x00\xffnot http\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00",
    b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", b"GET /x HTTP/1.1\r\nBad Header\r\n\r\n",
    b"POST /v1.50/containers/create HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    b"POST /build HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", b"\r\n",
)


@dataclass(frozen=True)
class Sent:
    """One request as sent: its bytes, and what its record must say."""

    wire: bytes
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    head_len: int  # bytes up to and including the empty line
    data_spans: tuple[tuple[int, int], ...]  # where the body's bytes are in ``wire``
    closes: bool  # Connection: close

    def body_within(self, cut: int) -> bytes:
        """The body bytes among the first ``cut`` bytes of the request."""
        return b"".join(self.wire[start:min(end, cut)] for start, end in self.data_spans if start < cut)


def make_request(method: str, target: str, extra: tuple[tuple[str, str], ...], body: bytes, framing: str,
                 chunk: int, closes: bool) -> Sent:
    headers = [("Host", "docker"), *extra]
    if closes:
        headers.append(("Connection", "close"))
    if framing == "length" or (framing == "chunked" and not body and chunk % 2):
        headers.append(("Content-Length", str(len(body))))
        framed, spans_rel = body, [(0, len(body))] if body else []
    elif framing == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        parts, spans_rel, pos = [], [], 0
        for start in range(0, len(body), chunk):
            piece = body[start:start + chunk]
            size = b"%x\r\n" % len(piece)
            spans_rel.append((pos + len(size), pos + len(size) + len(piece)))
            parts.append(size + piece + b"\r\n")
            pos += len(size) + len(piece) + 2
        framed = b"".join(parts) + b"0\r\n\r\n"
    else:
        body, framed, spans_rel = b"", b"", []
    head = f"{method} {target} HTTP/1.1\r\n".encode() + b"".join(
        f"{name}: {value}\r\n".encode() for name, value in headers) + b"\r\n"
    spans = tuple((start + len(head), end + len(head)) for start, end in spans_rel)
    return Sent(head + framed, method, target, tuple(headers), body, len(head), spans, closes)


REQUESTS = st.builds(
    make_request, st.sampled_from(METHODS), st.sampled_from(TARGETS), st.sampled_from(EXTRA_HEADERS),
    st.binary(max_size=300), st.sampled_from(["none", "length", "length", "chunked"]), st.integers(1, 200),
    st.just(False),  # Connection: close is tested on its own: the bytes after it are read only
)                    # when they come in the same read


@dataclass(frozen=True)
class Expect:
    kind: str  # request | raw
    sent: Sent | None = None
    cut: int = 0  # bytes of the request that were sent
    answered: bool = True
    raw: bytes = b""
    raw_kinds: frozenset[str] = frozenset()


def expected(requests: list[Sent], tail: bytes, cut: int) -> list[Expect]:
    """What the log must hold for the first ``cut`` bytes of ``requests`` + ``tail``."""
    out: list[Expect] = []
    pos = 0
    answered = True
    for sent in requests:
        if pos >= cut:
            return out
        here = min(len(sent.wire), cut - pos)
        if here < sent.head_len:
            out.append(Expect("raw", raw=sent.wire[:here], raw_kinds=frozenset({"incomplete"})))
            return out
        out.append(Expect("request", sent, here, answered and here == len(sent.wire)))
        if sent.closes:
            answered = False
        pos += len(sent.wire)
    if pos < cut and tail:
        out.append(Expect("raw", raw=tail[:cut - pos],
                          raw_kinds=frozenset({"incomplete", "garbage", "h2-preface", "tls", "bad-http"})))
    return out


def settle(canary, conn: int, want: int, timeout: float = 10.0) -> list[dict]:
    """The request and raw records of ``conn`` once ``want`` of them are there (or timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        mine = [r for r in canary.records() if r.get("conn") == conn and r["kind"] in ("request", "raw")]
        if len(mine) >= want or time.monotonic() > deadline:
            time.sleep(0.05)
            return [r for r in canary.records() if r.get("conn") == conn and r["kind"] in ("request", "raw")]
        time.sleep(0.01)


def compare(records: list[dict], items: list[Expect], total: int) -> None:
    """Assert the records are ``items``, byte for byte, covering ``total`` bytes."""
    shown = [(r["kind"], r.get("method"), r.get("path"), r.get("raw_kind")) for r in records]
    assert len(records) == len(items), f"records {shown} for {len(items)} expected items"
    for record, item in zip(records, items, strict=True):
        assert record["kind"] == item.kind, (shown, item)
        if item.kind == "raw":
            got = base64.b64decode(record["bytes"])
            assert record["bytes_len"] == len(got) and record["raw_kind"] in item.raw_kinds, record
            if record["raw_kind"] != "incomplete" and item is items[-1]:
                # Not HTTP, or a request no server executes: the canary hangs up at once, so the
                # pieces sent after the one that decided it are never read. A prefix, then.
                assert got and item.raw.startswith(got), (record, item.raw)
                total -= len(item.raw) - len(got)
            else:
                assert got == item.raw, (record, item.raw)
            continue
        sent = item.sent
        assert sent is not None
        path, _, query = sent.target.partition("?")
        assert (record["method"], record["path"], record["query"]) == (sent.method, path, query)
        assert [tuple(pair) for pair in record["headers"]] == list(sent.headers)
        body = sent.body_within(item.cut)
        kept = base64.b64decode(record["body"]) if record["body_encoding"] == "base64" else \
            record["body"].encode()
        assert kept == body and record["body_len"] == len(body), (record, body)
        complete = item.cut == len(sent.wire)
        assert record.get("body_complete", True) is complete, record
        if not item.answered:
            assert record["status"] == 0 and record.get("unanswered") is True, record
    # Every byte in exactly one record: contiguous offsets from 0 to what was sent.
    offset = 0
    for record in records:
        assert record["offset"] == offset, (record, offset)
        offset += record["bytes_len"]
    assert offset == total


def send_in_pieces(sock: socket.socket, data: bytes, splits: list[int]) -> None:
    """Send ``data`` cut at ``splits`` (sorted positions), a short pause between pieces."""
    last = 0
    for split in [*splits, len(data)]:
        if split > last:
            sock.sendall(data[last:split])
            time.sleep(0.002)
            last = split


# --- what Go's net/http server executes of the bytes of one connection ------------------------
# dockerd and podman serve the API with Go's net/http and set no Server.MaxHeaderBytes. This is
# a model of how that server reads a connection, written from the Go source and independent of
# canary/framing.py, so that a test can check the canary against it over generated bytes
# (never fewer requests than Go executes). Where Go versions differ the model takes the
# version that executes more (the canary must count what any of them would run):
# * src/net/http/server.go conn.readRequest: the read limit of a head is MaxHeaderBytes (1 MiB)
#   + 4096 ("bufio slop"), counted from where the request's read starts; up to one bufio buffer
#   (4096) read for the request before may already be buffered, so the model lets a request
#   after the first take 4096 more. After a POST, up to 4 CR/LF bytes before it are skipped.
#   Then the Host checks and ValidHeaderFieldName/ValidHeaderFieldValue on every header.
# * src/net/http/request.go readRequest and parseRequestLine (split at the first two spaces),
#   ParseHTTPVersion, validMethod, url.ParseRequestURI (only what it surely refuses: empty,
#   control bytes, a relative path), http1ServerSupportsRequest (major version 1).
# * src/net/textproto/reader.go ReadMIMEHeader: bufio.ReadLine drops one "\n" or "\r\n"; a first
#   header line that starts with SP/HT is refused; a line needs a colon; lines that start with
#   SP/HT continue it (joined by one space, trim() of SP/HT); an empty name is skipped (Go 1.19)
#   or refused (1.20+): skipped here.
# * src/net/http/transfer.go: HTTP/1.0 ignores Transfer-Encoding; else exactly one, "chunked";
#   with chunked, Content-Length is not looked at (older Go's parseTransferEncoding deletes it
#   before fixLength); else all Content-Length values equal, ParseUint(v, 10, 63); empty ones
#   are none (Go before 1.22; 1.22's httplaxcontentlength change refuses them).
# * a chunked body: hex size (extensions after ";"), the data, CRLF; trailer lines until an empty one.
# The handler runs once the head is read, so a request counts when its head is complete.

GO_MAX_HEADER_BYTES = 1 << 20
GO_READ_LIMIT = GO_MAX_HEADER_BYTES + 4096
GO_BUFIO = 4096
_GO_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class GoRead:
    requests: tuple[tuple[str, str, bytes], ...]  # (method, target, body so far) Go executes, in order
    rejects: int | None  # the status Go answers when it stops reading (400, 431, 501, 505); None: EOF


def _go_line(data: bytes, pos: int) -> tuple[bytes, int] | None:
    newline = data.find(b"\n", pos)
    if newline < 0:
        return None
    line = data[pos:newline]
    return (line[:-1] if line.endswith(b"\r") else line), newline + 1


def _go_ctl(value: bytes) -> bool:
    return any(byte < 0x20 and byte != 0x09 or byte == 0x7F for byte in value)


def _go_head(data: bytes, pos: int) -> tuple[str, str, str, list[tuple[bytes, bytes]], int] | int | None:
    """One head from ``pos``: (method, target, version, headers, end), a status, or None (EOF)."""
    got = _go_line(data, pos)
    if got is None:
        return None
    line, pos = got
    method, sp1, rest = line.partition(b" ")
    target, sp2, proto = rest.partition(b" ")
    if not sp1 or not sp2 or not method or any(byte not in _GO_TOKEN for byte in method):
        return 400
    if not (len(proto) == 8 and proto[:5] == b"HTTP/" and proto[5:6].isdigit() and proto[6:7] == b"."
            and proto[7:8].isdigit()):
        return 400
    if not target or _go_ctl(target) or (method != b"CONNECT" and target[:1] not in (b"/", b"*")
                                          and b":" not in target):
        return 400
    if proto[5:6] != b"1":
        return 505
    if data[pos:pos + 1] in (b" ", b"\t"):
        return 400 if _go_line(data, pos) is not None else None
    headers: list[tuple[bytes, bytes]] = []
    while True:
        got = _go_line(data, pos)
        if got is None:
            return None
        line, pos = got
        if not line:
            break
        if b":" not in line:
            return 400
        kv = line.strip(b" \t")
        while data[pos:pos + 1] in (b" ", b"\t"):
            while data[pos:pos + 1] in (b" ", b"\t"):
                pos += 1
            got = _go_line(data, pos)
            if got is None:
                return None
            more, pos = got
            kv += b" " + more.strip(b" \t")
        name, _, value = kv.partition(b":")
        if not name:
            continue  # Go 1.19: "if we get an empty key, skip it"
        if any(byte not in _GO_TOKEN for byte in name) or _go_ctl(value):
            return 400  # server.go: "invalid header name" / "invalid header value"
        headers.append((name.lower(), value.lstrip(b" \t")))
    return method.decode("latin-1"), target.decode("latin-1"), proto.decode(), headers, pos


def go_reads(data: bytes) -> GoRead:
    """What Go's server executes of ``data`` sent on one connection (then EOF)."""
    done: list[tuple[str, str, bytes]] = []
    pos, last_method, first = 0, "", True

    def stop(status: int | None) -> GoRead:
        return GoRead(tuple(done), status)

    while pos < len(data):
        start = pos
        if last_method == "POST":
            while pos < start + 4 and data[pos:pos + 1] in (b"\r", b"\n"):
                pos += 1
        # The head is read through the read limit: past it, the reader sees EOF (hitReadLimit: 431).
        limit = start + GO_READ_LIMIT + (0 if first else GO_BUFIO)
        head = _go_head(data[:limit], pos)
        if head is None:
            return stop(431 if len(data) > limit else None)
        if isinstance(head, int):
            return stop(head)
        method, target, version, headers, end = head
        first, last_method, pos = False, method, end
        values = {name: [v for n, v in headers if n == name] for name, _ in headers}
        hosts = values.get(b"host", [])
        if (version != "HTTP/1.0" and not hosts and method != "CONNECT") or len(hosts) > 1:
            return stop(400)
        codings = values.get(b"transfer-encoding", []) if version != "HTTP/1.0" else []
        lengths = [v.strip(b" \t") for v in values.get(b"content-length", [])]
        if not any(lengths):
            lengths = []  # Go before 1.22: an empty Content-Length is none (1.22 refuses it)
        if codings and (len(codings) != 1 or codings[0].lower() != b"chunked"):
            return stop(501)
        if not codings and lengths and (len(set(lengths)) != 1 or not lengths[0].isdigit()
                                         or int(lengths[0]) >= 1 << 63):
            return stop(400)
        tokens = {t.strip().lower() for v in values.get(b"connection", []) for t in v.split(b",")}
        close = b"close" in tokens or (version == "HTTP/1.0" and b"keep-alive" not in tokens)
        if not codings:
            length = int(lengths[0]) if lengths else 0
            done.append((method, target, data[pos:pos + length]))
            if pos + length > len(data):
                return stop(None)
            pos += length
        else:
            body = b""
            while True:
                got = _go_line(data, pos)
                if got is None:
                    done.append((method, target, body))
                    return stop(None)
                line, after = got
                size = line.split(b";", 1)[0].strip(b" \t")
                if not size or len(size) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size):
                    done.append((method, target, body))
                    return stop(400)
                pos = after
                if int(size, 16) == 0:
                    break
                body += data[pos:pos + int(size, 16)]
                pos += int(size, 16)
                if data[pos:pos + 2] != b"\r\n" and data[pos:pos + 1] != b"\n":
                    done.append((method, target, body))
                    return stop(400 if len(data) > pos + 1 else None)
                pos += 2 if data[pos:pos + 1] == b"\r" else 1
            while (got := _go_line(data, pos)) is not None and got[0]:
                pos = got[1]
            done.append((method, target, body))
            if got is None:
                return stop(None)
            pos = got[1]
        if close:
            return stop(None)
    return stop(None)


# Head lines a hostile client may send, in the forms Go reads differently from a strict parser:
# folded lines (obs-fold), an empty name, a folded Content-Length, Transfer-Encoding or
# Connection, a name Go refuses, long lines, bare LF, blanks around values.
_FOLDS = (b" b", b"\tb", b"  ", b" \t", b"\t")
HEAD_LINES = st.one_of(
    st.just(b"Host: d"), st.just(b"Host:d"), st.just(b"X-Registry-Auth: e30=  \t"),
    st.builds(lambda folds: b"X-A: a" + b"".join(b"\r\n" + f for f in folds),
              st.lists(st.sampled_from(_FOLDS), min_size=1, max_size=3)),
    st.just(b": empty name"), st.just(b"Bad Name: x"), st.just(b" first-line-fold: x"),
    st.builds(lambda n, fold: b"Content-Length:" + (b"\r\n " if fold else b" ") + b"%d" % n,
              st.integers(0, 4), st.booleans()),
    st.sampled_from((b"Transfer-Encoding:\r\n chunked", b"Transfer-Encoding: chunked",
                     b"Connection: keep-alive,\r\n close", b"Connection:\r\n\tkeep-alive")),
    st.builds(lambda size: b"X-Pad: " + b"P" * size, st.sampled_from((10, 7000, 9000, 70000))),
)
PADS = (0, 9000, 70000)
DELETE_WEB = b"DELETE /containers/web?force=1 HTTP/1.1\r\nHost: d\r\n\r\n"


@st.composite
def hostile_requests(draw) -> bytes:
    """One request head Go may read otherwise than a strict parser, and what may follow it."""
    method = draw(st.sampled_from(METHODS))
    target = draw(st.sampled_from(TARGETS)).encode()
    pad = draw(st.sampled_from(PADS))
    if pad:
        target += (b"&" if b"?" in target else b"?") + b"pad=" + b"A" * pad
    version = draw(st.sampled_from((b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0")))
    lines = draw(st.lists(HEAD_LINES, max_size=5))
    if draw(st.booleans()):
        lines.insert(0, b"Host: d")
    end = draw(st.sampled_from((b"\r\n", b"\r\n", b"\n")))
    head = b" ".join((method.encode(), target, version)) + end + b"".join(line + end for line in lines) + end
    body = draw(st.sampled_from((b"", b"{}", b"abcd", b"3\r\nabc\r\n0\r\n\r\n")))
    return head + body


FRAMINGS = st.builds(lambda parts, delete: b"".join(parts) + (DELETE_WEB if delete else b""),
                     st.lists(hostile_requests(), min_size=1, max_size=3), st.booleans())
