"""Issue 27 (canary): bytes the canary has read are on disk before it frames them (LOG.wire),
so a SIGKILLed canary loses nothing it read: not half a request head, not a body it was still
reading, not what a client sent into the stream after a 101 (each of those is only recorded
when it ends, and a SIGKILL ends nothing). ``canary show`` lists those bytes."""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time

from no_docker.canary.process import started_canary
from no_docker.canary.recorder import wire_entry_head, wire_path
from no_docker.canary.records import WireFile, parse_wire, unrecorded

from tests.unit.test_canary_witness import req


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


def wait_for_wire(log, want: dict[int, bytes], timeout: float = 20.0) -> WireFile:
    deadline = time.monotonic() + timeout
    while True:
        wire = parse_wire(wire_path(log).read_bytes()) if wire_path(log).exists() else WireFile({}, [])
        if all(bytes(wire.read.get(seq, b"")) == data for seq, data in want.items()) or \
                time.monotonic() > deadline:
            return wire
        time.sleep(0.02)


def test_a_sigkilled_canary_loses_nothing_it_read(tmp_path):
    path = str(tmp_path / "d.sock")
    half_head = b"DELETE /v1.50/containers/web?force=1 HTTP/1.1\r\nHost: do"
    body = json.dumps({"Image": "alpine", "Cmd": ["rm", "-rf", "/data"]}).encode()
    half_body = req("POST", "/v1.50/containers/create", body=body)[:-10]
    attach = req("POST", "/v1.50/containers/web/attach?stream=1&stdin=1",
                 "Connection: Upgrade", "Upgrade: tcp")
    stdin = b"rm -rf /data\n"
    socks = []
    try:
        with started_canary(tmp_path, unix=[path]) as canary:
            for data in (half_head, half_body, attach):
                sock = socket.socket(socket.AF_UNIX)
                sock.settimeout(20)
                sock.connect(path)
                sock.sendall(data)
                socks.append(sock)
            assert socks[2].recv(4096).startswith(b"HTTP/1.1 101 ")
            socks[2].sendall(stdin)
            # connection records are seq 1, 2, 3 (one connection at a time), then the attach's
            # request record: the wire file holds each connection's bytes from offset 0
            want = {1: half_head, 2: half_body, 3: attach + stdin}
            wire = wait_for_wire(canary.log, want)
            assert {seq: bytes(wire.read.get(seq, b"")) for seq in want} == want
            canary.proc.send_signal(signal.SIGKILL)
            canary.proc.wait(10)
            records = canary.records()
    finally:
        for sock in socks:
            sock.close()
    assert [(r["kind"], r.get("path")) for r in records] == [
        ("connection", None), ("connection", None), ("connection", None),
        ("request", "/v1.50/containers/web/attach")]
    # Nothing but the attach was recorded; everything else read is in the wire file, and show says so.
    shown = subprocess.run([sys.executable, "-m", "no_docker.canary", "show", str(canary.log), "--json"],
                           capture_output=True, timeout=60, check=True)
    listed = json.loads(shown.stdout)["unrecorded"]
    assert [(u["conn_seq"], u["offset"], base64.b64decode(u["bytes"])) for u in listed] == [
        (1, 0, half_head), (2, 0, half_body), (3, len(attach), stdin)]
    text = subprocess.run([sys.executable, "-m", "no_docker.canary", "show", str(canary.log)],
                          capture_output=True, timeout=60, check=True, text=True).stdout
    assert "read but in no record" in text and "DELETE /v1.50/containers/web?force=1" in text
