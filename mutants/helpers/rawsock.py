"""no-docker raw-socket route helper: one read-only hello to one local endpoint.

Pinned in mutants/pins.json and embedded verbatim in the payload; runs with ``python3 -I -S``
(stdlib only). It connects to a unix path, an abstract unix name or a loopback TCP port,
sends ONE read-only message and prints what came back on one line:

  http    GET /_ping?route=ID (Docker API), route id also in X-No-Docker-Route
  libpod  GET /v4.0.0/libpod/_ping?route=ID (Podman)
  h2      the HTTP/2 client preface and an empty SETTINGS frame (gRPC: containerd, CRI, BuildKit)
  tls     a TLS ClientHello (SNI ID.no-docker-route.invalid), then GET /_ping?route=ID

Exit status: 0 reached (connected and the message went out), 1 failed (no such socket,
refused, timeout), 69 unavailable (an endpoint it refuses to use), 2 usage.
It refuses every TCP host that is not loopback: traffic never leaves the machine.
"""

import ipaddress
import re
import socket
import ssl
import sys

EXIT_REACHED, EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_USAGE = 0, 1, 69, 2
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
PATHS = {"http": "/_ping", "libpod": "/v4.0.0/libpod/_ping", "tls": "/_ping"}
# The route id goes into the request line, a header and the TLS SNI: only these characters
# (a CR LF in it would end the request and start another one). The lint checks the same
# pattern (lint_rules.ROUTE_ID); the helper checks it by itself, whatever the lint said.
ROUTE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
OPTIONS = ("--route", "--unix", "--abstract", "--tcp", "--url", "--proto", "--timeout")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Refused(Exception):
    """An endpoint the helper will not touch (exit 69)."""


def http_get(path: str, route: str) -> bytes:
    return (
        f"GET {path}?route={route} HTTP/1.1\r\nHost: d\r\nUser-Agent: no-docker-rawsock\r\n"
        f"X-No-Docker-Route: {route}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")


def loopback_tcp(hostport: str) -> tuple:
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise Refused(f"not HOST:PORT: {hostport!r}")
    host = host.strip("[]")
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise Refused(f"non-loopback host {host!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return family, (host, int(port))


def endpoint(kind: str, value: str) -> tuple:
    """(family, address) for --unix/--abstract/--tcp/--url VALUE."""
    if kind == "url":
        if value.startswith("unix://"):
            return endpoint("unix", value[len("unix://"):])
        if value.startswith("tcp://"):
            return endpoint("tcp", value[len("tcp://"):].split("/", 1)[0])
        raise Refused(f"unsupported url {value!r}")
    if kind == "unix":
        return socket.AF_UNIX, value
    if kind == "abstract":
        return socket.AF_UNIX, "\0" + value
    if kind == "tcp":
        return loopback_tcp(value)
    raise Refused(f"unknown endpoint kind {kind!r}")


def first_line(data: bytes) -> str:
    text = data.split(b"\r\n", 1)[0][:80].decode("ascii", "replace")
    return text if data else "no answer"


def attempt(family: int, address: object, proto: str, route: str, timeout: float) -> str:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        if proto == "h2":
            sock.sendall(H2_PREFACE + H2_EMPTY_SETTINGS)
            return f"h2 preface sent; answer {sock.recv(64)[:9].hex() or 'none'}"
        if proto == "tls":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            try:
                with context.wrap_socket(sock, server_hostname=f"{route}.no-docker-route.invalid") as tls:
                    tls.sendall(http_get(PATHS["tls"], route))
                    return f"tls hello sent; answer {first_line(tls.recv(256))}"
            except (ssl.SSLError, ConnectionError) as err:
                return f"tls hello sent; handshake ended: {type(err).__name__}"
        sock.sendall(http_get(PATHS[proto], route))
        return f"answer {first_line(sock.recv(256))}"


def main(argv: list) -> int:
    opts = dict(zip(argv[::2], argv[1::2], strict=False))
    kinds = [k for k in ("--unix", "--abstract", "--tcp", "--url") if k in opts]
    proto = opts.get("--proto", "http")
    route = opts.get("--route", "")
    well_formed = (len(argv) % 2 == 0 and len(opts) == len(argv) // 2 and set(opts) <= set(OPTIONS)
                   and not any(CONTROL.search(v) for v in opts.values()))
    if (not well_formed or len(kinds) != 1 or proto not in ("http", "libpod", "h2", "tls")
            or not ROUTE_ID.fullmatch(route)):
        print("usage: rawsock --route ID (--unix P|--abstract N|--tcp H:P|--url U) [--proto P]")
        return EXIT_USAGE
    try:
        family, address = endpoint(kinds[0][2:], opts[kinds[0]])
    except (Refused, ValueError) as err:
        print(f"refused: {err}")
        return EXIT_UNAVAILABLE
    try:
        print(attempt(family, address, proto, route, float(opts.get("--timeout", "2"))))
    except OSError as err:
        print(f"{type(err).__name__}: {err.strerror or err}")
        return EXIT_FAILED
    return EXIT_REACHED


sys.exit(main(sys.argv[1:]))
