"""The serving side of the canary: listeners, the sniffing protocol, aiohttp behind it.

One process, one thread, one event loop. Each accepted connection gets a
``SniffingProtocol``; it writes the ``connection`` record first, looks at the first bytes
(``sniff``), and either records them ``raw`` and hangs up, or hands the connection to an
aiohttp ``RequestHandler`` whose handler writes the ``request`` record before it returns an
answer. aiohttp's own error answers (a bad header, an oversized line) go through
``HttpSide.handle_error``, which records first too. So every byte the canary ever sends
follows a record of what it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import os
import resource
import signal
import socket
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from aiohttp.http_parser import RawRequestMessage
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from . import engine
from .errors import CanaryError, CanaryUsageError
from .recorder import Recorder
from .records import MAX_RAW_KEPT, BodyDigest, Record, connection_record, raw_record, request_record
from .sniff import Kind, sniff

MAX_BODY_READ = 1 << 30  # beyond this a body is cut short (recorded as incomplete) and answered 413
BACKLOG = 1024
_RECORDED = "no_docker_canary_recorded"

# aiohttp logs every bad request at ERROR level; the canary's log is the record, and garbage
# on a socket is expected input, not an error of the canary.
_quiet = logging.getLogger("no_docker.canary.aiohttp")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


# --- listeners ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ListenerSpec:
    """One listener as given on the command line; ``address`` is how records name it."""

    kind: str  # unix | tcp | abstract
    address: str
    path: str | None = None
    host: str | None = None
    port: int | None = None
    name: str | None = None

    def ready_entry(self, port: int | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"kind": self.kind, "address": self.address}
        if self.kind == "unix":
            entry["path"] = self.path
        elif self.kind == "tcp":
            entry.update(host=self.host, port=self.port if port is None else port)
        else:
            entry["name"] = self.name
        return entry


def parse_tcp(text: str) -> ListenerSpec:
    """``HOST:PORT`` or ``[V6]:PORT`` on a loopback address; the canary never listens beyond it."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise CanaryUsageError(f"--tcp {text!r}: expected HOST:PORT, e.g. 127.0.0.1:2375")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise CanaryUsageError(f"--tcp {text!r}: port must be a number from 0 to 65535")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise CanaryUsageError(f"--tcp {text!r}: host must be a loopback IP address or localhost") from None
    if not address.is_loopback:
        raise CanaryUsageError(f"--tcp {text!r}: {host} is not a loopback address; "
                               "the canary listens on loopback only (use a network namespace for more)")
    return ListenerSpec("tcp", text, host=str(address), port=int(port_text))


def parse_unix(text: str) -> ListenerSpec:
    if not text or "\0" in text:
        raise CanaryUsageError(f"--unix {text!r}: expected a socket path")
    if len(os.fsencode(text)) > 107:
        raise CanaryUsageError(f"--unix {text!r}: longer than the 107 bytes a unix socket path may have")
    return ListenerSpec("unix", text, path=text)


def parse_abstract(text: str) -> ListenerSpec:
    name = text.lstrip("@")
    if not name or "\0" in name or len(os.fsencode(name)) > 106:
        raise CanaryUsageError(f"--abstract {text!r}: expected a name of 1 to 106 bytes")
    return ListenerSpec("abstract", text, name=name)


def _unix_socket(path: str) -> socket.socket:
    """Bind ``path``; replace a stale socket file, but never one a live server answers on."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(path)
        except OSError as err:
            if err.errno != errno.EADDRINUSE or not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.settimeout(1.0)
                probe.connect(path)
            except ConnectionRefusedError:
                os.unlink(path)  # nobody listens: a leftover of a killed server
            else:
                raise CanaryError(f"--unix {path}: a server already listens there; "
                                  "not taking it over") from None
            finally:
                probe.close()
            sock.bind(path)
        # Every local client must be able to reach the witness, whatever its uid.
        os.chmod(path, 0o666)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def open_listener(spec: ListenerSpec) -> socket.socket:
    """A listening socket for ``spec``; CanaryError naming the flag when it cannot be made."""
    try:
        if spec.kind == "unix":
            assert spec.path is not None
            return _unix_socket(spec.path)
        if spec.kind == "abstract":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind("\0" + (spec.name or ""))
                sock.listen(BACKLOG)
            except BaseException:
                sock.close()
                raise
            return sock
        assert spec.host is not None and spec.port is not None
        family = socket.AF_INET6 if ":" in spec.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((spec.host, spec.port))
            sock.listen(BACKLOG)
        except BaseException:
            sock.close()
            raise
        return sock
    except OSError as err:
        raise CanaryError(f"--{spec.kind} {spec.address}: cannot listen: {err.strerror or err}") from None


def peer_of(sock: Any, kind: str) -> dict[str, Any]:
    """SO_PEERCRED (pid, uid, gid as the kernel saw them at connect) or the TCP address."""
    try:
        if kind == "tcp":
            host, port = sock.getpeername()[:2]
            return {"address": host, "port": port}
        pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
    except OSError as err:
        return {"error": err.strerror or str(err)}
    peer: dict[str, Any] = {"pid": pid, "uid": uid, "gid": gid}
    # Best effort and racy (the pid may be gone or reused by now): a hint for the reader only.
    with contextlib.suppress(OSError):
        peer["comm"] = Path(f"/proc/{pid}/comm").read_bytes().rstrip(b"\n").decode("utf-8", "replace")
    return peer


# --- the canary -----------------------------------------------------------------------------

@dataclass
class Canary:
    recorder: Recorder
    mode: str = "answer"
    idle_timeout: float = 30.0
    connections: set[SniffingProtocol] = field(default_factory=set)
    conn_count: int = 0
    write_failures: int = 0

    def record(self, record: Record) -> Record | None:
        """Write ``record``; None when it could not be written (then nothing may be answered)."""
        try:
            return self.recorder.write(record)
        except OSError as err:
            self.write_failures += 1
            if self.write_failures == 1 or self.write_failures % 1000 == 0:
                print(f"no-docker canary: cannot write the log ({err.strerror}); "
                      f"hanging up without answering ({self.write_failures} so far)", file=sys.stderr)
            return None


class SniffingProtocol(asyncio.Protocol):
    """Records the connection, sniffs its first bytes, then records raw or hands over to aiohttp."""

    def __init__(self, canary: Canary, listener: ListenerSpec, server: Server) -> None:
        self.canary = canary
        self.listener = listener
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.conn = 0
        self.head = bytearray()
        self.http: HttpSide | None = None
        self.closed = False
        self.last_activity = 0.0
        # Bytes received since the last request began, kept up to MAX_RAW_KEPT: what a raw
        # "incomplete" or "bad-http" record shows when no request record covers them.
        self.pending = bytearray()
        self.pending_len = 0
        self.in_flight = 0

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.canary.conn_count += 1
        self.conn = self.canary.conn_count
        self.last_activity = asyncio.get_running_loop().time()
        peer = peer_of(transport.get_extra_info("socket"), self.listener.kind)
        if self.canary.record(connection_record(self.listener.address, self.conn, peer)) is None:
            self._hang_up(abort=True)
            return
        self.canary.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity = asyncio.get_running_loop().time()
        self._remember(data)
        if self.http is not None:
            self.http.data_received(data)
            return
        self.head += data
        verdict = sniff(bytes(self.head))
        if verdict.kind is Kind.NEED_MORE:
            return
        if verdict.kind is Kind.RAW:
            data, self.head = bytes(self.head), bytearray()
            self._record_raw(verdict.raw_kind, verdict.summary, data)
            self._hang_up()
            return
        self._hand_over()

    def eof_received(self) -> bool | None:
        if self.closed:
            return None
        if self.http is None:
            data, self.head = bytes(self.head), bytearray()
            if data:
                verdict = sniff(data, eof=True)
                self._record_raw(verdict.raw_kind, verdict.summary, data)
            self._hang_up()
            return None
        # A client may shut down its sending side after a request (socat, nc -N) and still
        # wait for the answer: keep the socket open until what was asked is answered.
        # Not aiohttp's close(): that drops pipelined requests it has parsed but not handled.
        self._close_when_idle()
        return None if self.closed else True

    def _close_when_idle(self) -> None:
        # aiohttp hands a parsed request to a new task, so between two of its steps it can look
        # neither busy nor idle; poll briefly rather than hang up on a request being handled.
        if self.closed or self.http is None:
            return
        if self.http.idle() and not self.in_flight:
            self._hang_up()
            return
        asyncio.get_running_loop().call_later(0.02, self._close_when_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self.canary.connections.discard(self)
        self.closed = True
        if self.http is not None:
            # Pipelined requests aiohttp parsed but will now never hand to a handler: attempts
            # all the same, recorded as unanswered (status 0).
            unanswered = self.http.queued_requests()
            for message in unanswered:
                self._record_unanswered(message)
            if self.pending_len and not self.in_flight and not unanswered:
                self._record_raw("incomplete", "half a request", bytes(self.pending), self.pending_len)
            self.http.connection_lost(exc)
        elif self.head:
            # Not decided before the peer went away (e.g. reset mid-request-line).
            self._record_raw("incomplete", sniff(bytes(self.head), eof=True).summary, bytes(self.head))
        self.transport = None

    def pause_writing(self) -> None:
        if self.http is not None:
            self.http.pause_writing()

    def resume_writing(self) -> None:
        if self.http is not None:
            self.http.resume_writing()

    # helpers ------------------------------------------------------------------------------
    def _remember(self, data: bytes) -> None:
        room = MAX_RAW_KEPT - len(self.pending)
        if room > 0:
            self.pending += data[:room]
        self.pending_len += len(data)

    def request_started(self) -> None:
        self.in_flight += 1
        self.pending.clear()
        self.pending_len = 0

    def request_done(self) -> None:
        # The body read so far is covered by the request record just written.
        self.in_flight -= 1
        self.pending.clear()
        self.pending_len = 0

    def take_pending(self) -> tuple[bytes, int]:
        data, length = bytes(self.pending), self.pending_len
        self.pending.clear()
        self.pending_len = 0
        return data, length

    def _record_raw(self, raw_kind: str, summary: str, data: bytes, length: int | None = None) -> bool:
        record = raw_record(self.listener.address, self.conn, raw_kind, summary, data)
        if length is not None:
            record["bytes_len"] = length
            record["bytes_truncated"] = length > len(data[:MAX_RAW_KEPT])
        self.pending.clear()
        self.pending_len = 0
        return self.canary.record(record) is not None

    def _record_unanswered(self, message: RawRequestMessage) -> None:
        body = BodyDigest()
        content_length = message.headers.get("Content-Length", "0")
        body.complete = not message.chunked and content_length.strip() in ("", "0")
        record = request_record(
            listener=self.listener.address, conn=self.conn, method=message.method, target=message.path,
            version=f"HTTP/{message.version.major}.{message.version.minor}", headers=message.raw_headers,
            body=body, endpoint=engine.split_api_path(message.path.partition("?")[0]).endpoint, status=0)
        record["unanswered"] = True
        self.canary.record(record)

    def _hand_over(self) -> None:
        assert self.transport is not None
        data = bytes(self.head)
        self.head = bytearray()
        self.http = HttpSide(self.server, self, loop=asyncio.get_running_loop(), logger=_quiet,
                             access_log=None, keepalive_timeout=self.canary.idle_timeout,
                             tcp_keepalive=self.listener.kind == "tcp", auto_decompress=False,
                             lingering_time=2.0)
        self.http.connection_made(self.transport)
        self.http.data_received(data)

    def _hang_up(self, abort: bool = False) -> None:
        self.closed = True
        if self.transport is not None:
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    def reap_if_idle(self, now: float) -> None:
        """Abort a connection idle too long; abort, not close: a client that never reads would
        otherwise keep the unsent answer (and the socket) forever."""
        if now - self.last_activity > self.canary.idle_timeout and not self.in_flight:
            self._hang_up(abort=True)


class HttpSide(RequestHandler):
    """aiohttp's HTTP/1.x protocol, whose own error answers are recorded before they go out."""

    def __init__(self, manager: Server, front: SniffingProtocol, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.front = front

    def queued_requests(self) -> list[RawRequestMessage]:
        """Requests parsed and queued but not yet handed to the handler (aiohttp's own queue)."""
        return [message for message, _ in self._messages if isinstance(message, RawRequestMessage)]

    def idle(self) -> bool:
        """Waiting for the next request, with none queued or being handled. aiohttp has no
        public test for this; these are the fields its own keep-alive timer looks at."""
        waiter = self._waiter
        return (waiter is not None and not waiter.done() and not self._messages
                and not self._request_in_progress)

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not request.get(_RECORDED):
            detail = message or (str(exc) if exc else "") or f"status {status}"
            data, length = self.front.take_pending()
            record = raw_record(self.front.listener.address, self.front.conn, "bad-http",
                                f"bad HTTP/1.x: {detail}"[:200], data)
            record["bytes_len"] = length
            record["bytes_truncated"] = length > len(data)
            record["status"] = status
            if self.front.canary.record(record) is None:
                self.force_close()
            else:
                request[_RECORDED] = True
        return super().handle_error(request, status, exc, message)


def _headers_of(answer: engine.Answer) -> list[tuple[str, str]]:
    return [*answer.headers, ("Content-Type", answer.content_type)]


async def _read_body(request: BaseRequest, body: BodyDigest, idle_timeout: float) -> None:
    """Hash the whole body, keep its first MiB; a stalled or cut body is marked incomplete."""
    content = request.content
    try:
        while body.length < MAX_BODY_READ:
            chunk = await asyncio.wait_for(content.readany(), idle_timeout)
            if not chunk:
                return
            body.feed(chunk)
        body.complete = False
    except Exception:  # a timeout, a reset, aiohttp's payload errors: still a request to record
        body.complete = False


def make_handler(canary: Canary):  # noqa: ANN201 - an aiohttp handler
    async def handle(request: BaseRequest) -> web.StreamResponse:
        front: SniffingProtocol = request.protocol.front  # type: ignore[attr-defined]
        front.request_started()
        try:
            body = BodyDigest()
            if request.body_exists:
                await _read_body(request, body, canary.idle_timeout)
            record = request_record(
                listener=front.listener.address, conn=front.conn, method=request.method,
                target=request.raw_path, version=f"HTTP/{request.version.major}.{request.version.minor}",
                headers=request.raw_headers, body=body)
            path = record["path"]
            params: dict[str, str] = {}
            for name, value in record["params"]:
                params.setdefault(name, value)
            asked = engine.Request(request.method, unquote(path) if "%" in path else path, params,
                                   {"upgrade": request.headers.get("Upgrade", "")},
                                   nonce=f"{front.conn}-{canary.recorder.seq}")
            api = engine.split_api_path(asked.path)
            answer = engine.answer(asked, canary.mode, api)
            if not body.complete:
                answer = engine.error(413 if body.length >= MAX_BODY_READ else 400,
                                      "request body incomplete")
            # Filled in before the record is written: the log says what the client was told.
            record["endpoint"] = api.endpoint
            record["status"] = answer.status
            if canary.record(record) is None:
                front._hang_up(abort=True)
                raise ConnectionResetError("the canary could not record this request")
            request[_RECORDED] = True
        finally:
            front.request_done()
        if answer.upgrade:
            response = web.StreamResponse(status=101, headers=_headers_of(answer))
            # After a 101 the stream is the container's; the canary has nothing to say and
            # hangs up, which a client reads as the end of the container's output.
            response.force_close()
            return response
        response = web.Response(status=answer.status, body=answer.body or None, headers=_headers_of(answer))
        if not body.complete:
            response.force_close()
        return response

    return handle


# --- serving --------------------------------------------------------------------------------

def write_ready(path: Path, entries: list[dict[str, Any]]) -> None:
    """Atomically: a reader sees no file or the whole JSON, never half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "listeners": entries}) + "\n")
    os.replace(tmp, path)


async def serve(specs: list[ListenerSpec], log: Path, *, mode: str = "answer", ready: Path | None = None,
                idle_timeout: float = 30.0) -> int:
    loop = asyncio.get_running_loop()
    _raise_fd_limit()
    recorder = Recorder(log)
    canary = Canary(recorder, mode, idle_timeout)
    server = Server(make_handler(canary), loop=loop)
    servers: list[asyncio.AbstractServer] = []
    created: list[tuple[str, int]] = []  # socket files we made: (path, inode), removed at exit
    stop = asyncio.Event()
    try:
        entries = []
        for spec in specs:
            sock = open_listener(spec)
            if spec.kind == "unix":
                assert spec.path is not None
                created.append((spec.path, os.stat(spec.path).st_ino))

            def factory(spec: ListenerSpec = spec) -> SniffingProtocol:
                return SniffingProtocol(canary, spec, server)

            if spec.kind == "tcp":
                servers.append(await loop.create_server(factory, sock=sock, backlog=BACKLOG))
            else:
                servers.append(await loop.create_unix_server(factory, sock=sock, backlog=BACKLOG))
            entries.append(spec.ready_entry(sock.getsockname()[1] if spec.kind == "tcp" else None))
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        if ready is not None:
            try:
                write_ready(ready, entries)
            except OSError as err:
                raise CanaryError(f"--ready {ready}: cannot write: {err.strerror}") from None
        reaper = asyncio.create_task(_reap_idle(canary))
        await stop.wait()
        reaper.cancel()
        return 0
    finally:
        for listening in servers:
            listening.close()
        for conn in list(canary.connections):
            conn._hang_up(abort=True)
        # Let handlers that were reading a body record it (as incomplete) before the log closes.
        for _ in range(3):
            await asyncio.sleep(0)
        recorder.close()
        for path, inode in created:
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:
                    os.unlink(path)


def _raise_fd_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: at the soft limit accept(2) fails with EMFILE and
    clients wait in the backlog, unrecorded, until a descriptor is free."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def _reap_idle(canary: Canary) -> None:
    loop = asyncio.get_running_loop()
    period = max(0.05, min(5.0, canary.idle_timeout / 4))
    while True:
        await asyncio.sleep(period)
        now = loop.time()
        for conn in list(canary.connections):
            conn.reap_if_idle(now)
