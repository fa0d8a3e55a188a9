"""The only writer of the canary log, and of its wire file (every byte read, before it is parsed).

A record is one ``os.write`` on an ``O_APPEND`` descriptor, done before the caller sends a
byte of answer. When ``write`` returns, the line is in the kernel's page cache: it survives
a SIGKILL of the canary (only a crash of the kernel itself could lose it), so "answered"
implies "in the log". No Python buffer sits in between, so there is nothing to flush.
The canary is one thread on one event loop, so ``seq`` is assigned and written without a
gap or a reordering.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import BinaryIO

from .errors import CanaryError, CanaryUsageError
from .records import Record, dumps

_TAIL = 1 << 16  # the log is read backwards in blocks of this size to find the last seq
WIRE_SUFFIX = ".wire"


_second_cache: list = [None, ""]  # (whole second, its formatted prefix): strftime once a second


def utc_timestamp(now: float) -> str:
    """RFC 3339 UTC with microseconds: ``2026-11-30T01:19:01.123456Z``."""
    whole = int(now)
    if _second_cache[0] != whole:
        _second_cache[:] = [whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))]
    return f"{_second_cache[1]}.{int((now - whole) * 1_000_000):06d}Z"


def last_seq(tail: bytes) -> int:
    """The ``seq`` of the last complete record in ``tail`` (the end of a log), else 0."""
    for line in reversed(tail.split(b"\n")):
        seq = _seq_of(line)
        if seq is not None:
            return seq
    return 0


def _seq_of(line: bytes) -> int | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # torn, foreign, or nested past the stack
        return None
    if isinstance(record, dict) and isinstance(record.get("seq"), int):
        return record["seq"]
    return None


def resume_seq(log: BinaryIO, size: int, block: int = _TAIL) -> int:
    """The ``seq`` of the last complete record of a log of ``size`` bytes, however long that
    record's line is: whole lines are read backwards, ``block`` bytes at a time. A record
    holds no raw newline (JSON escapes it), so every newline ends a line."""
    end = size  # the lines before ``end`` are not looked at yet
    carry = b""  # the start of a line that began before the block just read
    while end > 0:
        start = max(0, end - block)
        log.seek(start)
        chunk = log.read(end - start) + carry
        end = start
        lines = chunk.split(b"\n")
        carry = lines.pop(0) if start > 0 else b""  # may begin in an earlier block
        for line in reversed(lines):
            seq = _seq_of(line)
            if seq is not None:
                return seq
    return 0


class Recorder:
    """Appends records to the log; ``seq`` continues from a log that already has records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # 0o600: records hold request headers and bodies (X-Registry-Auth, env of create).
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise CanaryError(f"--log {path}: cannot open for appending: {err.strerror}") from None
        try:
            self.seq = self._resume()
        except OSError as err:
            os.close(self._fd)
            raise CanaryError(f"--log {path}: cannot read its end: {err.strerror}") from None

    def _resume(self) -> int:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return 0
        with open(self.path, "rb") as log:
            log.seek(size - 1)
            torn = log.read(1) != b"\n"
            seq = resume_seq(log, size)
        if torn:
            # A torn last line (a SIGKILL in the middle of a large write): start on a fresh line
            # so it stays one unreadable line instead of corrupting the next record.
            self._write_all(b"\n")
        return seq

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def write(self, record: Record) -> Record:
        """Give ``record`` the next ``seq`` and the time, and append it. Raises OSError.

        ``seq`` is only consumed when the write succeeded, so a failed write (disk full)
        leaves no gap; the caller must then not answer.
        """
        # kind, seq, time first: a reader sees what and when before the details.
        line = {"kind": record["kind"], "seq": self.seq + 1, "time": utc_timestamp(time.time()), **record}
        self._write_all(dumps(line))
        self.seq += 1
        return line

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def wire_path(log: Path) -> Path:
    """Where the wire file of ``log`` is: beside it, ``LOG.wire``."""
    return log.with_name(log.name + WIRE_SUFFIX)


def wire_entry_head(conn_seq: int, offset: int, length: int) -> bytes:
    """The line before each piece of the wire file: ``CONN_SEQ OFFSET LENGTH``, then LENGTH bytes."""
    return b"%d %d %d\n" % (conn_seq, offset, length)


def refuse_a_stale_wire(wire: Path, log_seq: int) -> None:
    """CanaryError when the log has no record yet but WIRE holds pieces: they are an earlier
    log's (removed, the wire file left beside it). The new session's connections would take the
    same seqs (1, 2, ...) and its pieces would be read as theirs (``canary show``: "N bytes came
    before it"); the canary neither mixes them nor throws them away."""
    if log_seq != 0:
        return  # a log with records: its wire file continues with it, seqs never repeat
    try:
        size = os.stat(wire).st_size
    except FileNotFoundError:
        return
    except OSError as err:
        raise CanaryError(f"--log: cannot stat its wire file {wire}: {err.strerror}") from None
    if size:
        raise CanaryUsageError(f"--log {wire.with_suffix('')}: the log has no record, but its wire file "
                               f"{wire} holds {size} bytes of an earlier log; remove {wire} too, or give "
                               "another --log")


class Wire:
    """Appends every piece the canary reads from a client to ``LOG.wire`` before the piece is
    framed: a SIGKILLed canary then loses nothing it read, not the half of a request it had
    not recorded yet, not the stream after a 101 (both are only recorded when they end).

    A piece is the line ``CONN_SEQ OFFSET LENGTH``, then the bytes: CONN_SEQ is the ``seq`` of the
    connection's ``connection`` record (unique in the log, across restarts), OFFSET where the
    piece starts among the bytes the connection sent, the same offsets as the records'. The
    write is one ``write(2)`` on an ``O_APPEND`` descriptor, as the log's: in the kernel's
    page cache when it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # 0o600 as the log: the bytes are the same request headers and bodies.
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise CanaryError(f"--log: cannot open its wire file {path} for appending: "
                              f"{err.strerror}") from None

    def write(self, conn_seq: int, offset: int, data: bytes) -> None:
        """Append one piece. Raises OSError (then the piece may be torn: the reader says so)."""
        # One write(2) of head and bytes joined: a SIGKILL can then tear only the last piece.
        piece = memoryview(wire_entry_head(conn_seq, offset, len(data)) + data)
        while piece:  # a short write (a signal, a full disk): the rest
            piece = piece[os.write(self._fd, piece):]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
