"""T-83: a SIGKILLed canary loses nothing it read.

A canary record is written when what it records is complete; half a request head, a body
still coming and what a client sends into the stream after a 101 are recorded only when the
connection ends, and a SIGKILL ends nothing. Before issue 27 those bytes were lost with the
canary. Every piece the canary reads now goes to ``LOG.wire`` before it is framed, and
``canary show`` lists the bytes read that no record covers. A canary holding all three is
SIGKILLed; ``show`` must give back each of them, byte for byte.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time

from no_docker.canary.process import started_canary
from no_docker.canary.recorder import wire_path
from no_docker.canary.records import WireFile, parse_wire


def req(method: str, target: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: docker", *headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def wait_for_wire(log, want: dict[int, bytes], timeout: float = 10.0) -> WireFile:
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
