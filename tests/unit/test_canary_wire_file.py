"""Issue 27 (canary): the wire file (LOG.wire) of the bytes the canary read, before it framed
them, read back (pure). That a SIGKILLed canary loses nothing it read is T-83."""

from __future__ import annotations

from no_docker.canary.recorder import wire_entry_head
from no_docker.canary.records import WireFile, parse_wire, unrecorded


def test_parse_wire_joins_the_pieces_of_each_connection():
    data = (wire_entry_head(1, 0, 3) + b"GET" + wire_entry_head(4, 0, 2) + b"\x16\x03"
            + wire_entry_head(1, 3, 4) + b" /x ")
    assert parse_wire(data) == WireFile({1: bytearray(b"GET /x "), 4: bytearray(b"\x16\x03")}, [])


def test_a_torn_last_piece_keeps_what_is_there_and_says_so():
    whole = wire_entry_head(2, 0, 10) + b"0123456789"
    for cut in range(1, len(whole)):
        wire = parse_wire(whole[:cut])
        body = max(0, cut - len(wire_entry_head(2, 0, 10)))
        assert bytes(wire.read.get(2, b"")) == b"0123456789"[:body]
        assert len(wire.problems) == 1 and "torn" in wire.problems[0], (cut, wire.problems)


def test_a_piece_out_of_place_stops_the_reading():
    data = (wire_entry_head(1, 0, 2) + b"ab" + wire_entry_head(1, 5, 1) + b"c"
            + wire_entry_head(2, 0, 1) + b"d")
    wire = parse_wire(data)
    assert wire.read == {1: bytearray(b"ab")} and "offset 5" in wire.problems[0]
    assert "not a piece head" in parse_wire(b"garbage\n").problems[0]


def test_unrecorded_is_what_no_record_of_the_connection_covers():
    records = [
        {"kind": "connection", "seq": 1, "listener": "s", "conn": 1},
        {"kind": "request", "seq": 2, "listener": "s", "conn": 1, "offset": 0, "bytes_len": 4},
        {"kind": "connection", "seq": 3, "listener": "s", "conn": 2},
        # a restarted canary numbers its connections from 1 again: a new connection record
        {"kind": "connection", "seq": 4, "listener": "s", "conn": 1},
        {"kind": "raw", "seq": 5, "listener": "s", "conn": 1, "offset": 0, "bytes_len": 2},
    ]
    wire = WireFile({1: bytearray(b"abcdef"), 3: bytearray(b"xyz"), 4: bytearray(b"12")}, [])
    found = [(u.conn_seq, u.listener, u.conn, u.offset, u.data) for u in unrecorded(records, wire)]
    assert found == [(1, "s", 1, 4, b"ef"), (3, "s", 2, 0, b"xyz")]
