"""T-82: the canary never records fewer requests than a client sent to an engine path.

Every safety figure is a count of canary records ("0 records with isolation"), so a canary
that undercounts could hide an attempt. Issue 27 found two ways: the bytes still queued in
the canary's socket when a connection ended were never read (a client that pipelines ~3300
DELETEs without reading the answers, then closes: only the part read before it stopped
reading was recorded), and an HTTP/1.0 request with ``Transfer-Encoding: chunked`` and a
``Content-Length`` was recorded as one POST, where Go's net/http (the engine's server)
ignores the coding on HTTP/1.0 and executes the DELETE after the body.

In the outer guard, a client on the real engine path ``/run/docker.sock`` does each; the
canary's log must hold every complete request it sent, in order, and the records of the
connection must cover every byte sent.
"""

from __future__ import annotations

import json
import sys

SIZE = len(b"DELETE /v1.50/containers/t82-000000?force=1 HTTP/1.1\r\nHost: docker\r\n\r\n")

# Pipelines fixed-size DELETEs without reading an answer until the socket takes nothing for
# a second (the canary stopped reading it), then closes; prints how many bytes were sent.
PIPELINE = r"""
import json, select, socket, sys, time
payload = b"".join(b"DELETE /v1.50/containers/t82-%06d?force=1 HTTP/1.1\r\nHost: docker\r\n\r\n" % n
                   for n in range(40000))
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(20)
sock.connect(sys.argv[1])
sock.setblocking(False)
sent, deadline = 0, time.monotonic() + 60
while sent < len(payload) and time.monotonic() < deadline:
    if not select.select([], [sock], [], 1.0)[1]:
        break
    try:
        sent += sock.send(payload[sent:sent + 65536])
    except BlockingIOError:
        pass
sock.close()
print(json.dumps({"sent": sent}))
"""

SMUGGLE = r"""
import socket, sys
post = (b"POST /v1.50/containers/create?name=t82 HTTP/1.0\r\nConnection: keep-alive\r\n"
        b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}")
delete = b"DELETE /v1.50/containers/t82-web?force=1 HTTP/1.0\r\n\r\n"
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(20)
sock.connect(sys.argv[1])
sock.sendall(post + delete)
sock.shutdown(socket.SHUT_WR)
while sock.recv(65536):
    pass
sock.close()
"""


def requests_of_one_connection(records: list[dict], prefix: str) -> list[dict]:
    """The request and raw records of the one connection whose requests start with ``prefix``."""
    conns = {(r["listener"], r["conn"]) for r in records
             if r["kind"] == "request" and r["path"].startswith(prefix)}
    assert len(conns) == 1, conns
    (key,) = conns
    mine = [r for r in records if (r["listener"], r["conn"]) == key and r["kind"] in ("request", "raw")]
    return sorted(mine, key=lambda r: r["offset"])


def covers_without_a_gap(records: list[dict], total: int) -> None:
    offset = 0
    for record in records:
        assert record["offset"] == offset, record
        offset += record["bytes_len"]
    assert offset == total


def test_a_client_that_pipelines_and_closes_without_reading_is_counted_whole(guard):
    done = guard.run([sys.executable, "-c", PIPELINE, "/run/docker.sock"], timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-600:]
    sent = json.loads(done.stdout)["sent"]
    complete, rest = divmod(sent, SIZE)
    assert complete > 300  # the canary stopped reading: a part of it waited in the socket
    found = requests_of_one_connection(guard.settled_records(at_least=complete, timeout=10),
                                       "/v1.50/containers/t82-")
    requests = [r for r in found if r["kind"] == "request"]
    assert len(requests) == complete, f"{len(requests)} of {complete} DELETEs sent are recorded"
    assert [r["path"] for r in requests] == [f"/v1.50/containers/t82-{n:06d}" for n in range(complete)]
    assert [r["raw_kind"] for r in found if r["kind"] == "raw"] == (["incomplete"] if rest else [])
    covers_without_a_gap(found, sent)


def test_a_delete_after_an_http_1_0_chunked_post_is_counted_as_go_executes_it(guard):
    done = guard.run([sys.executable, "-c", SMUGGLE, "/run/docker.sock"], timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-600:]
    found = requests_of_one_connection(guard.settled_records(at_least=2), "/v1.50/containers/")
    assert [(r["method"], r["path"], r["body_len"]) for r in found] == [
        ("POST", "/v1.50/containers/create", 2), ("DELETE", "/v1.50/containers/t82-web", 0)]
