"""The serving side of the canary: listeners, and the protocol that records and answers.

One process, one thread, one event loop. Each accepted connection gets an
``EngineConnection``: it writes the ``connection`` record first, then frames what the client
sends (``framing.Framer``, pure) and, for each request as it completes, writes the
``request`` record and only then sends the answer (``engine``, pure). Bytes that are not
HTTP/1.x (an HTTP/2 preface, TLS, garbage), a request that breaks the rules, what is left
of a request when the connection ends, and what a client sends into a stream after a 101
are ``raw`` records. Every byte read is in exactly one record (``offset``, ``bytes_len``);
every byte the canary ever sends follows the record of what it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import errno
import fcntl
import ipaddress
import json
import os
import resource
import signal
import socket
import stat
import struct
import sys
import termios
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from . import engine
from .errors import CanaryError, CanaryUsageError
from .framing import MAX_LINE, Bad, Body, End, Event, Framer, Head
from .recorder import Recorder, Wire, refuse_a_stale_wire, wire_path
from .records import MAX_RAW_KEPT, BodyDigest, Record, connection_record, raw_record, request_record
from .sniff import sniff

MAX_BODY_READ = 1 << 30  # beyond this a body is cut short (recorded as incomplete) and answered 413
# At a connection's end, what the kernel still holds for it is read, up to this much: the
# queue is bounded by the socket buffers (~200 KiB on a unix socket, net.ipv4.tcp_rmem's
# maximum, 6 MiB by default, over TCP).
MAX_READ_DRY = 16 << 20
READ_DRY_CHUNK = 1 << 18
BACKLOG = 1024
SHUTDOWN_GRACE = 2.0  # seconds the answers already given get to reach slow readers at SIGTERM


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
    wire: Wire | None = None  # every byte read, before it is framed (None: in-process tests only)
    connections: set[EngineConnection] = field(default_factory=set)
    conn_count: int = 0
    write_failures: int = 0
    stopping: bool = False  # SIGTERM: nothing more is answered, what was read is recorded

    def record(self, record: Record) -> Record | None:
        """Write ``record``; None when it could not be written (then nothing may be answered)."""
        try:
            return self.recorder.write(record)
        except OSError as err:
            self._write_failed("the log", err)
            return None

    def _write_failed(self, what: str, err: OSError) -> None:
        self.write_failures += 1
        if self.write_failures == 1 or self.write_failures % 1000 == 0:
            print(f"no-docker canary: cannot write {what} ({err.strerror}); "
                  f"hanging up without answering ({self.write_failures} so far)", file=sys.stderr)

    def spool(self, conn_seq: int, offset: int, data: bytes) -> bool:
        """Put ``data`` in the wire file before it is framed; False when it could not be."""
        if self.wire is None:
            return True
        try:
            self.wire.write(conn_seq, offset, data)
        except OSError as err:
            self._write_failed("the wire file", err)
            return False
        return True


_REASONS = {status.value: status.phrase for status in HTTPStatus}
_NO_BODY = frozenset({101, 204, 304})


def render_answer(answer: engine.Answer, method: str, close: bool, date: str,
                  version: str = "HTTP/1.1") -> bytes:
    """The bytes of an answer in the request's HTTP version (pure). HEAD gets the length of
    the body it does not get."""
    lines = [f"{version} {answer.status} {_REASONS.get(answer.status, 'Unknown')}"]
    lines += [f"{name}: {value}" for name, value in answer.headers]
    lines.append(f"Content-Type: {answer.content_type}")
    if answer.status not in _NO_BODY:
        lines.append(f"Content-Length: {len(answer.body)}")
    lines.append(f"Date: {date}")
    if close and not answer.upgrade:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if method == "HEAD" or answer.status in _NO_BODY:
        return head
    return head + answer.body


_date_cache: list = [None, ""]


def http_date(now: float) -> str:
    whole = int(now)
    if _date_cache[0] != whole:
        _date_cache[:] = [whole, email.utils.formatdate(whole, usegmt=True)]
    return _date_cache[1]


_Answering = tuple[int, engine.Answer, str, str, bool]  # seq, answer, method, version, close


@dataclass
class _Request:
    """The request whose head was read and whose body is still coming."""

    head: Head
    body: BodyDigest


class EngineConnection(asyncio.Protocol):
    """One client connection: frames what it sends, records each request, then answers it.

    Every byte read is accounted for: ``Framer`` assigns it to a request or leaves it
    pending; a request is recorded when it is complete (then answered), or, incomplete, when
    the connection ends; what is pending then is a ``raw`` record. So the records of a
    connection cover its bytes without a gap or an overlap (``offset``, ``bytes_len``).
    """

    def __init__(self, canary: Canary, listener: ListenerSpec) -> None:
        self.canary = canary
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.conn = 0
        self.conn_seq = 0  # the seq of this connection's record: its key in the wire file
        self.read_len = 0  # bytes read from the client so far (the offset of the next piece)
        self.framer = Framer()
        self.request: _Request | None = None
        self.answering = True  # False once an answer ended the connection, or at shutdown
        self.hijacked = -1  # after a 101: offset where the client's stream starts, else -1
        self.finished = False  # everything read is recorded; nothing more is read
        self.closing = False  # the canary closes (or aborted) the transport
        self.write_paused = False
        self.eof = False
        self.last_activity = 0.0
        self.stream = bytearray()  # after a 101: the first bytes of the client's stream
        self.stream_len = 0
        self.sent = 0  # answer bytes handed to the transport
        self.unconfirmed: list[tuple[int, int]] = []  # (seq, end in sent) not yet known to be in the kernel

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.canary.conn_count += 1
        self.conn = self.canary.conn_count
        self.last_activity = asyncio.get_running_loop().time()
        if self.listener.kind == "tcp" and transport.get_extra_info("peername"):
            # The address accept(2) returned: getpeername fails on a connection already reset.
            host, port = transport.get_extra_info("peername")[:2]
            peer: dict[str, Any] = {"address": host, "port": port}
        else:
            peer = peer_of(transport.get_extra_info("socket"), self.listener.kind)
        written = self.canary.record(connection_record(self.listener.address, self.conn, peer))
        if written is None:
            self.finished = True
            self._hang_up(abort=True)
            return
        self.conn_seq = written["seq"]
        self.canary.connections.add(self)
        if self.canary.stopping:  # accepted just before the listeners closed: recorded, then closed
            self.shutdown()

    def data_received(self, data: bytes) -> None:
        if self.finished:
            return
        self.last_activity = asyncio.get_running_loop().time()
        if not self._take_in(data):
            # Not on disk before it is framed: nothing more is answered (what was read is still
            # recorded in the log, unanswered), as when a record cannot be written.
            self._finish("the canary cannot write its wire file")
            self._hang_up(abort=True)
            return
        if self.hijacked < 0:
            self._confirm()
            self._work()

    def _take_in(self, data: bytes) -> bool:
        """Bytes read from the client: first into the wire file (so a SIGKILL loses nothing
        read), then the framer's, or after a 101 the stream's. False: not in the wire file."""
        spooled = self.canary.spool(self.conn_seq, self.read_len, data)
        self.read_len += len(data)
        if self.hijacked >= 0:
            if len(self.stream) < MAX_RAW_KEPT:
                self.stream += data[:MAX_RAW_KEPT - len(self.stream)]
            self.stream_len += len(data)
        else:
            self.framer.feed(data)
        return spooled

    def _read_dry(self) -> None:
        """Read what the kernel queues for this socket at this moment, without waiting and at
        most MAX_READ_DRY bytes, before the connection's last record is written.

        A connection can end while the client's bytes wait in the socket: reading was paused
        (the client does not read its answers), the client closed or reset after pipelining,
        SIGTERM, the idle timeout, a request that ends the connection. Those bytes were
        accepted by the kernel from the client, so they are attempts and must be in the log
        (issue 27: ~3300 pipelined requests were in no record). How many is asked first
        (FIONREAD, i.e. SIOCINQ: the unread bytes of the receive queue, unix(7) and tcp(7)),
        and no more is read: over TCP the window the reads open lets the client send on, and
        what it sends after the canary decided to end the connection is never read, as ever.
        The socket is non-blocking (asyncio made it so); read(2) on it is recv(2) without
        flags. asyncio closes the socket only after ``connection_lost`` returns
        (selector_events ``_call_connection_lost``), so this works there too.
        """
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return
        try:
            fd = sock.fileno()
            queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:  # already closed
            return
        left = min(queued, MAX_READ_DRY)
        while left > 0:
            try:
                data = os.read(fd, min(READ_DRY_CHUNK, left))
            except OSError:  # EAGAIN, or a reset after its queued bytes were read
                return
            if not data:
                return
            left -= len(data)
            if not self._take_in(data):
                self.answering = False  # not in the wire file: recorded, never answered

    def eof_received(self) -> bool | None:
        if self.finished:
            return None
        self.eof = True
        if not self.write_paused:
            self._work()
            self._finish("the client closed its sending side")
            self._hang_up()
        # else: the rest is framed and answered as the client reads (resume_writing)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.canary.connections.discard(self)
        if not self.finished:
            self._finish("the connection was reset" if exc else "the client went away")
        if self.unconfirmed and exc is not None:
            # A failed send: the answers not known to be in the kernel were not sent.
            self._record_unsent([seq for seq, _ in self.unconfirmed], f"sending failed: {exc}")
        self.unconfirmed = []
        self.transport = None

    def pause_writing(self) -> None:
        # The client does not read its answers: stop reading (and answering) it, which bounds
        # what the canary holds to one read and the transport's buffer.
        self.write_paused = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.finished or self.transport is None or self.transport.is_closing():
            return
        self._confirm()
        self._work()
        if self.finished or self.write_paused:  # done, or the answers piled up again
            return
        if self.eof:
            self._finish("the client closed its sending side")
            self._hang_up()
        else:
            self.transport.resume_reading()

    # framing and answering ----------------------------------------------------------------
    def _work(self, force: bool = False) -> None:
        """Frame what is pending; record and answer each request as it completes."""
        while not self.finished and (force or not self.write_paused) and self.hijacked < 0:
            event = self.framer.next_event()
            if event is None:
                break
            self._on(event)
        if not force and not self.answering and not self.finished:
            # An answer ended the connection: what else this read held is recorded unanswered.
            self._finish("after an answer that ends the connection")
            self._hang_up()

    def _on(self, event: Event) -> None:
        if isinstance(event, Head):
            self.request = _Request(event, BodyDigest())
        elif isinstance(event, Body):
            assert self.request is not None
            self.request.body.feed(event.data)
            if self.request.body.length > MAX_BODY_READ:
                # Enough: the rest read so far, and what is queued now, is this body too.
                self.request.body.complete = False
                self._read_dry()
                self.framer.consumed += len(self.framer.pending)
                self.framer.pending.clear()
                self.framer.stop()
                prepared = self._record_request(engine.error(413, "request body larger than 1 GiB"))
                self.finished = True
                if prepared is not None:
                    self._deliver(*prepared)
                self._hang_up()
        elif isinstance(event, End):
            prepared = self._record_request(None)
            if prepared is not None:
                self._deliver(*prepared)
        elif isinstance(event, Bad):
            self._read_dry()  # the rest, up to now, is in the record of what broke the rules
            answer = engine.error(event.status, f"bad HTTP/1.x request: {event.reason}")
            summary = f"bad HTTP/1.x: {event.reason}"
            prepared = None
            if self.request is not None:
                # The head was fine: the request is the attempt (status on it), the bytes from
                # where its body went wrong on are a raw record.
                self.request.body.complete = False
                prepared = self._record_request(answer)
                if self.framer.pending:
                    self._record_pending("bad-http", summary)
            else:
                written = self._record_pending("bad-http", summary, answer.status if self.answering else None)
                if written is not None and self.answering:
                    prepared = (written["seq"], answer, "GET", "HTTP/1.1", True)
            self.finished = True
            if prepared is not None:
                self._deliver(*prepared)
            self._hang_up()
        else:  # Raw: not HTTP/1.x at all; recorded, never answered
            self._read_dry()
            self._record_pending(event.raw_kind, event.summary)
            self.finished = True
            self._hang_up()

    def _record_request(self, forced: engine.Answer | None) -> _Answering | None:
        """Record the request just completed (or cut short). Returns what to answer (seq,
        answer, method, close), or None: not answering, or the record could not be written."""
        assert self.request is not None
        head, body = self.request.head, self.request.body
        self.request = None
        record = request_record(listener=self.listener.address, conn=self.conn, method=head.method,
                                target=head.target, version=head.version, headers=head.headers, body=body)
        record["offset"] = head.offset
        record["bytes_len"] = self.framer.consumed - head.offset
        path = record["path"]
        path = unquote(path) if "%" in path else path
        api = engine.split_api_path(path)
        record["endpoint"] = api.endpoint
        if not self.answering:
            record["status"] = 0
            record["unanswered"] = True
            self.canary.record(record)
            return None
        params: dict[str, str] = {}
        for name, value in record["params"]:
            params.setdefault(name, value)
        upgrade = next((value.decode("latin-1") for name, value in head.headers
                        if name.lower() == b"upgrade"), "")
        asked = engine.Request(head.method, path, params, {"upgrade": upgrade},
                               nonce=f"{self.conn}-{self.canary.recorder.seq}")
        answer = forced or engine.answer(asked, self.canary.mode, api)
        # Filled in before the record is written: the log says what the client is told.
        record["status"] = answer.status
        written = self.canary.record(record)
        if written is None:
            self.finished = True
            self._hang_up(abort=True)
            return None
        close = forced is not None or not head.keep_alive
        if close:
            self.answering = False  # requests already sent after this one: recorded unanswered
        return written["seq"], answer, head.method, head.version, close

    def _deliver(self, seq: int, answer: engine.Answer, method: str, version: str, close: bool) -> None:
        """Send an answer whose record is written."""
        transport = self.transport
        if transport is None or transport.is_closing():
            self._record_unsent([seq], "the connection was already closed")
            return
        data = render_answer(answer, method, close, http_date(time.time()), version)
        transport.write(data)
        self.sent += len(data)
        if transport.is_closing() and not self.closing:
            self._record_unsent([seq], "sending failed")  # the client reset the connection
            return
        self.unconfirmed.append((seq, self.sent))
        self._confirm()
        if answer.upgrade and not close:
            # After a 101 the stream is the container's: the canary says no more (it shuts its
            # sending side, which the client reads as the end of the output) and records what
            # the client sends into the stream (attach stdin) as one raw record at the end.
            self.hijacked = self.framer.consumed
            self.stream += self.framer.pending[:MAX_RAW_KEPT]
            self.stream_len = len(self.framer.pending)
            self.framer.pending.clear()
            if transport.can_write_eof():
                transport.write_eof()

    def _confirm(self) -> None:
        """Drop answers the transport has handed to the kernel in full."""
        transport = self.transport
        if self.unconfirmed and transport is not None and (self.closing or not transport.is_closing()):
            in_kernel = self.sent - transport.get_write_buffer_size()
            self.unconfirmed = [(seq, end) for seq, end in self.unconfirmed if end > in_kernel]

    # the end of a connection --------------------------------------------------------------
    def _finish(self, why: str) -> None:
        """Record everything read and not yet recorded; read nothing more. Idempotent."""
        if self.finished:
            return
        self.answering = False
        self._read_dry()
        if self.hijacked >= 0:
            self.finished = True
            if self.stream_len:
                record = raw_record(self.listener.address, self.conn, "stream",
                                    f"the client's stream after the 101 ({why})", bytes(self.stream))
                record.update(offset=self.hijacked, bytes_len=self.stream_len,
                              bytes_truncated=self.stream_len > len(self.stream))
                self.canary.record(record)
            return
        # Frame the rest without answering: complete requests are recorded unanswered.
        self._work(force=True)
        if self.finished:
            return
        self.finished = True
        if self.request is not None:
            self.request.body.complete = False
            self.framer.consumed += len(self.framer.pending)  # a part of the body (or chunk framing)
            self.framer.pending.clear()
            self._record_request(None)
        elif self.framer.pending:
            data = bytes(self.framer.pending[:MAX_LINE + 1]).lstrip(b"\r\n")
            summary = "half a request" if b"\n" in data or not data else sniff(data, eof=True).summary
            self._record_pending("incomplete", f"{summary} ({why})")

    def _record_pending(self, raw_kind: str, summary: str, status: int | None = None) -> Record | None:
        """One raw record for everything pending, then nothing is pending."""
        data = bytes(self.framer.pending)
        record = raw_record(self.listener.address, self.conn, raw_kind, summary.replace("\n", " "), data)
        record["offset"] = self.framer.consumed
        if status is not None:
            record["status"] = status
        self.framer.consumed += len(data)
        self.framer.pending.clear()
        return self.canary.record(record)

    def _record_unsent(self, seqs: list[int], why: str) -> None:
        if seqs:
            self.canary.record({"kind": "unsent", "listener": self.listener.address, "conn": self.conn,
                                "seqs": seqs, "reason": why})

    def _hang_up(self, abort: bool = False) -> None:
        """Close (what was answered is still sent), or abort (it is not: recorded unsent)."""
        transport = self.transport
        if transport is None:
            return
        if abort and not transport.is_closing():
            self._confirm()
            if self.unconfirmed:
                self._record_unsent([seq for seq, _ in self.unconfirmed], "the canary aborted the connection")
            self.unconfirmed = []
        self.closing = True
        if abort:
            transport.abort()
        elif not transport.is_closing():
            transport.close()

    def shutdown(self) -> None:
        """SIGTERM: record what was read, answer nothing more, close (answers given still go out)."""
        self._finish("the canary stopped")
        self._hang_up()

    def reap_if_idle(self, now: float) -> None:
        """Abort a connection idle too long; abort, not close: a client that never reads would
        otherwise keep the unsent answer (and the socket) forever."""
        if now - self.last_activity > self.canary.idle_timeout:
            self._finish(f"idle for {self.canary.idle_timeout:g} s")
            self._hang_up(abort=True)


# --- serving --------------------------------------------------------------------------------

def write_ready(path: Path, entries: list[dict[str, Any]]) -> None:
    """Atomically: a reader sees no file or the whole JSON, never half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "listeners": entries}) + "\n")
    os.replace(tmp, path)


def _one_line(text: str) -> str:
    """A path on one line of a terminal: control characters (a newline in a path) as escapes."""
    return text if text.isprintable() else "".join(
        char if char.isprintable() else repr(char)[1:-1] for char in text)


def ready_line(entries: list[dict[str, Any]], log: Path, pid: int, mode: str = "answer") -> str:
    """What ``serve`` says on stderr once every listener accepts: where it listens (TCP with the
    real port, so ``--tcp 127.0.0.1:0`` is usable without ``--ready``), its pid, where the log
    is, and whether it refuses. One line, without a newline."""
    where = []
    for entry in entries:
        if entry["kind"] == "tcp":
            host = str(entry["host"])
            where.append(f"tcp {f'[{host}]' if ':' in host else host}:{entry['port']}")
        elif entry["kind"] == "unix":
            where.append(f"unix {entry['path']}")
        else:
            where.append(f"abstract @{entry['name']}")
    doing = "refusing every request (--mode refuse)" if mode == "refuse" else "answering"
    return _one_line(f"no-docker canary: ready (pid {pid}), {doing} on {', '.join(where)}; "
                     f"recording to {os.path.abspath(log)}")


def _say(line: str) -> None:
    """One line on stderr; a closed or broken stderr never stops the witness."""
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line + "\n")
            sys.stderr.flush()


async def serve(specs: list[ListenerSpec], log: Path, *, mode: str = "answer", ready: Path | None = None,
                idle_timeout: float = 30.0) -> int:
    loop = asyncio.get_running_loop()
    _raise_fd_limit()
    recorder = Recorder(log)
    try:
        refuse_a_stale_wire(wire_path(log), recorder.seq)
        wire = Wire(wire_path(log))
    except CanaryError:
        recorder.close()
        raise
    canary = Canary(recorder, mode, idle_timeout, wire)
    servers: list[asyncio.AbstractServer] = []
    created: list[tuple[str, int]] = []  # socket files we made: (path, inode), removed at exit
    stop = asyncio.Event()
    reaper: asyncio.Task[None] | None = None
    try:
        entries = []
        for spec in specs:
            sock = open_listener(spec)
            if spec.kind == "unix":
                assert spec.path is not None
                created.append((spec.path, os.stat(spec.path).st_ino))

            def factory(spec: ListenerSpec = spec) -> EngineConnection:
                return EngineConnection(canary, spec)

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
        # After the ready file: whoever waits for this line can read the file at once.
        _say(ready_line(entries, log, os.getpid(), mode))
        reaper = asyncio.create_task(_reap_idle(canary))
        await stop.wait()
        return 0
    finally:
        await _stop(canary, servers, reaper)
        recorder.close()
        wire.close()
        for path, inode in created:
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:
                    os.unlink(path)


async def _stop(canary: Canary, servers: list[asyncio.AbstractServer],
                reaper: asyncio.Task[None] | None) -> None:
    """Stop accepting; record what every connection has read (once); let the answers already
    given go out for SHUTDOWN_GRACE seconds; abort the rest (their answers recorded unsent)."""
    canary.stopping = True
    if reaper is not None:
        reaper.cancel()
    for listening in servers:
        listening.close()
    # Connections accepted but not yet announced to their protocol get it now: recorded too.
    for _ in range(3):
        await asyncio.sleep(0)
    for conn in list(canary.connections):
        conn.shutdown()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_GRACE
    while canary.connections and loop.time() < deadline:
        await asyncio.sleep(0.01)
    for conn in list(canary.connections):
        conn._hang_up(abort=True)
    for _ in range(3):  # connection_lost of the aborted ones: nothing left to record, but run it
        await asyncio.sleep(0)


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
