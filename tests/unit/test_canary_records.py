"""Records as pure data: body encoding, request/raw records, route ids, the recorder's seq."""

from __future__ import annotations

import hashlib
import io
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.canary.recorder import Recorder, last_seq, resume_seq, utc_timestamp
from no_docker.canary.records import (
    MAX_BODY_KEPT,
    BodyDigest,
    decode_bytes,
    dumps,
    encode_bytes,
    parse_log,
    raw_record,
    request_record,
    route_of,
)


def request(query: str = "", headers=()) -> dict:
    return request_record(listener="l", conn=1, method="GET", target=f"/v1.50/containers/json?{query}",
                          version="HTTP/1.1", headers=headers, body=BodyDigest(), endpoint="/containers/json",
                          status=200)


def test_a_request_record_keeps_headers_in_order_and_as_sent():
    record = request("all=1&filters=%7B%7D", [(b"Host", b"api.moby.localhost"), (b"X-A", b"\xff\x00"),
                                              (b"host", b"again")])
    assert record["headers"] == [["Host", "api.moby.localhost"], ["X-A", "\xff\x00"], ["host", "again"]]
    assert (record["path"], record["query"]) == ("/v1.50/containers/json", "all=1&filters=%7B%7D")
    assert record["params"] == [["all", "1"], ["filters", "{}"]]
    assert json.loads(dumps(record)) == record


@pytest.mark.parametrize("body", [b"", b'{"Image":"alpine"}', "héllo".encode(), b"\xff\xfe\x00",
                                  bytes(range(256))])
def test_body_text_or_base64_decodes_back(body):
    text, encoding = encode_bytes(body)
    assert decode_bytes(text, encoding) == body
    assert encoding == ("base64" if body in (b"\xff\xfe\x00", bytes(range(256))) else "utf-8")


def test_body_digest_hashes_everything_and_keeps_the_first_mib():
    digest = BodyDigest()
    data = os.urandom(1000) * 1500  # 1.5 MB
    for start in range(0, len(data), 65536):
        digest.feed(data[start:start + 65536])
    fields = digest.fields()
    assert fields["body_len"] == len(data)
    assert fields["body_sha256"] == hashlib.sha256(data).hexdigest()
    assert fields["body_truncated"] is True
    assert decode_bytes(fields["body"], fields["body_encoding"]) == data[:MAX_BODY_KEPT]


def test_raw_record_keeps_the_first_bytes():
    record = raw_record("l", 3, "garbage", "not HTTP/1.x", b"\x00" * 5000)
    assert record["bytes_len"] == 5000 and record["bytes_truncated"] is True
    assert decode_bytes(record["bytes"], "base64") == b"\x00" * 4096


@pytest.mark.parametrize(("query", "headers", "route"), [
    ("route=seed-env-docker-host", (), "seed-env-docker-host"),
    ("filters=" + '{"label":{"no-docker-route=abs-path":true}}', (), "abs-path"),  # docker CLI form
    ("filters=" + '{"label":["no-docker-route=libpod-x"]}', (), "libpod-x"),  # list form
    ("filters=" + '{"label":["other=1","no-docker-route=two"]}', (), "two"),
    ("", ((b"X-No-Docker-Route", b"hdr-route"),), "hdr-route"),
    ("route=Bad_Id", (), None),
    ("filters=%7Bbroken", (), None),
    ("filters=" + '{"label":{"no-docker-route=x":false}}', (), None),
    ("", (), None),
])
def test_route_of(query, headers, route):
    assert route_of(request(query, headers)) == route


def test_route_of_ignores_non_requests_and_odd_shapes():
    assert route_of({"kind": "raw"}) is None
    assert route_of({"kind": "request", "headers": [["x"]], "params": [["route"]]}) is None
    assert route_of({"kind": "request", "query": "route=from-query"}) == "from-query"


def test_json_nested_past_the_stack_is_a_bad_line_or_no_route_never_a_raise():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert route_of(request("filters=" + "[" * 5000 + "]" * 5000)) is None  # a client picks the filter
    [line] = parse_log([deep + b"\n"])
    assert (line.record, line.error) == (None, "not JSON (nested too deep)")
    assert last_seq(b'{"kind":"request","seq":7}\n' + deep + b"\n") == 7


def test_parse_log_reports_bad_lines_instead_of_raising():
    lines = [b'{"kind":"connection","seq":1}\n', b"\n", b'{"kind":"req', b"[1]\n"]
    parsed = list(parse_log(lines))
    assert parsed[0].record == {"kind": "connection", "seq": 1}
    assert [p.number for p in parsed[1:]] == [3, 4] and all(p.record is None for p in parsed[1:])


def test_recorder_assigns_seq_time_and_survives_a_reopen(tmp_path):
    log = tmp_path / "log"
    recorder = Recorder(log)
    first = recorder.write({"kind": "connection", "listener": "l", "conn": 1})
    assert list(first)[:3] == ["kind", "seq", "time"] and first["seq"] == 1
    recorder.close()
    again = Recorder(log)
    assert again.write({"kind": "raw", "listener": "l", "conn": 2})["seq"] == 2
    again.close()
    assert [json.loads(line)["seq"] for line in log.read_bytes().splitlines()] == [1, 2]


def test_last_seq_skips_torn_and_foreign_lines():
    assert last_seq(b'{"seq":7}\n{"seq":8}\n{"se') == 8
    assert last_seq(b"garbage\n") == 0


def test_utc_timestamp():
    assert utc_timestamp(0.5) == "1970-01-01T00:00:00.500000Z"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=8), st.integers(1, 64),
       st.sampled_from([b"", b'{"kind":"req', b"garbage\n", b"\n"]))
def test_resume_seq_finds_the_last_complete_record_whatever_its_length(lengths, block, end):
    lines = [json.dumps({"kind": "request", "seq": n + 1, "body": "x" * size}).encode() + b"\n"
             for n, size in enumerate(lengths)]
    data = b"".join(lines) + end
    assert resume_seq(io.BytesIO(data), len(data), block) == len(lengths)


def test_resume_seq_of_a_log_without_a_record_is_0():
    for data in (b"", b"garbage\n", b'{"kind":"req', b"\n\n"):
        assert resume_seq(io.BytesIO(data), len(data), 4) == 0
