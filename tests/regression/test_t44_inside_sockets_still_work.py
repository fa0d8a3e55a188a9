"""T-44: sockets made inside the run still work inside, unchanged, with every connect mediated.

The mediation (P12) refuses a pathname socket bound outside; one bound inside must work
whatever its path. Shown two ways: a program that tries every kind (a pathname server in the
run's ``/tmp``, in the work dir and in a ``--rw`` dir, an abstract name, TCP and UDP on
loopback v4 and v6, ``socketpair``, non-blocking connects), and a real pytest suite that uses
them (asyncio unix and TCP servers, ``http.server`` + ``urllib``, ``socketserver`` over a unix
socket), which must pass under ``no-docker run`` exactly as it passes outside.
"""

from __future__ import annotations

import json
import sys

from isolation_cases import inside_python, require_bwrap, run

EVERY_KIND = r"""
import errno, json, os, select, socket, sys, threading
out = {}
def serve_once(listener):
    # a daemon thread that waits 10 s at most: a refused connect ends the script at once, not
    # after the run's timeout (a weakened build once kept the case 60 s)
    listener.settimeout(10)
    conn, _ = listener.accept(); conn.sendall(conn.recv(16).upper()); conn.close()
def pathname(label, path):
    srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(4)
    t = threading.Thread(target=serve_once, args=(srv,), daemon=True); t.start()
    c = socket.socket(socket.AF_UNIX); c.settimeout(5); c.connect(path); c.sendall(b"ping")
    out[label] = c.recv(16).decode(); c.close(); t.join(); srv.close()
pathname("tmp", "/tmp/inside.sock")
pathname("work", os.path.join(os.getcwd(), "inside.sock"))
pathname("rw", os.path.join(sys.argv[1], "inside.sock"))
pathname("relative", "rel.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(b"\0no-docker-t44"); srv.listen(1)
t = threading.Thread(target=serve_once, args=(srv,), daemon=True); t.start()
c = socket.socket(socket.AF_UNIX); c.connect(b"\0no-docker-t44"); c.sendall(b"abs")
out["abstract"] = c.recv(8).decode()
t.join()
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    srv = socket.socket(family); srv.bind((host, 0)); srv.listen(1)
    t = threading.Thread(target=serve_once, args=(srv,), daemon=True); t.start()
    c = socket.create_connection(srv.getsockname()[:2], timeout=5); c.sendall(b"tcp")
    out[f"tcp{family}"] = c.recv(8).decode(); c.close(); t.join()
    u = socket.socket(family, socket.SOCK_DGRAM); u.bind((host, 0))
    v = socket.socket(family, socket.SOCK_DGRAM); v.connect(u.getsockname()[:2]); v.send(b"udp")
    out[f"udp{family}"] = u.recv(8).decode()
    nb = socket.socket(family); nb.setblocking(False)
    code = nb.connect_ex(srv.getsockname()[:2])
    out[f"nonblocking-refused{family}"] = code if code else select.select([], [nb], [], 5) and nb.getsockopt(
        socket.SOL_SOCKET, socket.SO_ERROR)
a, b = socket.socketpair(); a.sendall(b"pair"); out["socketpair"] = b.recv(8).decode()
print(json.dumps(out, sort_keys=True))
"""

SUITE = r'''
import asyncio, http.server, os, socket, socketserver, threading, urllib.request


def test_asyncio_unix_and_tcp(tmp_path):
    async def main():
        async def echo(reader, writer):
            writer.write((await reader.readline()).upper()); await writer.drain(); writer.close()
        unix = await asyncio.start_unix_server(echo, path=str(tmp_path / "a.sock"))
        tcp = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = tcp.sockets[0].getsockname()[1]
        got = []
        for opener in (lambda: asyncio.open_unix_connection(str(tmp_path / "a.sock")),
                       lambda: asyncio.open_connection("127.0.0.1", port)):
            reader, writer = await opener()
            writer.write(b"hi\n"); await writer.drain()
            got.append(await reader.readline()); writer.close()
        unix.close(); tcp.close()
        return got
    assert asyncio.run(main()) == [b"HI\n", b"HI\n"]


def test_http_server_and_urllib():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/", timeout=5) as answer:
            assert answer.status == 200
    finally:
        server.shutdown()


def test_socketserver_over_a_unix_socket(tmp_path):
    class Echo(socketserver.StreamRequestHandler):
        def handle(self):
            self.wfile.write(self.rfile.readline().strip()[::-1] + b"\n")
    path = str(tmp_path / "ss.sock")
    with socketserver.ThreadingUnixStreamServer(path, Echo) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        c = socket.socket(socket.AF_UNIX); c.connect(path); c.sendall(b"abc\n")
        assert c.makefile("rb").readline() == b"cba\n"
        server.shutdown()
'''


def test_every_kind_of_inside_socket_works(tmp_path):
    require_bwrap()
    rw = tmp_path / "rw"
    rw.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    result = run(["--quiet", "--rw", str(rw), "--", *inside_python(EVERY_KIND), str(rw)], cwd=work)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    assert {k: v for k, v in said.items() if not k.startswith("nonblocking")} == {
        "tmp": "PING", "work": "PING", "rw": "PING", "relative": "PING", "abstract": "ABS",
        "tcp2": "TCP", "tcp10": "TCP", "udp2": "udp", "udp10": "udp", "socketpair": "pair"}, said
    assert "connects refused" not in result.stderr


def test_a_real_test_suite_using_sockets_passes_unchanged(tmp_path):
    require_bwrap()
    work = tmp_path / "project"
    work.mkdir()
    (work / "test_sockets.py").write_text(SUITE)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:no_docker",
            "test_sockets.py"]
    result = run(["--quiet", "--", *argv], cwd=work, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout, result.stdout
