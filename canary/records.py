"""The records of the canary log, as pure functions: build them, encode them, read them back.

The schema is documented in docs/canary.md. Every record has ``kind``, ``seq``, ``time``,
``listener`` and ``conn``; the recorder adds ``seq`` and ``time`` when it writes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from .sniff import client_hello_sni

MAX_BODY_KEPT = 1 << 20  # the body is kept up to 1 MiB; length and sha256 cover all of it
MAX_RAW_KEPT = 4096  # first bytes kept of a connection that is not HTTP/1.x

ROUTE_ID = re.compile(r"[a-z0-9-]+")
ROUTE_LABEL = "no-docker-route="
ROUTE_HEADER = "x-no-docker-route"
ROUTE_SNI_SUFFIX = ".no-docker-route.invalid"

Record = dict[str, Any]


def encode_bytes(data: bytes) -> tuple[str, str]:
    """(text, encoding): UTF-8 text when ``data`` is valid UTF-8, base64 otherwise."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def decode_bytes(text: str, encoding: str) -> bytes:
    """Inverse of ``encode_bytes``; ValueError for an unknown encoding or bad base64."""
    if encoding == "utf-8":
        return text.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as err:
            raise ValueError(f"bad base64 in record: {err}") from None
    raise ValueError(f"unknown encoding {encoding!r}")


def latin1(data: bytes) -> str:
    """Header bytes as text without loss (RFC 9110 §5.5: octets beyond ASCII are opaque)."""
    return data.decode("latin-1")


def connection_record(listener: str, conn: int, peer: dict[str, Any]) -> Record:
    return {"kind": "connection", "listener": listener, "conn": conn, "peer": peer}


@dataclass
class BodyDigest:
    """What the canary keeps of a request body: length, sha256, and the first 1 MiB."""

    length: int = 0
    complete: bool = True

    def __post_init__(self) -> None:
        self._sha = hashlib.sha256()
        self._kept = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.length += len(chunk)
        self._sha.update(chunk)
        room = MAX_BODY_KEPT - len(self._kept)
        if room > 0:
            self._kept += chunk[:room]

    @property
    def kept(self) -> bytes:
        return bytes(self._kept)

    def fields(self) -> Record:
        if self.length == 0 and self.complete:
            return dict(_EMPTY_BODY)
        text, encoding = encode_bytes(self.kept)
        fields: Record = {
            "body_len": self.length,
            "body_sha256": self._sha.hexdigest(),
            "body": text,
            "body_encoding": encoding,
            "body_truncated": self.length > len(self._kept),
        }
        if not self.complete:
            fields["body_complete"] = False
        return fields


_EMPTY_BODY: Record = {"body_len": 0, "body_sha256": hashlib.sha256().hexdigest(), "body": "",
                       "body_encoding": "utf-8", "body_truncated": False}


def request_record(
    *,
    listener: str,
    conn: int,
    method: str,
    target: str,
    version: str,
    headers: Iterable[tuple[bytes, bytes]],
    body: BodyDigest,
    endpoint: str = "",
    status: int = 0,
) -> Record:
    """A ``request`` record. ``target`` is the request target as sent (path and query);
    ``endpoint`` and ``status`` are what the canary made of it and answered."""
    path, _, query = target.partition("?")
    record: Record = {
        "kind": "request",
        "listener": listener,
        "conn": conn,
        "method": method,
        "path": path,
        "query": query,
        "params": [list(pair) for pair in parse_qsl(query, keep_blank_values=True)] if query else [],
        "http_version": version,
        "headers": [[name.decode("latin-1"), value.decode("latin-1")] for name, value in headers],
        "endpoint": endpoint,
        "status": status,
    }
    record.update(body.fields())
    return record


def raw_record(listener: str, conn: int, raw_kind: str, summary: str, data: bytes) -> Record:
    """A ``raw`` record: the first bytes of something that is not an HTTP/1.x request."""
    kept = data[:MAX_RAW_KEPT]
    return {
        "kind": "raw",
        "listener": listener,
        "conn": conn,
        "raw_kind": raw_kind,
        "summary": summary,
        "bytes_len": len(data),
        "bytes": base64.b64encode(kept).decode("ascii"),
        "bytes_truncated": len(kept) < len(data),
    }


# One encoder for every record: json.dumps with options builds a new encoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def dumps(record: Record) -> bytes:
    """One JSON Lines line. ``ensure_ascii`` keeps the line 7-bit whatever the body holds."""
    return _ENCODER.encode(record).encode("ascii") + b"\n"


def _route_from_filters(text: str) -> str | None:
    try:
        filters = json.loads(text)
    except (ValueError, RecursionError):  # a client chose this text: nesting deep enough blows the stack
        return None
    labels = filters.get("label") if isinstance(filters, dict) else None
    # The docker CLI sends {"label": {"k=v": true}}; the legacy and libpod form is a list.
    if isinstance(labels, dict):
        labels = [key for key, on in labels.items() if on]
    if not isinstance(labels, list):
        return None
    for label in labels:
        if isinstance(label, str) and label.startswith(ROUTE_LABEL):
            value = label[len(ROUTE_LABEL):]
            if ROUTE_ID.fullmatch(value):
                return value
    return None


def _route_from_client_hello(record: Record) -> str | None:
    # A ClientHello carries no header or query; the payload's TLS routes put the id in the SNI
    # as ``ID.no-docker-route.invalid`` (``.invalid`` never resolves, RFC 6761 §6.4).
    if record.get("raw_kind") != "tls" or not isinstance(record.get("bytes"), str):
        return None
    try:
        hello = decode_bytes(record["bytes"], "base64")
    except ValueError:
        return None
    name = client_hello_sni(hello) or ""
    if name.endswith(ROUTE_SNI_SUFFIX) and ROUTE_ID.fullmatch(name[:-len(ROUTE_SNI_SUFFIX)]):
        return name[:-len(ROUTE_SNI_SUFFIX)]
    return None


def _is_param(pair: object, name: str) -> bool:
    return isinstance(pair, Sequence) and len(pair) == 2 and pair[0] == name and isinstance(pair[1], str)


def route_of(record: Record) -> str | None:
    """The route id a request record carries (DESIGN §7), or None.

    Looked for in a header ``X-No-Docker-Route``, a query parameter ``route``, then a
    ``filters`` parameter with a ``no-docker-route=ID`` label; for a raw TLS record, in the
    ClientHello's SNI ``ID.no-docker-route.invalid``. Ids that are not ``[a-z0-9-]+`` are
    ignored rather than trusted.
    """
    if record.get("kind") == "raw":
        return _route_from_client_hello(record)
    if record.get("kind") != "request":
        return None
    headers = record.get("headers")
    for pair in headers if isinstance(headers, list) else ():
        if (isinstance(pair, Sequence) and len(pair) == 2 and isinstance(pair[0], str)
                and pair[0].lower() == ROUTE_HEADER and isinstance(pair[1], str)):
            value = pair[1].strip()
            if ROUTE_ID.fullmatch(value):
                return value
    params = record.get("params")
    if not isinstance(params, list):
        params = parse_qsl(str(record.get("query") or ""), keep_blank_values=True)
    for pair in params:
        if _is_param(pair, "route") and ROUTE_ID.fullmatch(pair[1]):
            return pair[1]
    for pair in params:
        route = _route_from_filters(pair[1]) if _is_param(pair, "filters") else None
        if route:
            return route
    return None


@dataclass(frozen=True)
class LogLine:
    """One line of a log: the record, or why it is not one (a torn last line after SIGKILL)."""

    number: int
    record: Record | None
    error: str = ""


def parse_log(lines: Iterable[bytes]) -> Iterator[LogLine]:
    """Parse JSON Lines; bad lines are reported, never raised."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            yield LogLine(number, None, f"not JSON ({err.msg} at column {err.colno})")
            continue
        except ValueError:  # not UTF-8 at all
            yield LogLine(number, None, "not JSON (not UTF-8)")
            continue
        except RecursionError:
            yield LogLine(number, None, "not JSON (nested too deep)")
            continue
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            yield LogLine(number, None, "not a record (no kind)")
            continue
        yield LogLine(number, record)


# --- the wire file: every byte read, before it was framed (recorder.Wire) ------------------------

_WIRE_HEAD = re.compile(rb"(\d{1,19}) (\d{1,19}) (\d{1,19})\n")


@dataclass
class WireFile:
    """What ``LOG.wire`` holds: per connection (its ``connection`` record's seq), the bytes
    read from offset 0 on; and what in the file is not as a writer leaves it."""

    read: dict[int, bytearray]
    problems: list[str]


def parse_wire(data: bytes) -> WireFile:
    """Pure. A torn last piece (a SIGKILL during its write) keeps the bytes that are there; a
    line that is no piece head, or a piece that does not start where its connection's bytes
    so far end, stops the reading (the file is not one writer's)."""
    wire = WireFile({}, [])
    at = 0
    while at < len(data):
        match = _WIRE_HEAD.match(data, at)
        if match is None:
            if re.fullmatch(rb"[\d ]{1,60}", data[at:]):  # the head's own write was cut short
                wire.problems.append(f"byte {at}: a torn piece head at the end")
            else:
                wire.problems.append(f"byte {at}: not a piece head; the rest is not read")
            break
        conn_seq, offset, length = (int(group) for group in match.groups())
        start = match.end()
        piece = data[start:start + length]
        read = wire.read.setdefault(conn_seq, bytearray())
        if offset != len(read):
            wire.problems.append(f"byte {at}: connection seq {conn_seq} piece at offset {offset}, "
                                 f"but {len(read)} bytes came before it; the rest is not read")
            break
        read += piece
        if len(piece) < length:
            wire.problems.append(f"byte {at}: the last piece is torn ({len(piece)} of {length} bytes)")
        at = start + length
    return wire


@dataclass(frozen=True)
class Unrecorded:
    """Bytes the canary read from a connection (the wire file) that no record covers."""

    conn_seq: int
    listener: str
    conn: Any
    offset: int
    data: bytes


def unrecorded(records: Iterable[Record], wire: WireFile) -> list[Unrecorded]:
    """Pure. For each connection of the wire file, the bytes past the end of its last
    ``request`` or ``raw`` record (records cover a connection's bytes from 0 without a gap).
    A record belongs to the last ``connection`` record before it with its listener and conn."""
    current: dict[tuple[Any, Any], int] = {}
    names: dict[int, tuple[str, Any]] = {}
    covered: dict[int, int] = {}
    for record in records:
        key = (record.get("listener"), record.get("conn"))
        if not isinstance(key[1], int | str):
            continue
        if record.get("kind") == "connection" and isinstance(record.get("seq"), int):
            current[key] = record["seq"]
            names[record["seq"]] = (str(record.get("listener")), record.get("conn"))
        elif record.get("kind") in ("request", "raw") and key in current:
            offset, length = record.get("offset"), record.get("bytes_len")
            if isinstance(offset, int) and isinstance(length, int):
                seq = current[key]
                covered[seq] = max(covered.get(seq, 0), offset + length)
    found = []
    for conn_seq, read in sorted(wire.read.items()):
        end = covered.get(conn_seq, 0)
        if len(read) > end:
            listener, conn = names.get(conn_seq, ("?", None))
            found.append(Unrecorded(conn_seq, listener, conn, end, bytes(read[end:])))
    return found
