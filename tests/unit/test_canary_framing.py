"""The HTTP/1.x framer of the canary (pure): where each request begins and ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.canary.framing import MAX_HEAD, Bad, Body, End, Framer, Head, Raw

from tests.canary_wire_model import REQUESTS, TAILS


def same_but_summaries(a: list, b: list) -> bool:
    """Event lists equal, comparing Raw events by kind only (their summaries aside)."""
    if len(a) != len(b):
        return False
    return all((x.raw_kind == y.raw_kind if isinstance(x, Raw) and isinstance(y, Raw) else x == y)
               for x, y in zip(a, b, strict=True))


def events(data: bytes, splits: list[int] = ()) -> tuple[list, int, bytes]:
    """Feed ``data`` in pieces; Body events merged per request. (events, consumed, pending)"""
    framer = Framer()
    out: list = []
    last = 0
    for split in [*sorted(splits), len(data)]:
        framer.feed(data[last:split])
        last = max(last, split)
        while (event := framer.next_event()) is not None:
            if isinstance(event, Body) and out and isinstance(out[-1], Body):
                out[-1] = Body(out[-1].data + event.data)
            else:
                out.append(event)
    return out, framer.consumed, bytes(framer.pending)


@settings(max_examples=150, deadline=None)
@given(st.lists(REQUESTS, min_size=1, max_size=4), st.sampled_from((b"", *TAILS)),
       st.lists(st.integers(0, 4000), max_size=6))
def test_any_split_gives_the_same_requests_and_every_byte_is_consumed_or_pending(requests, tail, splits):
    data = b"".join(r.wire for r in requests) + tail
    whole, consumed, pending = events(data)
    split, consumed_split, pending_split = events(data, [s for s in splits if s <= len(data)])
    # A raw record's summary ("TLS" / "TLS ClientHello (SNI x)") is read from the bytes there
    # when the verdict fell, so it may say less for a split hello; its kind and bytes may not.
    assert same_but_summaries(whole, split) and (consumed, pending) == (consumed_split, pending_split)
    assert consumed + len(pending) == len(data)
    heads = [e for e in whole if isinstance(e, Head)]
    assert [(h.method, h.target) for h in heads[:len(requests)]] == [(r.method, r.target) for r in requests]
    offsets = [h.offset for h in heads[:len(requests)]]
    assert offsets == [sum(len(r.wire) for r in requests[:i]) for i in range(len(requests))]
    bodies = [e.data for e in whole if isinstance(e, Body)]
    assert b"".join(bodies[:sum(1 for r in requests if r.body)]) == b"".join(r.body for r in requests)


def test_content_length_and_chunked_chunked_wins_and_the_connection_ends():
    data = (b"POST /build HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n0\r\n\r\n")
    out, consumed, pending = events(data)
    assert isinstance(out[0], Head) and out[0].chunked and not out[0].keep_alive
    assert out[1:] == [Body(b"abc"), End()] and consumed == len(data) and pending == b""


@pytest.mark.parametrize("head, reason, status", [
    (b"Content-Length: 1\r\nContent-Length: 2", "bad or conflicting Content-Length", 400),
    (b"Content-Length: -1", "bad or conflicting Content-Length", 400),
    (b"Transfer-Encoding: gzip", "unsupported Transfer-Encoding", 501),
    (b"Transfer-Encoding: chunked, chunked", "unsupported Transfer-Encoding", 501),
    (b" folded: first", "folded first header line", 400),
    (b"Bad Header", "bad header line", 400),
    (b"Bad Name: x", "bad header line", 400),
    (b"X-Big: " + b"a" * MAX_HEAD, f"request head larger than {MAX_HEAD} bytes", 431),
])
def test_what_no_server_executes_is_bad_and_stays_pending(head, reason, status):
    data = b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\nPOST /x HTTP/1.1\r\n" + head + b"\r\n\r\nrest"
    out, consumed, pending = events(data)
    assert isinstance(out[0], Head) and out[1] == End()
    assert out[2] == Bad(reason, status, False)
    assert consumed == len(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n") and pending == data[consumed:]


def test_same_content_length_twice_is_one_length():
    out, _, _ = events(b"POST /x HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab")
    assert isinstance(out[0], Head) and out[0].length == 2 and out[1:] == [Body(b"ab"), End()]


def test_bare_lf_lines_and_empty_lines_before_a_request_are_part_of_it():
    data = b"GET /a HTTP/1.1\nHost: x\n\n\r\n\r\nGET /b HTTP/1.0\r\n\r\n"
    out, consumed, _ = events(data)
    assert [(e.target, e.offset, e.keep_alive) for e in out if isinstance(e, Head)] == [
        ("/a", 0, True), ("/b", len(b"GET /a HTTP/1.1\nHost: x\n\n"), False)]
    assert consumed == len(data)


@pytest.mark.parametrize("data, raw_kind", [
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "h2-preface"),
    (b"\x16\x03\x01\x00\x05", "tls"),
    (b"\x00\x01\x02", "garbage"),
])
def test_what_is_not_http1_after_a_request_is_raw(data, raw_kind):
    out, _, pending = events(b"GET /_ping HTTP/1.1\r\n\r\n" + data)
    assert isinstance(out[-1], Raw) and out[-1].raw_kind == raw_kind and pending == data


def test_a_part_of_an_h2_preface_waits_for_the_rest():
    framer = Framer()
    framer.feed(b"PRI * HTTP/2.0\r\n\r\n")
    assert framer.next_event() is None
    framer.feed(b"SM\r\n\r\n")
    assert framer.next_event() == Raw("h2-preface", "h2 preface")


def test_a_bad_chunk_is_bad_in_the_body_and_the_rest_is_pending():
    data = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\nzz\r\nmore"
    out, consumed, pending = events(data)
    assert out[1:] == [Body(b"ab"), Bad("bad chunk size line", 400, True)]
    assert pending == b"zz\r\nmore" and consumed + len(pending) == len(data)
