"""The request-boundary classifier: HTTP/1.x is framed as requests, everything else is recorded raw."""

from __future__ import annotations

import pytest
from no_docker.canary.sniff import H2_PREFACE, MAX_REQUEST_LINE, Kind, client_hello_sni, sniff

# A real ClientHello (curl 7.88, SNI "localhost"), cut after the server_name extension.
CLIENT_HELLO = bytes.fromhex(
    "16030100f4010000f00303" + "11" * 32 + "20" + "22" * 32 + "0008130213031301c02c" + "0100"
    + "009f" + "0000000e000c0000096c6f63616c686f7374" + "000b000403000102")


@pytest.mark.parametrize("first", [
    b"GET /_ping HTTP/1.1\r\n", b"HEAD /_ping HTTP/1.0\r\n",
    b"POST /v1.50/containers/create HTTP/1.1\r\nHost",
    b"DELETE /images/docker.io/library/alpine:latest?force=1 HTTP/1.1\n", b"M-SEARCH * HTTP/1.1\r\n",
])
def test_http1_request_lines(first):
    assert sniff(first).kind is Kind.HTTP1


@pytest.mark.parametrize("prefix", [b"G", b"GET", b"GET ", b"GET /_pi", b"GET /_ping ",
                                    b"GET /_ping HTTP/1.", b"GET /_ping HTTP/1.1", b"GET /_ping HTTP/1.1\r",
                                    b"PRI * HTTP/2", b"\x16"])
def test_a_prefix_that_could_still_become_http_waits_for_more(prefix):
    assert sniff(prefix).kind is Kind.NEED_MORE
    at_eof = sniff(prefix, eof=True)
    assert (at_eof.kind, at_eof.raw_kind) == (Kind.RAW, "incomplete")


@pytest.mark.parametrize(("data", "raw_kind", "summary"), [
    (H2_PREFACE, "h2-preface", "h2 preface"),
    (H2_PREFACE + b"\x00\x00\x12\x04\x00\x00\x00\x00\x00", "h2-preface", "h2 preface"),
    (CLIENT_HELLO, "tls", "TLS ClientHello (SNI localhost)"),
    (b"\x16\x03\x01\x00\x05\x02", "tls", "TLS"),
    (b"\x00\x01\x02", "garbage", "not HTTP/1.x"),
    (b"GET /_ping HTTP/2.0\r\n", "garbage", "not HTTP/1.x"),
    (b"GET  /_ping HTTP/1.1\r\n", "garbage", "not HTTP/1.x"),
    (b"GET /_ping\r\n", "garbage", "not HTTP/1.x"),  # HTTP/0.9
    (b"SSH-2.0-OpenSSH_9.2\r\n", "garbage", "not HTTP/1.x"),
    (b"G\x00T", "garbage", "not HTTP/1.x"),
    (b"GET /" + b"a" * MAX_REQUEST_LINE, "garbage", "request line too long"),
    (b"", "incomplete", "closed before any byte"),
])
def test_raw_verdicts(data, raw_kind, summary):
    verdict = sniff(data, eof=not data)
    assert (verdict.kind, verdict.raw_kind, verdict.summary) == (Kind.RAW, raw_kind, summary)


def test_sni_of_a_client_hello_and_of_its_truncations():
    assert client_hello_sni(CLIENT_HELLO) == "localhost"
    for cut in range(len(CLIENT_HELLO) - 8):  # cut before the name is whole: no name, no exception
        assert client_hello_sni(CLIENT_HELLO[:cut]) is None
