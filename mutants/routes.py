"""The routes a payload declares and the log it writes (the contract the T-series reads).

A payload block starts with ``# route: ID (network|persistence) description``; the payload
appends ``ID attempted OUTCOME [detail]`` to ``${NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log}``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

TAG = re.compile(r"^# route: (?P<id>\S+) \((?P<kind>[a-z]+)\) (?P<description>\S.*)$")
ROUTE_ID = re.compile(r"^[a-z0-9-]+$")
KINDS = ("network", "persistence")
OUTCOMES = ("reached", "failed", "unavailable", "written", "blocked")
LOG_LINE = re.compile(r"^(?P<id>[a-z0-9-]+) attempted (?P<outcome>[a-z]+)(?: (?P<detail>.*))?$")

# The fixed endpoints the payload's network routes try, for a canary started to answer them
# (T-05). {home}, {xdg} and {uid} are filled in by `canary_addresses`.
UNIX_ENDPOINTS = (
    "/run/docker.sock", "/var/run/docker.sock", "{home}/.docker/run/docker.sock",
    "{home}/.docker/desktop/docker.sock", "{home}/.colima/default/docker.sock", "{home}/.rd/docker.sock",
    "{home}/.orbstack/run/docker.sock", "{xdg}/docker.sock", "/run/podman/podman.sock",
    "{xdg}/podman/podman.sock", "/run/containerd/containerd.sock",
    "/var/run/docker/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock",
    "/run/buildkit/buildkitd.sock", "/run/crio/crio.sock", "/var/run/cri-dockerd.sock",
)
TCP_ENDPOINTS = ("127.0.0.1:2375", "[::1]:2375", "127.0.0.1:2376", "127.0.0.1:4243")
ABSTRACT_ENDPOINTS = ("no-docker-engine",)


class RouteError(ValueError):
    """A payload whose route tags break the contract (bad id, kind, duplicate)."""


@dataclass(frozen=True)
class Route:
    id: str
    kind: str
    description: str
    line: int


def parse_routes(text: str, path: str = "<payload>") -> list[Route]:
    """Every ``# route:`` tag of a payload text, in order; RouteError on a malformed one."""
    routes: list[Route] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("# route:"):
            continue
        m = TAG.match(line)
        if not m:
            raise RouteError(f"{path}:{number}: malformed route tag {line!r}")
        rid, kind = m.group("id"), m.group("kind")
        if not ROUTE_ID.match(rid):
            raise RouteError(f"{path}:{number}: route id {rid!r} is not [a-z0-9-]+")
        if kind not in KINDS:
            raise RouteError(f"{path}:{number}: route kind {kind!r} is not one of {KINDS}")
        if rid in seen:
            raise RouteError(f"{path}:{number}: route {rid} already declared on line {seen[rid]}")
        seen[rid] = number
        routes.append(Route(rid, kind, m.group("description"), number))
    return routes


def declared_routes(path: Path | str) -> list[Route]:
    """The routes the payload file at ``path`` declares."""
    return parse_routes(Path(path).read_text(), str(path))


def parse_route_log(text: str) -> dict[str, tuple[str, str]]:
    """route id -> (outcome, detail) from a route log; the last line of a route wins.

    Lines that are not route lines (a payload's stray output) are skipped, never guessed at;
    an unknown outcome is kept as is so a caller can see it.
    """
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        m = LOG_LINE.match(line.rstrip("\r"))
        if m:
            out[m.group("id")] = (m.group("outcome"), m.group("detail") or "")
    return out


def canary_addresses(home: str, xdg_runtime_dir: str) -> dict[str, list[str]]:
    """``{"unix": [...], "tcp": [...], "abstract": [...]}``: where a canary must listen so that
    every network route of reach-engine.sh can reach it (DOCKER_HOST and CONTAINER_HOST unset;
    the routes that use them take the defaults). Paths that resolve to the same file appear
    once."""
    unix: list[str] = []
    seen: set[str] = set()
    for pattern in UNIX_ENDPOINTS:
        path = pattern.format(home=home.rstrip("/"), xdg=xdg_runtime_dir.rstrip("/"))
        # /var/run is a symlink to /run on most systems: one listener serves both names.
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            unix.append(path)
    return {"unix": unix, "tcp": list(TCP_ENDPOINTS), "abstract": list(ABSTRACT_ENDPOINTS)}
