"""T-77: the canary never counts fewer requests than an engine's Go server executes (rt4 C1, C2).

dockerd and podman serve their API with Go's net/http. Go's ``textproto.ReadMIMEHeader``
joins a folded header line (obs-fold) to the line before it, and nothing in Go limits a line:
what limits a head is the read limit, 1 MiB (``DefaultMaxHeaderBytes``, which neither engine
changes) plus 4096 bytes of bufio slop. The canary refused both (a folded line was a "bad
header line", a line over 8190 bytes or a head over 64 KiB "too long"), and recorded what
followed as one ``bad-http`` raw record: 0 requests where Go executes the DELETE.

Each case sends the bytes with a real client (a raw socket; curl) to a real canary, and holds
the canary's records against what the model of Go's server (``tests/canary_wire_model.py``)
says Go executes of the same bytes: the control, since no engine is ever started here.
"""

from __future__ import annotations

import socket
import subprocess

from no_docker.canary.process import started_canary
from no_docker.canary.records import parse_log
from no_docker.canary.show import render, summarize

from tests.canary_wire_model import go_reads

FOLDED = (b"GET /_ping HTTP/1.1\r\nHost: d\r\nX-A: a\r\n b\r\n\r\n"
          b"DELETE /containers/web?force=1 HTTP/1.1\r\nHost: d\r\n\r\n")


def requests_and_raws(canary) -> tuple[list[tuple[str, str, str]], list[dict]]:
    records = canary.records()
    requests = [(r["method"], r["path"], r["query"]) for r in records if r["kind"] == "request"]
    return requests, [r for r in records if r["kind"] == "raw"]


def shown(canary) -> str:
    with canary.log.open("rb") as log:
        return render(summarize(parse_log(log)))


def test_a_folded_header_line_then_a_pipelined_delete_is_two_requests(tmp_path):
    go = go_reads(FOLDED)  # control: Go executes both, the ping's X-A header is "a b"
    assert [(method, target) for method, target, _ in go.requests] == [
        ("GET", "/_ping"), ("DELETE", "/containers/web?force=1")] and go.rejects is None
    path = str(tmp_path / "docker.sock")
    with started_canary(tmp_path, unix=[path]) as canary:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(20)
            sock.connect(path)
            sock.sendall(FOLDED)
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert canary.stop() == 0 and canary.complaints() == ""
        requests, raws = requests_and_raws(canary)
        ping = next(r for r in canary.records() if r["kind"] == "request")
        text = shown(canary)
    assert requests == [("GET", "/_ping", ""), ("DELETE", "/containers/web", "force=1")] and raws == []
    assert ["X-A", "a b"] in ping["headers"]
    assert answer.count(b"HTTP/1.1 200 ") == 1 and answer.count(b"HTTP/1.1 204 ") == 1
    assert "2 requests, 0 raw" in text, text


def test_a_long_request_line_and_a_big_head_from_curl_are_requests(tmp_path):
    path = str(tmp_path / "docker.sock")
    pad = "A" * 9000  # rt4: over the canary's old 8190-byte line limit
    big = [arg for n in range(10) for arg in ("-H", f"X-Pad-{n}: {'B' * 7000}")]  # 70 KB: over 64 KiB
    with started_canary(tmp_path, unix=[path]) as canary:
        for extra in ([f"http://d/containers/web?force=1&pad={pad}"], [*big, "http://d/containers/big?force=1"]):
            done = subprocess.run(["curl", "-sS", "--max-time", "20", "--unix-socket", path, "-X", "DELETE",
                                   "-o", "/dev/null", "-w", "%{http_code}", *extra],
                                  capture_output=True, text=True, timeout=30, check=False)
            assert (done.returncode, done.stdout) == (0, "204"), done.stderr
        assert canary.stop() == 0 and canary.complaints() == ""
        requests, raws = requests_and_raws(canary)
        heads = [r for r in canary.records() if r["kind"] == "request"]
        text = shown(canary)
    assert requests == [("DELETE", "/containers/web", f"force=1&pad={pad}"),
                        ("DELETE", "/containers/big", "force=1")] and raws == []
    assert sum(1 for name, _ in heads[1]["headers"] if name.startswith("X-Pad-")) == 10
    assert "2 requests, 0 raw" in text, text
    # control: the model of Go's server executes both heads as curl sends them
    line = f"DELETE /containers/web?force=1&pad={pad} HTTP/1.1\r\nHost: d\r\n\r\n".encode()
    head = ("DELETE /containers/big?force=1 HTTP/1.1\r\nHost: d\r\n" +
            "".join(f"X-Pad-{n}: {'B' * 7000}\r\n" for n in range(10)) + "\r\n").encode()
    assert len(go_reads(line).requests) == 1 and len(go_reads(head).requests) == 1


# Found reading the Go source for C1/C2, and checked against a real Go 1.19.8 net/http server
# (the Go the podman on this machine is built with): each executes the POST/GET and the DELETE.
OLDER_GO = {
    "empty Content-Length": b"POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: \r\n\r\n",
    "chunked, bad Content-Length": b"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n"
                                   b"Content-Length: x\r\n\r\n0\r\n\r\n",
    "chunked, two Content-Lengths": b"POST /x HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n"
                                    b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n0\r\n\r\n",
    "empty header name": b"GET /x HTTP/1.1\r\nHost: d\r\n: v\r\n\r\n",
}
DELETE = b"DELETE /containers/web?force=1 HTTP/1.1\r\nHost: d\r\n\r\n"


def test_what_older_go_executes_is_counted_too(tmp_path):
    path = str(tmp_path / "docker.sock")
    for name, data in OLDER_GO.items():  # control: the model (older Go where versions differ)
        assert len(go_reads(data + DELETE).requests) == 2, name
    with started_canary(tmp_path, unix=[path]) as canary:
        for data in OLDER_GO.values():
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(20)
                sock.connect(path)
                sock.sendall(data + DELETE)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):
                    pass
        assert canary.stop() == 0 and canary.complaints() == ""
        requests, raws = requests_and_raws(canary)
    assert raws == [] and [path for _, path, _ in requests] == [
        path for data in OLDER_GO.values() for path in (data.split(b" ")[1].decode(), "/containers/web")]
