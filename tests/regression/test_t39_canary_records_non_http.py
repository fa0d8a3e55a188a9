"""T-39: the canary records what is not HTTP/1.x: garbage, an HTTP/2 preface, a TLS hello.

A gRPC client (containerd, CRI-O, BuildKit) opens with the HTTP/2 preface, a TLS client with
a ClientHello; aiohttp alone would answer the first with 400 and never show either to a
handler, so a canary without its sniffer would report 0 attempts for those routes. Real
clients here: curl with --http2-prior-knowledge on the unix socket, curl over TLS on TCP,
Python's ssl module, and random bytes on a raw socket.
"""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess

import pytest
from no_docker.canary.process import started_canary
from no_docker.canary.records import route_of
from no_docker.canary.sniff import H2_PREFACE

needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")


@pytest.fixture
def canary(tmp_path):
    with started_canary(tmp_path, unix=[str(tmp_path / "run" / "containerd.sock")],
                        tcp=["127.0.0.1:0"]) as running:
        yield running


def raw_records(canary, conn: int | None = None) -> list[dict]:
    return [r for r in canary.records() if r["kind"] == "raw" and (conn is None or r["conn"] == conn)]


def only_conn(canary) -> int:
    conns = {r["conn"] for r in canary.records()}
    assert len(conns) == 1, conns
    return conns.pop()


def assert_still_serves_http(canary) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(canary.listener("unix")["path"])
        sock.sendall(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")


@needs_curl
def test_an_h2_prior_knowledge_client_is_recorded_raw_not_answered_400(canary):
    done = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--unix-socket",
                           canary.listener("unix")["path"], "http://localhost/containerd.v1.Version/Version"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "400" not in done.stdout  # no answer, least of all aiohttp's 400
    conn = only_conn(canary)
    (raw,) = raw_records(canary, conn)
    assert (raw["raw_kind"], raw["summary"]) == ("h2-preface", "h2 preface")
    assert base64.b64decode(raw["bytes"]).startswith(H2_PREFACE)
    assert raw["listener"] == canary.listener("unix")["address"]
    assert_still_serves_http(canary)


@needs_curl
def test_a_tls_client_hello_is_recorded_raw_with_its_sni(canary):
    port = canary.listener("tcp")["port"]
    done = subprocess.run(["curl", "-sS", "-k", "--resolve", f"docker.canary.test:{port}:127.0.0.1",
                           f"https://docker.canary.test:{port}/_ping"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    (raw,) = raw_records(canary, only_conn(canary))
    assert raw["raw_kind"] == "tls"
    assert raw["summary"] == "TLS ClientHello (SNI docker.canary.test)"
    assert base64.b64decode(raw["bytes"])[:2] == b"\x16\x03"
    assert route_of(raw) is None
    assert_still_serves_http(canary)


@needs_curl
def test_a_tls_route_id_in_the_sni_is_counted_for_its_route(canary):
    port = canary.listener("tcp")["port"]
    name = "tls-2376-hello.no-docker-route.invalid"
    done = subprocess.run(["curl", "-sS", "-k", "--resolve", f"{name}:{port}:127.0.0.1",
                           f"https://{name}:{port}/_ping"], capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    (raw,) = raw_records(canary)
    assert route_of(raw) == "tls-2376-hello"


def test_python_ssl_handshake_is_recorded_raw(canary):
    context = ssl.create_default_context()
    address = ("127.0.0.1", canary.listener("tcp")["port"])
    with socket.create_connection(address, timeout=10) as plain, \
            pytest.raises((ssl.SSLError, ConnectionError, OSError)), \
            context.wrap_socket(plain, server_hostname="localhost"):
        pass
    (raw,) = raw_records(canary)
    assert (raw["raw_kind"], raw["summary"]) == ("tls", "TLS ClientHello (SNI localhost)")


@pytest.mark.parametrize("garbage", [b"\x00\xff" * 64, b"SSH-2.0-OpenSSH_9.2p1\r\n", b"HELLO\r\n"])
def test_garbage_is_recorded_raw_and_hung_up_on(canary, garbage):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(canary.listener("unix")["path"])
        sock.sendall(garbage)
        assert sock.recv(4096) == b""  # hung up, nothing said
    (raw,) = raw_records(canary, only_conn(canary))
    assert raw["raw_kind"] == "garbage"
    assert base64.b64decode(raw["bytes"]) == garbage and raw["bytes_len"] == len(garbage)
    assert_still_serves_http(canary)
