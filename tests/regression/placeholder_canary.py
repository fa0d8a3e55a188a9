"""A stand-in for the canary (stdlib only) with the contract's command line and log format.

Used by the outer guard's own tests while ``python -m no_docker.canary`` does not exist, and
as a second, independent witness afterwards. ``python placeholder_canary.py serve --unix P
--tcp H:P --abstract N --log F --mode answer|refuse --ready R``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time
from urllib.parse import urlsplit

_lock = threading.Lock()
_seq = 0


def _record(log, **fields) -> None:
    global _seq
    with _lock:
        _seq += 1
        log.write(json.dumps({"seq": _seq, "time": time.time(), **fields}) + "\n")
        log.flush()


def _serve_conn(conn: socket.socket, listener: str, conn_id: int, log, mode: str) -> None:
    with conn:
        peer: object = None
        if conn.family == socket.AF_UNIX:
            pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            peer = {"pid": pid, "uid": uid, "gid": gid}
        _record(log, kind="connection", listener=listener, conn=conn_id, peer=peer)
        conn.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        head = data.split(b"\r\n\r\n")[0].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) == 3 and parts[2].startswith("HTTP/1."):
            url = urlsplit(parts[1])
            headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
            _record(log, kind="request", listener=listener, conn=conn_id, method=parts[0], path=url.path,
                    query=url.query, headers=[[n.strip(), v.strip()] for n, v in headers],
                    body_len=0, body_sha256="", body="")
            status = "200 OK" if mode == "answer" else "500 Internal Server Error"
            conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK".encode())
        elif data:
            _record(log, kind="raw", listener=listener, conn=conn_id, data=data[:64].hex())


def _accept_loop(sock: socket.socket, listener: str, log, mode: str, counter: list[int]) -> None:
    while True:
        conn, _ = sock.accept()
        with _lock:
            counter[0] += 1
            conn_id = counter[0]
        threading.Thread(target=_serve_conn, args=(conn, listener, conn_id, log, mode), daemon=True).start()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--unix", action="append", default=[])
    parser.add_argument("--tcp", action="append", default=[])
    parser.add_argument("--abstract", action="append", default=[])
    parser.add_argument("--log", required=True)
    parser.add_argument("--mode", default="answer")
    parser.add_argument("--ready")
    args = parser.parse_args(argv)
    log = open(args.log, "a")  # noqa: SIM115
    listeners = []
    socks = []
    for path in args.unix:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        socks.append((sock, path))
        listeners.append({"kind": "unix", "address": path, "path": path})
    for name in args.abstract:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("\0" + name)
        socks.append((sock, name))
        listeners.append({"kind": "abstract", "address": name, "name": name})
    for address in args.tcp:
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        socks.append((sock, address))
        listeners.append({"kind": "tcp", "address": address, "host": host, "port": sock.getsockname()[1]})
    counter = [0]
    for sock, listener in socks:
        sock.listen(64)
        threading.Thread(target=_accept_loop, args=(sock, listener, log, args.mode, counter),
                         daemon=True).start()
    if args.ready:
        with open(args.ready + ".tmp", "w") as fh:
            json.dump({"pid": os.getpid(), "listeners": listeners}, fh)
        os.replace(args.ready + ".tmp", args.ready)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
