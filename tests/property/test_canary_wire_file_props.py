"""The wire file (LOG.wire) read back: what recorder.Wire wrote, per connection, whatever
the interleaving; cut anywhere (a SIGKILL in a write), a prefix of it and a torn piece named."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.canary.recorder import Wire
from no_docker.canary.records import parse_wire

PIECES = st.lists(st.tuples(st.integers(1, 4), st.binary(max_size=40)), max_size=12)


def write(pieces: list[tuple[int, bytes]]) -> tuple[bytes, dict[int, bytes]]:
    """The file Wire makes of ``pieces`` (connection, bytes), and each connection's bytes."""
    sent: dict[int, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl.wire"
        wire = Wire(path)
        try:
            for conn, data in pieces:
                wire.write(conn, len(sent.get(conn, b"")), data)
                sent[conn] = sent.get(conn, b"") + data
        finally:
            wire.close()
        return path.read_bytes(), sent


@settings(max_examples=200, deadline=None)
@given(PIECES)
def test_what_wire_wrote_is_read_back_per_connection(pieces):
    data, sent = write(pieces)
    wire = parse_wire(data)
    assert wire.problems == []
    assert {conn: bytes(read) for conn, read in wire.read.items()} == sent


@settings(max_examples=200, deadline=None)
@given(PIECES, st.integers(0, 10_000))
def test_a_cut_file_gives_a_prefix_of_each_connection_and_says_where_it_is_torn(pieces, cut):
    data, sent = write(pieces)
    cut = min(cut, len(data))
    wire = parse_wire(data[:cut])
    for conn, read in wire.read.items():
        assert sent[conn].startswith(bytes(read))
    if _at_a_piece_end(data, cut):
        assert wire.problems == []
    else:
        assert len(wire.problems) == 1 and "torn" in wire.problems[0], wire.problems


def _at_a_piece_end(data: bytes, cut: int) -> bool:
    """``cut`` falls between two pieces of ``data``."""
    at = 0
    while at < cut:
        head, _, _ = data[at:].partition(b"\n")
        at += len(head) + 1 + int(head.split(b" ")[2])
    return at == cut
