"""Where each request of a connection begins and ends: an HTTP/1.x framer over bytes (pure).

The canary's promise is that every byte a client sends ends up in the log, attributed to the
request it belongs to or to a raw record. That needs to know, for every byte, which request
it is part of: so the canary frames the byte stream itself instead of asking a server
library, whose parser stops at an ``Upgrade`` header, drops the requests before a parse
error in the same read, and keeps no offsets. ``Framer`` is a state machine without I/O: the
caller feeds it what it read and pulls events; ``consumed`` counts the bytes the events
cover, and ``pending`` holds the rest, so at any moment ``consumed + len(pending)`` is what
was fed.

The rules follow what an engine's server (Go's net/http, which dockerd and podman use)
executes: request line ``METHOD SP TARGET SP HTTP/1.x``, header lines ``name: value``,
lines ending in CRLF or a bare LF, empty lines before a request line skipped; a body framed
by ``Transfer-Encoding: chunked`` (which wins over ``Content-Length``; the connection is then
closed after the answer, RFC 9112 §6.1) or by ``Content-Length``; no body without either.
The body rules are ``transferReader.parseTransferEncoding``, ``fixLength`` and
``parseContentLength`` of Go's src/net/http/transfer.go:
* HTTP/1.0: ``Transfer-Encoding`` is ignored, whatever its value (Go issue 12785), so
  ``Content-Length`` alone frames the body and a "chunk" after it is the next request;
* HTTP/1.1 and later: exactly one ``Transfer-Encoding`` line, whose value is ``chunked``
  (ASCII case-insensitive); anything else (two lines, ``chunked, chunked``, ``gzip``, an
  empty value) is answered 501 and the connection ends;
* without chunked, every ``Content-Length`` is checked: all lines the same value, a decimal
  number below 2**63 (``strconv.ParseUint(cl, 10, 63)``: no sign), an empty one none (Go
  before 1.22); with chunked they are not (older Go deletes them unchecked and executes it).
Where Go rejects a request the framer does too (``Bad``), so what follows it is recorded as
the bytes it is, never as requests the engine would not have read.

The head rules are ``readRequest`` (src/net/http/request.go), ``textproto.Reader.ReadMIMEHeader``
(src/net/textproto/reader.go) and ``conn.readRequest`` (src/net/http/server.go), because a
stricter head than Go's hides the requests Go executes (rt4 C1, C2):
* a header line that starts with a space or a tab continues the line before it (obs-fold):
  the two are joined by one space, each trimmed of spaces and tabs; only the first header
  line may not be folded (400);
* a header line needs a colon; the name is what comes before the first one: a token, or
  empty (Go 1.19 and older skip an empty name; server.go refuses any other non-token name);
* no limit per line: what limits a head is the connection's read limit,
  ``Server.MaxHeaderBytes`` (``DefaultMaxHeaderBytes``, 1 MiB: neither dockerd nor podman
  sets it) plus 4096 bytes of "bufio slop" (``initialReadLimitSize``), counted from where
  the request's read starts; up to one bufio buffer (4096 bytes) may already be buffered
  then. So a head Go reads is at most ``MAX_HEAD`` bytes, and the framer takes every head
  up to that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sniff import MAX_REQUEST_LINE, Kind, sniff

MAX_LINE = 8190  # a chunk-size or trailer line longer than this is bad (Go's limit there is 4096)
GO_MAX_HEADER_BYTES = 1 << 20  # net/http DefaultMaxHeaderBytes
GO_BUFIO = 4096  # net/http's bufio.Reader size, and its "bufio slop" in initialReadLimitSize
MAX_HEAD = GO_MAX_HEADER_BYTES + 2 * GO_BUFIO  # the request line, headers and the empty line

_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e\x80-\xff]+) (HTTP/1\.[0-9])")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


@dataclass(frozen=True)
class Head:
    """A request line and its headers; the body follows as ``Body`` events, then ``End``."""

    method: str
    target: str
    version: str  # HTTP/1.0 or HTTP/1.1
    headers: tuple[tuple[bytes, bytes], ...]  # as sent, values without surrounding blanks
    offset: int  # where the request starts in the connection (empty lines before it included)
    keep_alive: bool  # False: the connection ends after the answer
    chunked: bool
    length: int  # Content-Length; 0 when chunked or absent


@dataclass(frozen=True)
class Body:
    data: bytes  # body bytes as the handler sees them (chunk framing removed)


@dataclass(frozen=True)
class End:
    """The request is complete; ``Framer.consumed`` is now where it ends."""


@dataclass(frozen=True)
class Bad:
    """Not a request an engine would execute: ``pending`` from here on is what it was."""

    reason: str
    status: int  # what a server answers: 400, or 501 for an unknown transfer coding
    in_body: bool  # the head was fine (a ``Head`` came before), the body framing is not


@dataclass(frozen=True)
class Raw:
    """The bytes from here on are not HTTP/1.x at all (an h2 preface, TLS, garbage)."""

    raw_kind: str
    summary: str


Event = Head | Body | End | Bad | Raw

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _STOPPED = range(7)


def _lines(head: bytes) -> list[bytes]:
    return [line[:-1] if line.endswith(b"\r") else line for line in head.split(b"\n")]


def _connection_tokens(headers: tuple[tuple[bytes, bytes], ...]) -> set[bytes]:
    return {token.strip().lower() for name, value in headers if name.lower() == b"connection"
            for token in value.split(b",")}


def unfolded(lines: list[bytes]) -> list[bytes] | None:
    """Header lines as Go's ``readContinuedLineSlice`` reads them: a line that starts with a
    space or a tab is joined to the one before by one space, both trimmed of spaces and
    tabs (obs-fold, RFC 9112 §5.2). None: the first line is folded, which Go refuses."""
    out: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not out:
                return None  # ReadMIMEHeader: "malformed MIME header initial line"
            out[-1] += b" " + line.strip(b" \t")
        else:
            out.append(line.strip(b" \t"))
    return out


def parse_head(head: bytes, offset: int) -> Head | Bad:
    """The request in ``head`` (request line and header lines, without the empty line)."""
    lines = _lines(head)
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        return Bad("bad request line", 400, False)
    logical = unfolded(lines[1:])
    if logical is None:
        return Bad("folded first header line", 400, False)
    headers = []
    for line in logical:
        name, colon, value = line.partition(b":")
        if not colon or (name and _TOKEN.fullmatch(name) is None):
            return Bad("bad header line", 400, False)
        headers.append((name, value.strip(b" \t")))
    method, target, version = (part.decode("latin-1") for part in match.groups())
    frozen = tuple(headers)
    codings = [value for name, value in frozen if name.lower() == b"transfer-encoding"]
    lengths = [value for name, value in frozen if name.lower() == b"content-length"]
    if lengths and not any(lengths):
        # Go before 1.22 (podman 4.3.1 here is go1.19.8) takes an empty Content-Length for none
        # (parseContentLength: "" is -1) and executes the request; 1.22 refuses it (400).
        lengths = []
    tokens = _connection_tokens(frozen)
    # transfer.go shouldClose: HTTP/1.0 keeps the connection only with keep-alive (and no close).
    keep_alive = b"close" not in tokens and (version != "HTTP/1.0" or b"keep-alive" in tokens)
    if version == "HTTP/1.0":
        codings = []  # transfer.go: "Issue 12785; ignore Transfer-Encoding on HTTP/1.0 requests."
    elif codings and (len(codings) != 1 or codings[0].lower() != b"chunked"):
        return Bad("unsupported Transfer-Encoding", 501, False)
    # Current Go's fixLength checks every Content-Length before it looks at chunked; older Go's
    # parseTransferEncoding (1.16, as read) deletes them when chunked first, and executes the
    # request: so with chunked they are not checked here (one record more than current Go).
    if lengths and not codings and not content_length_ok(lengths):
        return Bad("bad or conflicting Content-Length", 400, False)
    if codings:
        # Content-Length too: chunked wins, and the connection ends after the answer.
        return Head(method, target, version, frozen, offset, keep_alive and not lengths, True, 0)
    length = int(lengths[0]) if lengths else 0
    return Head(method, target, version, frozen, offset, keep_alive, False, length)


def content_length_ok(values: list[bytes]) -> bool:
    """Go's fixLength and parseContentLength: the lines agree, and the value is what
    ``strconv.ParseUint(cl, 10, 63)`` takes (ASCII digits only, below 2**63)."""
    return len(set(values)) == 1 and values[0].isdigit() and int(values[0]) < 1 << 63


class Framer:
    """Feed bytes, pull events until ``None`` (needs more). After ``Bad`` or ``Raw`` it stops:
    ``pending`` is then the rest of what was fed, and everything fed later joins it."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self.consumed = 0
        self.state = _HEAD
        self.left = 0  # body or chunk bytes still to come
        self.trailer = 0  # bytes of trailer lines so far
        self.scanned = 0  # bytes of an incomplete head already searched for its end
        self.line_ok = False  # the incomplete head's request line is sniffed: HTTP/1.x, or past the window

    @property
    def at_boundary(self) -> bool:
        """Between requests: no part of a request has been taken yet."""
        return self.state == _HEAD

    @property
    def stopped(self) -> bool:
        return self.state == _STOPPED

    def stop(self) -> None:
        """Frame nothing more: what is pending stays pending."""
        self.state = _STOPPED

    def feed(self, data: bytes) -> None:
        self.pending += data

    def _take(self, count: int) -> bytes:
        data = bytes(self.pending[:count])
        del self.pending[:count]
        self.consumed += count
        return data

    def _stop(self, event: Bad | Raw) -> Bad | Raw:
        self.state = _STOPPED
        return event

    def next_event(self) -> Event | None:
        buf = self.pending
        if self.state == _HEAD:
            return self._head() if buf else None
        if self.state == _LENGTH:
            if not self.left:
                self.state = _HEAD
                return End()
            if not buf:
                return None
            data = self._take(min(self.left, len(buf)))
            self.left -= len(data)
            return Body(data)
        if self.state == _CHUNK_DATA:
            if not buf:
                return None
            data = self._take(min(self.left, len(buf)))
            self.left -= len(data)
            if not self.left:
                self.state = _CHUNK_END
            return Body(data)
        if self.state == _CHUNK_END:
            if buf.startswith(b"\r\n") or buf.startswith(b"\n"):
                self._take(2 if buf[0] == 0x0D else 1)
                self.state = _CHUNK_SIZE
                return self.next_event()
            if len(buf) >= 2 or (buf and buf[0] != 0x0D):
                return self._stop(Bad("chunk data not followed by CRLF", 400, True))
            return None
        if self.state == _CHUNK_SIZE:
            return self._chunk_size()
        if self.state == _TRAILER:
            return self._trailer()
        return None

    def _head(self) -> Event | None:
        buf = self.pending
        skip = 0
        while skip < len(buf) and buf[skip] in (0x0D, 0x0A):
            skip += 1
            if skip > MAX_LINE:
                return self._stop(Bad("too many empty lines", 400, False))
        if skip == len(buf):
            return None
        # A head that comes a few bytes at a time is searched from where the last search ended.
        start = max(skip, self.scanned - 2)
        ends = [found for found in (buf.find(b"\n\r\n", start), buf.find(b"\n\n", start)) if found >= 0]
        if not ends:
            self.scanned = len(buf)
            if not self.line_ok:
                window = bytes(buf[skip:skip + MAX_LINE + 1])
                verdict = sniff(window)
                if verdict.kind is Kind.RAW and verdict.summary == "request line too long":
                    # Go has no limit per line: a request line that is still a request line
                    # after sniff's window is taken up to MAX_HEAD, and checked whole at its end.
                    verdict = sniff(window[:MAX_REQUEST_LINE - 1])
                if verdict.kind is Kind.RAW:
                    return self._stop(Raw(verdict.raw_kind, verdict.summary))
                self.line_ok = verdict.kind is Kind.HTTP1 or len(window) > MAX_LINE
            if len(buf) - skip > MAX_HEAD:
                return self._stop(Bad(f"request head larger than {MAX_HEAD} bytes", 431, False))
            return None
        self.scanned, self.line_ok = 0, False
        end = min(ends)
        head = bytes(buf[skip:end])
        first_line = head.split(b"\n", 1)[0]
        if _REQUEST_LINE.fullmatch(first_line.removesuffix(b"\r")) is None:
            verdict = sniff(bytes(buf[skip:skip + MAX_LINE + 1]))
            if verdict.kind is Kind.NEED_MORE:  # the start of an h2 preface
                return None
            if verdict.kind is Kind.RAW:
                return self._stop(Raw(verdict.raw_kind, verdict.summary))
            return self._stop(Bad("bad request line", 400, False))
        stop = end + (3 if buf[end + 1] == 0x0D else 2)
        if stop - skip > MAX_HEAD:
            return self._stop(Bad(f"request head larger than {MAX_HEAD} bytes", 431, False))
        parsed = parse_head(head, self.consumed)
        if isinstance(parsed, Bad):
            return self._stop(parsed)
        self._take(stop)
        if parsed.chunked:
            self.state = _CHUNK_SIZE
        else:
            self.state, self.left = _LENGTH, parsed.length
        return parsed

    def _line(self) -> bytes | Bad | None:
        """The next line (without its end), or None for more, or Bad when it is too long."""
        newline = self.pending.find(b"\n")
        if newline < 0:
            return Bad("line too long in a chunked body", 400, True) if len(self.pending) > MAX_LINE else None
        if newline > MAX_LINE:
            return Bad("line too long in a chunked body", 400, True)
        line = self._take(newline + 1)[:-1]
        return line[:-1] if line.endswith(b"\r") else line

    def _chunk_size(self) -> Event | None:
        newline = self.pending.find(b"\n")
        if newline < 0 and len(self.pending) <= MAX_LINE:
            return None
        line = bytes(self.pending[:max(newline, 0)]).removesuffix(b"\r")
        size = line.split(b";", 1)[0].strip(b" \t")
        if newline < 0 or newline > MAX_LINE or _HEX.fullmatch(size) is None:
            return self._stop(Bad("bad chunk size line", 400, True))
        self._take(newline + 1)
        self.left = int(size, 16)
        self.state = _CHUNK_DATA if self.left else _TRAILER
        self.trailer = 0
        return self.next_event()

    def _trailer(self) -> Event | None:
        while True:
            start = self.consumed
            line = self._line()
            if isinstance(line, Bad):
                return self._stop(line)
            if line is None:
                return None
            self.trailer += self.consumed - start
            if not line:
                self.state = _HEAD
                return End()
            if self.trailer > MAX_HEAD:
                return self._stop(Bad("trailer larger than 64 KiB", 400, True))
