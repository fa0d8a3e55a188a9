"""``no-docker canary show``: the log as a table, and counts per listener and per route; with
the wire file beside the log, the bytes the canary read that no record covers."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .recorder import wire_path
from .records import MAX_RAW_KEPT, LogLine, Record, Unrecorded, WireFile, parse_wire, route_of, unrecorded

# What `canary show`'s table says, for its --help (canary/cli.py) and docs/canary.md.
COLUMNS = """\
columns:
  SEQ       the record's number in the log; the connection records are numbered too but are
            not rows (they give PEER), so SEQ skips them
  TIME      when the canary wrote it (HH:MM:SS.mmm, UTC)
  LISTENER  the socket it arrived on (a path, @abstract-name or HOST:PORT)
  PEER      who connected: the pid of the client process (SO_PEERCRED, as the canary's pid
            namespace numbers it) on a unix or abstract socket, HOST:PORT on TCP
  STATUS    the HTTP status the canary answered (empty for raw bytes)
  ROUTE     the route id the request carried (X-No-Docker-Route, ?route=, a label): which
            route of a payload it was
  REQUEST   what arrived: METHOD PATH?QUERY, `raw: ...` for bytes that are not HTTP/1 (a TLS
            hello, an HTTP/2 preface), `unsent: ...` for answers the client did not wait for;
            never cut

Then the counts per listener (connections, requests, raw records) and per route id. Not
shown: listeners that got nothing (the log has no record of them: see the ready file), and
which requests would have destroyed something (read METHOD and PATH: `POST
/containers/prune`, `DELETE /images/...`); the canary answered every one without doing it."""


@dataclass(frozen=True)
class Row:
    seq: int | None
    time: str
    listener: str
    conn: Any
    pid: int | None  # the SO_PEERCRED pid of a unix or abstract peer; never anything but an int
    peer_address: str | None  # a TCP peer's HOST:PORT
    kind: str
    what: str
    status: Any
    route: str | None

    def as_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time, "listener": self.listener, "conn": self.conn,
                "pid": self.pid, "peer_address": self.peer_address, "kind": self.kind, "what": self.what,
                "status": self.status, "route": self.route}


@dataclass
class Summary:
    rows: list[Row] = field(default_factory=list)
    per_listener: dict[str, Counter[str]] = field(default_factory=dict)
    per_route: Counter[str] = field(default_factory=Counter)
    bad_lines: list[str] = field(default_factory=list)
    seq_problems: list[str] = field(default_factory=list)  # a seq not above the one before: duplicates
    wire: WireFile | None = None  # LOG.wire, when there is one
    unrecorded: list[Unrecorded] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        wire = {} if self.wire is None else {
            "unrecorded": [{"conn_seq": u.conn_seq, "listener": u.listener, "conn": u.conn,
                            "offset": u.offset, "bytes_len": len(u.data),
                            "bytes": base64.b64encode(u.data[:MAX_RAW_KEPT]).decode("ascii")}
                           for u in self.unrecorded],
            "wire_problems": self.wire.problems,
        }
        return {
            "rows": [row.as_json() for row in self.rows],
            "per_listener": {name: dict(counts) for name, counts in sorted(self.per_listener.items())},
            "per_route": dict(sorted(self.per_route.items())),
            "totals": {kind: sum(counts[kind] for counts in self.per_listener.values())
                       for kind in ("connection", "request", "raw", "unsent")
                       if kind != "unsent" or any(c["unsent"] for c in self.per_listener.values())},
            "bad_lines": self.bad_lines,
            "seq_problems": self.seq_problems,
        } | wire


def printable(text: str) -> str:
    """``text`` on one line: control characters (a newline, an escape sequence) as escapes."""
    return text if text.isprintable() else "".join(
        char if char.isprintable() else repr(char)[1:-1] for char in text)


def _what(record: Record) -> str:
    if record.get("kind") == "raw":
        return printable(f"raw: {record.get('summary') or record.get('raw_kind') or '?'}")
    if record.get("kind") == "unsent":
        return printable(f"unsent: the answers to seq {record.get('seqs')} ({record.get('reason')})")
    query = record.get("query")
    target = f"{record.get('path', '?')}" + (f"?{query}" if query else "")
    return printable(f"{record.get('method', '?')} {target}")


def peer_of(peer: object) -> tuple[int | None, str | None]:
    """(pid, TCP address) of a connection record's ``peer``. Whatever a log holds (an old or
    hand-edited one: no peer, ``{"error": ...}``, a pid that is a string), the pid is an int
    or None, so a consumer of ``--json`` never gets a string where it expects a pid."""
    if not isinstance(peer, dict):
        return None, None
    pid = peer.get("pid")
    address = peer.get("address")
    if isinstance(address, str):
        port = peer.get("port")
        host = f"[{address}]" if ":" in address else address
        address = f"{host}:{port}" if isinstance(port, int) and not isinstance(port, bool) else address
    else:
        address = None
    return (pid if isinstance(pid, int) and not isinstance(pid, bool) else None), address


def read_wire(log: Path) -> WireFile | None:
    """The wire file beside ``log``, parsed; None when there is none (a log of an older canary)
    or it cannot be read."""
    try:
        return parse_wire(wire_path(log).read_bytes())
    except OSError:
        return None


def summarize(lines: Iterable[LogLine], wire: WireFile | None = None) -> Summary:
    """Rows for request and raw records (the peer joined from the connection record); with
    ``wire``, the bytes read that no record covers."""
    summary = Summary(wire=wire)
    records: list[Record] = []
    peers: dict[tuple[str, Any], tuple[int | None, str | None]] = {}
    last_seq: int | None = None
    for line in lines:
        record = line.record
        if record is None:
            summary.bad_lines.append(f"line {line.number}: {line.error}")
            continue
        seq = record.get("seq")
        if isinstance(seq, int):
            if last_seq is not None and seq <= last_seq:
                summary.seq_problems.append(f"line {line.number}: seq {seq} after seq {last_seq}")
            last_seq = seq
        if wire is not None:
            records.append(record)
        kind = str(record.get("kind"))
        listener = str(record.get("listener", "?"))
        summary.per_listener.setdefault(listener, Counter())[kind] += 1
        conn = record.get("conn")
        key = (listener, conn if isinstance(conn, int | str) else repr(conn))  # a list would not hash
        if kind == "connection":
            peers[key] = peer_of(record.get("peer"))
            continue
        route = route_of(record)
        if route:
            summary.per_route[route] += 1
        pid, peer_address = peers.get(key, (None, None))
        summary.rows.append(Row(
            seq=record.get("seq") if isinstance(record.get("seq"), int) else None,
            time=str(record.get("time", "")), listener=listener, conn=record.get("conn"),
            pid=pid, peer_address=peer_address, kind=kind, what=_what(record), status=record.get("status"),
            route=route))
    if wire is not None:
        summary.unrecorded = unrecorded(records, wire)
    return summary


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def render(summary: Summary, clip: int = 40) -> str:
    """A plain-text table, then the counts. Cells but the last are clipped to ``clip``
    characters; the request (method, path, query) is never clipped."""
    out = []
    header = ("SEQ", "TIME", "LISTENER", "PEER", "STATUS", "ROUTE", "REQUEST")
    cells = [(str(row.seq if row.seq is not None else "?"), printable(row.time[11:23] or row.time),
              printable(row.listener),
              str(row.pid) if row.pid is not None else printable(row.peer_address or ""),
              "" if row.status is None else str(row.status),
              row.route or "", row.what) for row in summary.rows]
    fixed = [max([len(header[i])] + [len(_clip(c[i], clip)) for c in cells]) for i in range(6)]
    for row in [header, *cells]:
        parts = [_clip(cell, clip).ljust(fixed[i]) for i, cell in enumerate(row[:6])]
        out.append("  ".join([*parts, row[6]]).rstrip())
    out.append("")
    out.append("per listener:")
    for name, counts in sorted(summary.per_listener.items()):
        unsent = f", {counts['unsent']} unsent" if counts["unsent"] else ""
        out.append(printable(f"  {name}: {counts['connection']} connections, {counts['request']} requests, "
                             f"{counts['raw']} raw{unsent}"))
    out.append("per route:" if summary.per_route else "per route: (no request carried a route id)")
    for route, count in sorted(summary.per_route.items()):
        out.append(f"  {route}: {count}")
    for bad in summary.bad_lines:
        out.append(f"unreadable: {bad}")
    for problem in summary.seq_problems:
        out.append(f"seq out of order (a duplicate, or two writers): {problem}")
    if summary.unrecorded:
        out.append("read but in no record (in the wire file: the canary stopped before it recorded "
                   "them, e.g. it was SIGKILLed):")
    for piece in summary.unrecorded:
        start = printable(piece.data[:60].decode("latin-1"))
        out.append(printable(f"  {piece.listener} conn {piece.conn}: {len(piece.data)} bytes from offset "
                             f"{piece.offset}: ") + start + ("…" if len(piece.data) > 60 else ""))
    for problem in summary.wire.problems if summary.wire is not None else ():
        out.append(f"wire file: {problem}")
    return "\n".join(out) + "\n"
