"""Properties of the canary's pure parts: nothing raises on any input, decisions are stable."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st
from no_docker.canary.engine import Request, answer, split_api_path
from no_docker.canary.records import decode_bytes, encode_bytes, parse_log, route_of
from no_docker.canary.sniff import H2_PREFACE, MAX_REQUEST_LINE, Kind, client_hello_sni, sniff

TOKEN = st.text("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", min_size=1,
                max_size=12)
TARGET = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=60)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=MAX_REQUEST_LINE + 10), st.binary(max_size=64), st.booleans())
@example(H2_PREFACE[:10], H2_PREFACE[10:], False)
@example(b"GET / HTTP/1.", b"1\r\n", False)
def test_sniff_never_raises_and_a_decision_is_never_taken_back(data, more, eof):
    verdict = sniff(data, eof=eof)
    if verdict.kind is Kind.NEED_MORE:
        assert not eof and len(data) < MAX_REQUEST_LINE, f"undecided on {data!r}"
        return
    assert verdict.kind is Kind.HTTP1 or verdict.raw_kind in {"h2-preface", "tls", "garbage", "incomplete"}
    if verdict.raw_kind != "incomplete":
        later = sniff(data + more)
        assert (later.kind, later.raw_kind) == (verdict.kind, verdict.raw_kind), (data, more)


@settings(max_examples=300, deadline=None)
@given(TOKEN, TARGET, st.sampled_from(["0", "1"]), st.sampled_from([b"\r\n", b"\n"]))
def test_every_request_line_is_http1_and_every_prefix_waits(method, target, minor, eol):
    line = f"{method} {target} HTTP/1.{minor}".encode() + eol
    assert sniff(line).kind is Kind.HTTP1, line
    for cut in range(1, len(line)):
        prefix = line[:cut]
        if not H2_PREFACE.startswith(prefix):
            assert sniff(prefix).kind is Kind.NEED_MORE, (line, prefix)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_client_hello_parser_never_raises(data):
    name = client_hello_sni(b"\x16\x03\x01" + data)
    assert name is None or isinstance(name, str)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_bodies_round_trip(data):
    text, encoding = encode_bytes(data)
    assert decode_bytes(text, encoding) == data
    json.dumps(text)  # always serialisable


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["kind", "headers", "params", "query"]), JSONISH),
       st.sampled_from(["request", "raw", "connection"]))
def test_route_of_never_raises_on_odd_records(record, kind):
    record["kind"] = kind
    route = route_of(record)
    assert route is None or (kind == "request" and route.replace("-", "").isalnum())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.text(max_size=120),
       st.dictionaries(st.text(max_size=10), st.text(max_size=10)), st.sampled_from(["answer", "refuse"]))
def test_answer_never_raises_and_json_bodies_parse(method, path, params, mode):
    api = split_api_path(path)
    assert path.endswith(api.endpoint) or api.endpoint == path
    found = answer(Request(method, path, params, {}), mode=mode)
    assert 100 <= found.status < 600
    if found.content_type == "application/json" and found.body:
        json.loads(found.body)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=10))
def test_parse_log_never_raises(lines):
    for line in parse_log(lines):
        assert (line.record is None) != (line.error == "")


SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(SCALAR | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                               max_size=3), max_leaves=8)
PEER_KEYS = st.sampled_from(["pid", "uid", "gid", "comm", "address", "port", "error"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(PEER_KEYS, JSON, max_size=5) | JSON, JSON)
def test_show_never_gives_a_pid_that_is_not_an_int_whatever_the_log_holds(peer, conn):
    from no_docker.canary.show import render, summarize

    records = [{"kind": "connection", "seq": 1, "listener": "l", "conn": conn, "peer": peer},
               {"kind": "request", "seq": 2, "listener": "l", "conn": conn, "method": "GET", "path": "/"}]
    summary = summarize(parse_log(json.dumps(r).encode() + b"\n" for r in records))
    (row,) = summary.as_json()["rows"]
    assert row["pid"] is None or type(row["pid"]) is int
    assert row["peer_address"] is None or isinstance(row["peer_address"], str)
    if isinstance(peer, dict) and type(peer.get("pid")) is int:
        assert row["pid"] == peer["pid"]
    # the header, the row, a blank line, "per listener:" and its one listener, "per route: (none)"
    assert render(summary).count("\n") == 6
