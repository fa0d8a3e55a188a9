#!/usr/bin/env bash
# no-docker mutant payload "reach-engine": tries every known route from a script to a
# container engine (DESIGN §7), one block per route, and asks only read-only questions
# (docker ps/images/version/info, GET/HEAD /_ping, a libpod ping, an HTTP/2 preface or a TLS
# hello). If the isolation ever failed against a real engine, nothing would be changed.
#
# Each block starts with a tag line `# route: ID (network|persistence) description`; the
# request carries ID where the protocol allows (label filter, ?route=ID, X-No-Docker-Route)
# and the block appends one line `ID attempted OUTCOME [detail]` to the route log:
#   reached      an engine answered (or accepted the preface/hello)
#   failed       no answer: no such socket, refused, timeout
#   unavailable  the tool is missing (detail says which) - never a silent pass
#   written      a persistence probe could open the file for writing (bad under isolation)
#   blocked      a persistence probe could not
# Persistence probes append ZERO bytes: they prove writability without changing a file.
# Every attempt is bounded by `timeout`, so the payload ends within seconds when nothing
# answers. Any change to this file needs `no-docker mutants review --accept` (docs/mutants.md).

route_log=${NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log}
limit=3
# The podman CLI is a 40 MB Go binary: its first start on a fresh machine, from a cold page
# cache and under load, took more than 3 s (CI, 2026-12-02: the control missed podman-cli with
# "timeout after 3s"; against the canary it answers in 0.02 s once cached). It fails in under
# a second when no engine answers, so the longer bound costs nothing inside a run.
cold_limit=15

# note ID OUTCOME [DETAIL]: one line in the route log, detail flattened to one short line.
note() {
  local detail=${3:-}
  detail=${detail//$'\n'/ }
  detail=${detail//$'\r'/}
  printf '%s attempted %s%s\n' "$1" "$2" "${detail:+ ${detail:0:160}}" >> "$route_log"
}

# judge ID STATUS OUTPUT [LIMIT]: the outcome of one network attempt from its exit status.
# timeout(1) exits 124 when time ran out and 127 when the tool does not exist; the pinned
# helpers exit 69 when they cannot make the attempt (docker-py missing, non-loopback host).
judge() {
  local last=${3:-}
  last=${last%$'\n'}
  last=${last##*$'\n'}
  case $2 in
    0) note "$1" reached "$last" ;;
    124 | 137) note "$1" failed "timeout after ${4:-$limit}s" ;;
    126 | 127 | 69) note "$1" unavailable "${last:-exit $2}" ;;
    *) note "$1" failed "exit $2: $last" ;;
  esac
}

# persisted ID STATUS ERROR: the outcome of one zero-byte persistence probe.
persisted() {
  if [ "$2" = 0 ]; then
    note "$1" written
  else
    note "$1" blocked "$3"
  fi
}

# have ID TOOL: true when TOOL exists; otherwise logs the route as unavailable.
have() {
  if command -v "$2" > /dev/null 2>&1; then
    return 0
  fi
  note "$1" unavailable "$2 not found"
  return 1
}

# rawsock ARGS...: the pinned raw-socket helper (mutants/helpers/rawsock.py, verbatim; the
# lint accepts this heredoc only when its sha256 is the helper's pin).
rawsock() {
  timeout -k 1 "$limit" python3 -I -S - "$@" <<'NO_DOCKER_HELPER'
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
NO_DOCKER_HELPER
}

# dockerpy_route ID: the pinned docker-py helper (mutants/helpers/dockerpy_route.py, verbatim).
dockerpy_route() {
  timeout -k 1 "$limit" python3 -I - "$@" <<'NO_DOCKER_HELPER'
"""no-docker docker-py route helper: docker.from_env() lists containers by route label.

Pinned in mutants/pins.json and embedded verbatim in the payload; runs with ``python3 -I``.
The only requests are docker-py's version negotiation and GET /containers/json with the
filter label=no-docker-route=ID: read-only. Exit 0 reached, 1 failed, 69 docker-py missing.
"""

import sys

route = sys.argv[1] if len(sys.argv) == 2 else ""
if not route:
    print("usage: dockerpy_route ROUTE-ID")
    sys.exit(2)
try:
    import docker
except ImportError as err:
    print(f"docker-py not importable: {err}")
    sys.exit(69)
try:
    listed = docker.from_env(timeout=2).containers.list(filters={"label": f"no-docker-route={route}"})
except Exception as err:  # docker-py wraps socket errors in several types
    print(f"{type(err).__name__}: {str(err)[:120]}")
    sys.exit(1)
print(f"listed {len(listed)} containers")
sys.exit(0)
NO_DOCKER_HELPER
}

# ---- the 22 seed routes ------------------------------------------------------------------

# route: docker-host-inherited (network) docker with whatever DOCKER_HOST the script inherited
out=$(timeout -k 1 "$limit" docker ps --filter label=no-docker-route=docker-host-inherited 2>&1 < /dev/null)
judge docker-host-inherited "$?" "DOCKER_HOST=${DOCKER_HOST:-unset} ${out}"

# route: path-lookup (network) docker found by PATH lookup, default endpoint
out=$(timeout -k 1 "$limit" env -u DOCKER_HOST -u DOCKER_CONTEXT docker ps --filter label=no-docker-route=path-lookup 2>&1 < /dev/null)
judge path-lookup "$?" "$out"

# route: abs-usr-bin (network) docker by absolute path /usr/bin/docker
out=$(timeout -k 1 "$limit" /usr/bin/docker ps --filter label=no-docker-route=abs-usr-bin 2>&1 < /dev/null)
judge abs-usr-bin "$?" "$out"

# route: abs-usr-local-bin (network) docker by absolute path /usr/local/bin/docker
out=$(timeout -k 1 "$limit" /usr/local/bin/docker ps --filter label=no-docker-route=abs-usr-local-bin 2>&1 < /dev/null)
judge abs-usr-local-bin "$?" "$out"

# route: command-builtin (network) the `command` builtin bypasses functions and aliases
out=$(timeout -k 1 "$limit" bash -c 'command docker ps --filter label=no-docker-route=command-builtin' 2>&1 < /dev/null)
judge command-builtin "$?" "$out"

# route: env-wrapper (network) docker started through env(1)
out=$(timeout -k 1 "$limit" env docker ps --filter label=no-docker-route=env-wrapper 2>&1 < /dev/null)
judge env-wrapper "$?" "$out"

# route: docker-context-flag (network) docker --context default: the built-in default context
out=$(timeout -k 1 "$limit" docker --context default ps --filter label=no-docker-route=docker-context-flag 2>&1 < /dev/null)
judge docker-context-flag "$?" "$out"

# route: bash-c (network) a nested bash -c string
out=$(timeout -k 1 "$limit" bash -c 'docker ps --filter label=no-docker-route=bash-c' 2>&1 < /dev/null)
judge bash-c "$?" "$out"

# route: sh-c (network) a nested sh -c string
out=$(timeout -k 1 "$limit" sh -c 'docker ps --filter label=no-docker-route=sh-c' 2>&1 < /dev/null)
judge sh-c "$?" "$out"

# route: command-substitution (network) docker inside $(...) inside an argument
# shellcheck disable=SC2016  # the $(...) must expand in the inner bash, not here
out=$(timeout -k 1 "$limit" bash -c 'listing=$(docker ps --filter label=no-docker-route=command-substitution 2>&1) && printf "%s\n" "$listing"' 2>&1 < /dev/null)
judge command-substitution "$?" "$out"

# route: backticks (network) docker inside legacy backticks
# shellcheck disable=SC2006
out=`timeout -k 1 "$limit" docker ps --filter label=no-docker-route=backticks 2>&1 < /dev/null`
judge backticks "$?" "$out"

# route: variable-name (network) the command name comes from a variable
engine=docker
out=$(timeout -k 1 "$limit" "$engine" ps --filter label=no-docker-route=variable-name 2>&1 < /dev/null)
judge variable-name "$?" "$out"

# route: quoted-name (network) the command name is split by quotes: "dock"er
out=$(timeout -k 1 "$limit" "dock"er ps --filter label=no-docker-route=quoted-name 2>&1 < /dev/null)
judge quoted-name "$?" "$out"

# route: exec (network) exec replaces a subshell with docker
out=$(exec timeout -k 1 "$limit" docker ps --filter label=no-docker-route=exec 2>&1 < /dev/null)
judge exec "$?" "$out"

# route: xargs (network) xargs starts docker (empty input: runs it once)
out=$(timeout -k 1 "$limit" xargs docker ps --filter label=no-docker-route=xargs 2>&1 < /dev/null)
judge xargs "$?" "$out"

# route: background-subshell (network) docker in a background subshell, then wait
(timeout -k 1 "$limit" docker ps --filter label=no-docker-route=background-subshell > /dev/null 2>&1 < /dev/null) &
wait "$!"
judge background-subshell "$?" ""

# route: sudo (network) docker through sudo -n (never prompts)
out=$(timeout -k 1 "$limit" sudo -n docker ps --filter label=no-docker-route=sudo 2>&1 < /dev/null)
judge sudo "$?" "$out"

# route: curl-unix-socket (network) curl GET /_ping over /run/docker.sock
out=$(timeout -k 1 "$limit" curl -q -sS -o /dev/null -w '%{http_code}' --max-time 2 --unix-socket /run/docker.sock -H 'X-No-Docker-Route: curl-unix-socket' 'http://d/_ping?route=curl-unix-socket' 2>&1 < /dev/null)
judge curl-unix-socket "$?" "$out"

# route: raw-python-socket (network) a raw AF_UNIX socket from Python to /var/run/docker.sock
out=$(rawsock --route raw-python-socket --unix /var/run/docker.sock --proto http 2>&1)
judge raw-python-socket "$?" "$out"

# route: var-run-docker-sock (network) docker -H unix:///var/run/docker.sock
out=$(timeout -k 1 "$limit" docker -H unix:///var/run/docker.sock ps --filter label=no-docker-route=var-run-docker-sock 2>&1 < /dev/null)
judge var-run-docker-sock "$?" "$out"

# route: run-docker-sock (network) docker -H unix:///run/docker.sock
out=$(timeout -k 1 "$limit" docker -H unix:///run/docker.sock ps --filter label=no-docker-route=run-docker-sock 2>&1 < /dev/null)
judge run-docker-sock "$?" "$out"

# route: home-docker-run-sock (network) Docker Desktop (macOS layout) ~/.docker/run/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://$HOME/.docker/run/docker.sock" ps --filter label=no-docker-route=home-docker-run-sock 2>&1 < /dev/null)
judge home-docker-run-sock "$?" "$out"

# ---- further network routes ---------------------------------------------------------------

# route: tcp-loopback-2375 (network) DOCKER_HOST=tcp://127.0.0.1:2375, the plain API port
out=$(DOCKER_HOST=tcp://127.0.0.1:2375 timeout -k 1 "$limit" docker ps --filter label=no-docker-route=tcp-loopback-2375 2>&1 < /dev/null)
judge tcp-loopback-2375 "$?" "$out"

# route: tcp-ipv6-loopback-2375 (network) DOCKER_HOST=tcp://[::1]:2375
out=$(DOCKER_HOST='tcp://[::1]:2375' timeout -k 1 "$limit" docker ps --filter label=no-docker-route=tcp-ipv6-loopback-2375 2>&1 < /dev/null)
judge tcp-ipv6-loopback-2375 "$?" "$out"

# The context routes read docker configs made here, in the run directory: a context named
# no-docker-route whose endpoint is the engine socket, and no-docker-route-tls whose endpoint
# is the TLS port with SkipTLSVerify (TLS without client certificates). A context's meta dir is
# the sha256 of its name.
ctx_meta=contexts/meta/9fc5a3641ec9e36737c64b08360d0644bf237cd13c966c4eec0b45a9660fe9a8
tls_meta=contexts/meta/abc83e155b1811c75f026b5cd7bac77fe009fc02b6867a38f7ea4a20b4efcef0
mkdir -p "./no-docker-route-config/$ctx_meta" "./no-docker-route-config/$tls_meta" "./no-docker-route-config-current/$ctx_meta"
printf '%s\n' '{"Name":"no-docker-route","Metadata":{},"Endpoints":{"docker":{"Host":"unix:///run/docker.sock","SkipTLSVerify":false}}}' > "./no-docker-route-config/$ctx_meta/meta.json"
printf '%s\n' '{"Name":"no-docker-route","Metadata":{},"Endpoints":{"docker":{"Host":"unix:///run/docker.sock","SkipTLSVerify":false}}}' > "./no-docker-route-config-current/$ctx_meta/meta.json"
printf '%s\n' '{"Name":"no-docker-route-tls","Metadata":{},"Endpoints":{"docker":{"Host":"tcp://127.0.0.1:2376","SkipTLSVerify":true}}}' > "./no-docker-route-config/$tls_meta/meta.json"
printf '%s\n' '{}' > ./no-docker-route-config/config.json
printf '%s\n' '{"currentContext":"no-docker-route"}' > ./no-docker-route-config-current/config.json

# route: tls-2376-cli (network) docker over TLS to tcp://127.0.0.1:2376 via a SkipTLSVerify context
out=$(timeout -k 1 "$limit" docker --config ./no-docker-route-config --context no-docker-route-tls ps --filter label=no-docker-route=tls-2376-cli 2>&1 < /dev/null)
judge tls-2376-cli "$?" "$out"

# route: tls-2376-hello (network) a TLS ClientHello to 127.0.0.1:2376 (SNI carries the route)
out=$(rawsock --route tls-2376-hello --tcp 127.0.0.1:2376 --proto tls 2>&1)
judge tls-2376-hello "$?" "$out"

# route: legacy-4243 (network) DOCKER_HOST=tcp://127.0.0.1:4243, a legacy API port
out=$(DOCKER_HOST=tcp://127.0.0.1:4243 timeout -k 1 "$limit" docker ps --filter label=no-docker-route=legacy-4243 2>&1 < /dev/null)
judge legacy-4243 "$?" "$out"

# route: docker-context-env (network) DOCKER_CONTEXT names a context whose endpoint is the engine
out=$(DOCKER_CONFIG=./no-docker-route-config DOCKER_CONTEXT=no-docker-route timeout -k 1 "$limit" docker ps --filter label=no-docker-route=docker-context-env 2>&1 < /dev/null)
judge docker-context-env "$?" "$out"

# route: current-context (network) currentContext in config.json selects that context
out=$(DOCKER_CONFIG=./no-docker-route-config-current timeout -k 1 "$limit" env -u DOCKER_HOST -u DOCKER_CONTEXT docker ps --filter label=no-docker-route=current-context 2>&1 < /dev/null)
judge current-context "$?" "$out"

# route: rootless-xdg (network) rootless Docker at $XDG_RUNTIME_DIR/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://${XDG_RUNTIME_DIR:-/run/user/$UID}/docker.sock" ps --filter label=no-docker-route=rootless-xdg 2>&1 < /dev/null)
judge rootless-xdg "$?" "$out"

# route: docker-desktop-linux (network) Docker Desktop for Linux ~/.docker/desktop/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://$HOME/.docker/desktop/docker.sock" ps --filter label=no-docker-route=docker-desktop-linux 2>&1 < /dev/null)
judge docker-desktop-linux "$?" "$out"

# route: colima (network) Colima ~/.colima/default/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://$HOME/.colima/default/docker.sock" ps --filter label=no-docker-route=colima 2>&1 < /dev/null)
judge colima "$?" "$out"

# route: rancher-desktop (network) Rancher Desktop ~/.rd/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://$HOME/.rd/docker.sock" ps --filter label=no-docker-route=rancher-desktop 2>&1 < /dev/null)
judge rancher-desktop "$?" "$out"

# route: orbstack (network) OrbStack ~/.orbstack/run/docker.sock
out=$(timeout -k 1 "$limit" docker -H "unix://$HOME/.orbstack/run/docker.sock" ps --filter label=no-docker-route=orbstack 2>&1 < /dev/null)
judge orbstack "$?" "$out"

# route: podman-rootful-libpod (network) libpod ping on /run/podman/podman.sock
out=$(rawsock --route podman-rootful-libpod --unix /run/podman/podman.sock --proto libpod 2>&1)
judge podman-rootful-libpod "$?" "$out"

# route: podman-rootless-libpod (network) libpod ping on $XDG_RUNTIME_DIR/podman/podman.sock
out=$(rawsock --route podman-rootless-libpod --unix "${XDG_RUNTIME_DIR:-/run/user/$UID}/podman/podman.sock" --proto libpod 2>&1)
judge podman-rootless-libpod "$?" "$out"

# route: container-host (network) the endpoint in CONTAINER_HOST (Podman's variable), libpod ping
out=$(rawsock --route container-host --url "${CONTAINER_HOST:-unix:///run/podman/podman.sock}" --proto libpod 2>&1)
judge container-host "$?" "$out"

# route: podman-cli (network) podman --remote ps
if have podman-cli podman; then
  out=$(timeout -k 1 "$cold_limit" podman --remote ps --filter label=no-docker-route=podman-cli 2>&1 < /dev/null)
  judge podman-cli "$?" "$out" "$cold_limit"
fi

# route: containerd-grpc (network) HTTP/2 preface to /run/containerd/containerd.sock
out=$(rawsock --route containerd-grpc --unix /run/containerd/containerd.sock --proto h2 2>&1)
judge containerd-grpc "$?" "$out"

# route: docker-containerd-grpc (network) HTTP/2 preface to Docker's /var/run/docker/containerd/containerd.sock
out=$(rawsock --route docker-containerd-grpc --unix /var/run/docker/containerd/containerd.sock --proto h2 2>&1)
judge docker-containerd-grpc "$?" "$out"

# route: k3s-containerd-grpc (network) HTTP/2 preface to /run/k3s/containerd/containerd.sock
out=$(rawsock --route k3s-containerd-grpc --unix /run/k3s/containerd/containerd.sock --proto h2 2>&1)
judge k3s-containerd-grpc "$?" "$out"

# route: buildkit-grpc (network) HTTP/2 preface to /run/buildkit/buildkitd.sock
out=$(rawsock --route buildkit-grpc --unix /run/buildkit/buildkitd.sock --proto h2 2>&1)
judge buildkit-grpc "$?" "$out"

# route: crio-grpc (network) HTTP/2 preface to /run/crio/crio.sock
out=$(rawsock --route crio-grpc --unix /run/crio/crio.sock --proto h2 2>&1)
judge crio-grpc "$?" "$out"

# route: cri-dockerd-grpc (network) HTTP/2 preface to /var/run/cri-dockerd.sock
out=$(rawsock --route cri-dockerd-grpc --unix /var/run/cri-dockerd.sock --proto h2 2>&1)
judge cri-dockerd-grpc "$?" "$out"

# route: ctr-cli (network) containerd's ctr version
if have ctr-cli ctr; then
  out=$(timeout -k 1 "$limit" ctr --address /run/containerd/containerd.sock version 2>&1 < /dev/null)
  judge ctr-cli "$?" "$out"
fi

# route: crictl-cli (network) crictl version against containerd's CRI
if have crictl-cli crictl; then
  out=$(timeout -k 1 "$limit" crictl --runtime-endpoint unix:///run/containerd/containerd.sock version 2>&1 < /dev/null)
  judge crictl-cli "$?" "$out"
fi

# route: nerdctl-cli (network) nerdctl ps against containerd
if have nerdctl-cli nerdctl; then
  out=$(timeout -k 1 "$limit" nerdctl --address /run/containerd/containerd.sock ps --filter label=no-docker-route=nerdctl-cli 2>&1 < /dev/null)
  judge nerdctl-cli "$?" "$out"
fi

# route: abstract-socket (network) an abstract unix socket @no-docker-engine (no file to hide)
out=$(rawsock --route abstract-socket --abstract no-docker-engine --proto http 2>&1)
judge abstract-socket "$?" "$out"

# route: docker-py (network) docker-py docker.from_env() lists containers
out=$(dockerpy_route docker-py 2>&1)
judge docker-py "$?" "$out"

# route: socat-unix (network) socat relays a GET /_ping to /run/docker.sock
out=$(printf 'GET /_ping?route=socat-unix HTTP/1.0\r\nHost: d\r\nX-No-Docker-Route: socat-unix\r\n\r\n' | timeout -k 1 "$limit" socat -t 2 - UNIX-CONNECT:/run/docker.sock 2>&1)
judge socat-unix "$?" "${out%%$'\r'*}"

# route: nc-unix (network) netcat -U sends a GET /_ping to /var/run/docker.sock
out=$(printf 'GET /_ping?route=nc-unix HTTP/1.0\r\nHost: d\r\nX-No-Docker-Route: nc-unix\r\n\r\n' | timeout -k 1 "$limit" nc -N -w 2 -U /var/run/docker.sock 2>&1)
judge nc-unix "$?" "${out%%$'\r'*}"

# route: nc-tcp (network) netcat sends a GET /_ping to 127.0.0.1:2375
out=$(printf 'GET /_ping?route=nc-tcp HTTP/1.0\r\nHost: d\r\nX-No-Docker-Route: nc-tcp\r\n\r\n' | timeout -k 1 "$limit" nc -N -w 2 127.0.0.1 2375 2>&1)
judge nc-tcp "$?" "${out%%$'\r'*}"

# route: curl-tcp-2375 (network) curl GET /_ping on 127.0.0.1:2375
out=$(timeout -k 1 "$limit" curl -q -sS -o /dev/null -w '%{http_code}' --max-time 2 -H 'X-No-Docker-Route: curl-tcp-2375' 'http://127.0.0.1:2375/_ping?route=curl-tcp-2375' 2>&1 < /dev/null)
judge curl-tcp-2375 "$?" "$out"

# route: curl-head-ping (network) curl HEAD /_ping over /var/run/docker.sock, as the CLI does first
out=$(timeout -k 1 "$limit" curl -q -sS -I -o /dev/null -w '%{http_code}' --max-time 2 --unix-socket /var/run/docker.sock -H 'X-No-Docker-Route: curl-head-ping' 'http://d/_ping?route=curl-head-ping' 2>&1 < /dev/null)
judge curl-head-ping "$?" "$out"

# route: bash-dev-tcp (network) bash's own /dev/tcp opens 127.0.0.1:2375, no client tool
out=$(timeout -k 1 "$limit" bash -c 'exec 3</dev/tcp/127.0.0.1/2375 && printf "GET /_ping?route=bash-dev-tcp HTTP/1.0\r\nX-No-Docker-Route: bash-dev-tcp\r\n\r\n" >&3 && head -n 1 <&3' 2>&1 < /dev/null)
judge bash-dev-tcp "$?" "${out%%$'\r'*}"

# route: proc-1-root (network) the engine socket seen through /proc/1/root
out=$(timeout -k 1 "$limit" docker -H unix:///proc/1/root/run/docker.sock ps --filter label=no-docker-route=proc-1-root 2>&1 < /dev/null)
judge proc-1-root "$?" "$out"

# route: proc-ppid-root (network) the engine socket seen through /proc/$PPID/root
out=$(timeout -k 1 "$limit" docker -H "unix:///proc/$PPID/root/run/docker.sock" ps --filter label=no-docker-route=proc-ppid-root 2>&1 < /dev/null)
judge proc-ppid-root "$?" "$out"

# route: ssh-host (network) DOCKER_HOST=ssh://127.0.0.1: the CLI runs ssh ... docker system dial-stdio
out=$(DOCKER_HOST=ssh://no-docker-route@127.0.0.1 timeout -k 1 "$limit" docker ps --filter label=no-docker-route=ssh-host 2>&1 < /dev/null)
judge ssh-host "$?" "$out"

# route: bash-env (network) BASH_ENV names a file that calls docker; bash sources it first
printf '%s\n' 'docker ps --filter label=no-docker-route=bash-env || exit 1' > ./no-docker-route-bash-env.sh
out=$(BASH_ENV=./no-docker-route-bash-env.sh timeout -k 1 "$limit" bash -c ':' 2>&1 < /dev/null)
judge bash-env "$?" "$out"

# route: workdir-symlink (network) a symlink in the work dir to /run/docker.sock
ln -sfn /run/docker.sock ./no-docker-route-docker.sock
out=$(timeout -k 1 "$limit" curl -q -sS -o /dev/null -w '%{http_code}' --max-time 2 --unix-socket ./no-docker-route-docker.sock -H 'X-No-Docker-Route: workdir-symlink' 'http://d/_ping?route=workdir-symlink' 2>&1 < /dev/null)
judge workdir-symlink "$?" "$out"

# ---- lifetime: engines that restart or appear while the run is under way (P12) -------------
# Only where a lifetime harness moves engines around this payload (`no-docker prove`, the
# T-series): it arms a route by making ./no-docker-lifetime-NAME before the payload starts,
# moves the engines once ./no-docker-lifetime-waiting appears, then makes
# ./no-docker-lifetime-go. Anywhere else each route is unavailable at once, without waiting.

# lifetime_ready: tell the harness the payload got here; wait for its go (at most 15 s).
lifetime_ready() {
  : > ./no-docker-lifetime-waiting
  # shellcheck disable=SC2034  # the loop variables only count the tries
  for second in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
    for tenth in 1 2 3 4 5 6 7 8 9 10; do
      if [ -e ./no-docker-lifetime-go ]; then
        return 0
      fi
      sleep 0.1
    done
  done
  return 1
}

# route: lifetime-restart (network) an engine at /srv/no-docker-engine/docker.sock, there when the run started, restarts during it (unlinked, bound again)
if [ -e ./no-docker-lifetime-restart ]; then
  if lifetime_ready; then
    out=$(rawsock --route lifetime-restart --unix /srv/no-docker-engine/docker.sock --proto http 2>&1)
    judge lifetime-restart "$?" "$out"
  else
    note lifetime-restart failed "the lifetime harness never said go"
  fi
else
  note lifetime-restart unavailable "no lifetime harness (./no-docker-lifetime-restart absent)"
fi

# route: lifetime-late-dir (network) an engine started during the run in ./no-docker-late-engine, a work-dir directory made after the start
if [ -e ./no-docker-lifetime-late-dir ]; then
  if lifetime_ready; then
    out=$(rawsock --route lifetime-late-dir --unix ./no-docker-late-engine/docker.sock --proto http 2>&1)
    judge lifetime-late-dir "$?" "$out"
  else
    note lifetime-late-dir failed "the lifetime harness never said go"
  fi
else
  note lifetime-late-dir unavailable "no lifetime harness (./no-docker-lifetime-late-dir absent)"
fi

# route: lifetime-system-dir (network) an engine started during the run at /srv/no-docker-late.sock, a system directory the run sees
if [ -e ./no-docker-lifetime-system-dir ]; then
  if lifetime_ready; then
    out=$(rawsock --route lifetime-system-dir --unix /srv/no-docker-late.sock --proto http 2>&1)
    judge lifetime-system-dir "$?" "$out"
  else
    note lifetime-system-dir failed "the lifetime harness never said go"
  fi
else
  note lifetime-system-dir unavailable "no lifetime harness (./no-docker-lifetime-system-dir absent)"
fi

# ---- persistence: files that would run later, outside (zero-byte appends) ------------------

# route: bashrc (persistence) ~/.bashrc runs in every later interactive bash
err=$({ : >> "$HOME/.bashrc"; } 2>&1)
persisted bashrc "$?" "$err"

# route: bash-profile (persistence) ~/.bash_profile runs in every later login bash
err=$({ : >> "$HOME/.bash_profile"; } 2>&1)
persisted bash-profile "$?" "$err"

# route: profile (persistence) ~/.profile runs in every later login shell
err=$({ : >> "$HOME/.profile"; } 2>&1)
persisted profile "$?" "$err"

# route: zshenv (persistence) ~/.zshenv runs in every later zsh
err=$({ : >> "$HOME/.zshenv"; } 2>&1)
persisted zshenv "$?" "$err"

# route: git-pre-commit-hook (persistence) .git/hooks/pre-commit runs at the next commit
err=$({ mkdir -p .git/hooks && : >> .git/hooks/pre-commit; } 2>&1)
persisted git-pre-commit-hook "$?" "$err"

# route: git-config (persistence) core.hooksPath / core.fsmonitor in .git/config run commands later
err=$({ mkdir -p .git && : >> .git/config; } 2>&1)
persisted git-config "$?" "$err"

# route: autostart (persistence) ~/.config/autostart/*.desktop runs at the next desktop login
err=$({ mkdir -p "$HOME/.config/autostart" && : >> "$HOME/.config/autostart/no-docker-route.desktop"; } 2>&1)
persisted autostart "$?" "$err"

# route: systemd-user (persistence) ~/.config/systemd/user units run under the user manager
err=$({ mkdir -p "$HOME/.config/systemd/user" && : >> "$HOME/.config/systemd/user/no-docker-route.service"; } 2>&1)
persisted systemd-user "$?" "$err"

# route: python-m-module (persistence) a pytest.py in the work dir runs first at the next `python -m pytest` outside
err=$({ : >> pytest.py; } 2>&1)
persisted python-m-module "$?" "$err"

# route: pytest-config (persistence) a new pytest.ini outranks the project's `no_docker = true` at the next pytest
err=$({ : >> pytest.ini; } 2>&1)
persisted pytest-config "$?" "$err"

# route: subdir-config (persistence) a pyproject.toml in a subdirectory sets the next run's defaults there
err=$({ mkdir -p no-docker-route-sub && : >> no-docker-route-sub/pyproject.toml; } 2>&1)
persisted subdir-config "$?" "$err"

# route: crontab (persistence) the user's crontab spool file runs commands on schedule
if have crontab crontab; then
  err=$({ : >> "/var/spool/cron/crontabs/$(id -un)"; } 2>&1)
  persisted crontab "$?" "$err"
fi
