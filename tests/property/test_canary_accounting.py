"""Issue 19: every byte a client sends is in the log, attributed to its request or to a raw
record, whatever the framing. Hypothesis over framings, on real sockets of a real canary:
well-formed requests (Content-Length, chunked, no body; Upgrade headers of every kind)
joined, maybe followed by something that is no request, cut at a random point, sent in
random pieces, then ended by a half-close, a close or a reset. The records of the connection
must be exactly the requests and raw bytes sent, byte for byte, with offsets that cover the
bytes without a gap or an overlap.
"""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from no_docker.canary.process import started_canary
from no_docker.canary.recorder import wire_path
from no_docker.canary.records import parse_wire

from tests.canary_wire_model import REQUESTS, TAILS, compare, expected, make_request, send_in_pieces, settle


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    work = tmp_path_factory.mktemp("canary-accounting")
    with started_canary(work, unix=[str(work / "d.sock")], tcp=["127.0.0.1:0"],
                        extra=["--idle-timeout", "5"]) as running:
        yield running
        assert running.proc.poll() is None, running.stderr()
        assert "Traceback" not in running.stderr() and "Error" not in running.stderr(), running.stderr()


def connect(canary, family: str) -> tuple[socket.socket, int]:
    """A connection and the ``conn`` number the canary gives it (this module's tests run one
    connection at a time)."""
    conns = sum(1 for r in canary.records() if r["kind"] == "connection")
    if family == "tcp":
        sock = socket.socket(socket.AF_INET)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.connect(("127.0.0.1", canary.listener("tcp")["port"]))
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(canary.listener("unix")["path"])
    sock.settimeout(20)
    return sock, conns + 1


def end(sock: socket.socket, how: str) -> None:
    try:
        if how == "half-close":
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # the canary hangs up once it has recorded everything
                pass
        elif how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass  # the canary hung up first (on a tail that is no request)
    finally:
        sock.close()


@st.composite
def framings(draw):
    requests = draw(st.lists(REQUESTS, min_size=1, max_size=5))
    tail = draw(st.sampled_from((b"", b"", *TAILS)))
    data = b"".join(r.wire for r in requests) + tail
    cut = draw(st.one_of(st.just(len(data)), st.integers(0, len(data))))
    splits = sorted(draw(st.lists(st.integers(1, max(1, cut)), max_size=4)))
    return requests, tail, cut, splits


PING = make_request("GET", "/_ping", (), b"", "none", 1, False)
UPGRADE = make_request("DELETE", "/containers/a?force=1", (("Connection", "Upgrade"), ("Upgrade", "tcp")),
                       b"", "none", 1, False)
DELETE_B = make_request("DELETE", "/containers/b?force=1", (), b"", "none", 1, False)
H2C = make_request("GET", "/_ping", (("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                                     ("HTTP2-Settings", "AAMAAABkAARAAAAA")), b"", "none", 1, False)
HALF_DELETE = b"DELETE /images/foo HTTP/1.1\r\nHost: x\r\n"


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(framing=framings(), family=st.sampled_from(["unix", "tcp"]),
       how=st.sampled_from(["half-close", "close", "reset"]))
# issue 19 case 1: the request after one with an Upgrade header
@example(framing=([UPGRADE, DELETE_B], b"", len(UPGRADE.wire + DELETE_B.wire), []), family="unix",
         how="half-close")
# ... and an h2c upgrade followed by the h2 preface
@example(framing=([H2C], TAILS[1], len(H2C.wire) + len(TAILS[1]), []), family="unix", how="half-close")
# case 5: good requests, then a malformed one, in one read
@example(framing=([PING, DELETE_B], TAILS[3], len(PING.wire + DELETE_B.wire) + len(TAILS[3]), []),
         family="tcp", how="half-close")
# case 5: Content-Length twice, disagreeing, after good requests
@example(framing=([PING, DELETE_B], TAILS[4], len(PING.wire + DELETE_B.wire) + len(TAILS[4]), []),
         family="unix", how="close")
# case 6: half of a pipelined request, then a shutdown or a reset
@example(framing=([PING], HALF_DELETE, len(PING.wire) + len(HALF_DELETE), []), family="unix",
         how="half-close")
@example(framing=([PING], HALF_DELETE, len(PING.wire) + len(HALF_DELETE), []), family="tcp", how="reset")
def test_every_byte_sent_is_in_exactly_one_record(canary, framing, family, how):
    requests, tail, cut, splits = framing
    data = (b"".join(r.wire for r in requests) + tail)[:cut]
    sock, conn = connect(canary, family)
    try:
        send_in_pieces(sock, data, splits)
    except (ConnectionResetError, BrokenPipeError):
        pass  # the canary hung up on a tail it had recorded (garbage): it read all of it first
    end(sock, how)
    items = expected(requests, tail, cut)
    records = settle(canary, conn, len(items))
    compare(records, items, len(data))
    # What was read went to the wire file first, byte for byte: exactly what the records cover.
    conn_seq = next(r["seq"] for r in canary.records() if r["kind"] == "connection" and r["conn"] == conn)
    read = parse_wire(wire_path(canary.log).read_bytes()).read.get(conn_seq, b"")
    assert bytes(read) == data[:sum(r["bytes_len"] for r in records)]
