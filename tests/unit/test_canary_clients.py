"""Real clients against a real canary: the docker CLI, docker-py, curl, a raw libpod ping.

Each client command must exit 0 in answer mode, and each request it sent must be in the
log with its method and path; in refuse mode the CLI prints the daemon's error and exits 1.
The clients only ever see temporary socket paths, and DOCKER_CONFIG is an empty temp dir.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.canary.process import started_canary

DOCKER = "/usr/local/bin/docker"
needs_docker_cli = pytest.mark.skipif(not os.access(DOCKER, os.X_OK), reason=f"no docker CLI at {DOCKER}")


def client_env(tmp_path: Path, host: str) -> dict[str, str]:
    config = tmp_path / "docker-config"
    config.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DOCKER_", "CONTAINER_"))}
    env.update(DOCKER_HOST=host, DOCKER_CONFIG=str(config), HOME=str(tmp_path))
    return env


def requests_of(records: list[dict], conn_pids: set[int] | None = None) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in records if r["kind"] == "request"]


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    work = tmp_path_factory.mktemp("canary-clients")
    with started_canary(work, unix=[str(work / "run" / "docker.sock")], tcp=["127.0.0.1:0"]) as running:
        yield running


def docker(canary, tmp_path, *args: str, host: str | None = None) -> subprocess.CompletedProcess[str]:
    host = host or f"unix://{canary.listener('unix')['path']}"
    return subprocess.run([DOCKER, *args], env=client_env(tmp_path, host), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def new_records(canary, before: int) -> list[dict]:
    return [r for r in canary.records() if r["seq"] > before]


def last_seq(canary) -> int:
    records = canary.records()
    return records[-1]["seq"] if records else 0


# (argv, requests that must be in the log, in this order, after the HEAD /_ping)
CLI_CASES = [
    (["version"], [("GET", "/v1.50/version")]),
    (["info"], [("GET", "/v1.50/info")]),
    (["ps", "-a"], [("GET", "/v1.50/containers/json")]),
    (["images"], [("GET", "/v1.50/images/json")]),
    (["image", "prune", "-af"], [("POST", "/v1.50/images/prune")]),
    (["rmi", "x"], [("DELETE", "/v1.50/images/x")]),
    (["system", "prune", "-af", "--volumes"],
     [("POST", "/v1.50/containers/prune"), ("POST", "/v1.50/networks/prune"),
      ("POST", "/v1.50/volumes/prune"), ("POST", "/v1.50/images/prune"), ("POST", "/v1.50/build/prune")]),
    (["volume", "ls"], [("GET", "/v1.50/volumes")]),
    (["network", "ls"], [("GET", "/v1.50/networks")]),
]


@needs_docker_cli
@pytest.mark.parametrize(("argv", "expected"), CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_docker_cli_exits_0_and_every_request_is_recorded(canary, tmp_path, argv, expected):
    before = last_seq(canary)
    done = docker(canary, tmp_path, *argv)
    assert done.returncode == 0, f"docker {' '.join(argv)}: rc {done.returncode}\n{done.stderr}"
    seen = requests_of(new_records(canary, before))
    assert seen[0] == ("HEAD", "/_ping"), seen
    assert set(expected) <= set(seen), f"missing {set(expected) - set(seen)} in {seen}"
    for record in new_records(canary, before):
        if record["kind"] == "request":
            assert ["User-Agent", "Docker-Client/28.2.2 (linux)"] in record["headers"] or \
                record["headers"][1][0] == "User-Agent"


# More destructive commands a mutant might send: they must get as far as their real request.
MORE_CLI_CASES = [
    (["pull", "alpine"], ("POST", "/v1.50/images/create")),
    (["rm", "-f", "abc"], ("DELETE", "/v1.50/containers/abc")),
    (["kill", "abc"], ("POST", "/v1.50/containers/abc/kill")),
    (["exec", "abc", "true"], ("POST", "/v1.50/containers/abc/exec")),
    (["run", "-d", "alpine", "sleep", "1"], ("POST", "/v1.50/containers/create")),
    (["volume", "prune", "-af"], ("POST", "/v1.50/volumes/prune")),
    (["network", "create", "n1"], ("POST", "/v1.50/networks/create")),
    (["system", "df"], ("GET", "/v1.50/system/df")),
]


@needs_docker_cli
@pytest.mark.parametrize(("argv", "expected"), MORE_CLI_CASES, ids=[" ".join(c[0]) for c in MORE_CLI_CASES])
def test_more_destructive_cli_commands_reach_their_real_request(canary, tmp_path, argv, expected):
    before = last_seq(canary)
    done = docker(canary, tmp_path, *argv)
    assert done.returncode == 0, f"docker {' '.join(argv)}: rc {done.returncode}\n{done.stderr}"
    assert expected in requests_of(new_records(canary, before))


def test_docker_py_run_and_pull(canary, tmp_path):
    code = ("import docker; c = docker.from_env(); "
            "assert c.containers.run('alpine', 'true', remove=True) == b''; "
            "print(c.images.pull('alpine').tags)")
    before = last_seq(canary)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=client_env(tmp_path, f"unix://{canary.listener('unix')['path']}"))
    assert done.returncode == 0, done.stderr
    seen = [(method, path.split("?")[0]) for method, path in requests_of(new_records(canary, before))]
    assert ("POST", "/v1.50/containers/create") in seen and ("POST", "/v1.50/images/create") in seen
    assert any(method == "DELETE" and path.startswith("/v1.50/containers/") for method, path in seen)


@needs_docker_cli
def test_docker_run_goes_through_create_attach_wait_start(canary, tmp_path):
    before = last_seq(canary)
    done = docker(canary, tmp_path, "run", "--rm", "alpine", "true")
    assert done.returncode == 0, done.stderr
    records = [r for r in new_records(canary, before) if r["kind"] == "request"]
    by_endpoint = {r["endpoint"].rsplit("/", 1)[-1] if r["endpoint"].count("/") > 2 else r["endpoint"]: r
                   for r in records}
    create = by_endpoint["/containers/create"]
    assert create["status"] == 201
    assert '"Image":"alpine"' in create["body"] and '"Cmd":["true"]' in create["body"]
    assert by_endpoint["attach"]["status"] == 101
    assert by_endpoint["wait"]["status"] == 200
    assert by_endpoint["wait"]["params"] == [["condition", "removed"]]
    assert by_endpoint["start"]["status"] == 204
    # The CLI addressed the container by the Id the canary made up.
    container_id = by_endpoint["start"]["endpoint"].split("/")[2]
    assert len(container_id) == 64 and container_id in by_endpoint["attach"]["endpoint"]


@needs_docker_cli
def test_docker_cli_over_tcp_with_a_base_path(canary, tmp_path):
    port = canary.listener("tcp")["port"]
    before = last_seq(canary)
    done = docker(canary, tmp_path, "ps", host=f"tcp://127.0.0.1:{port}/some/base")
    assert done.returncode == 0, done.stderr
    seen = requests_of(new_records(canary, before))
    assert seen == [("HEAD", "/some/base/_ping"), ("GET", "/some/base/v1.50/containers/json")]
    assert {r["listener"] for r in new_records(canary, before)} == {"127.0.0.1:0"}


def test_docker_py_from_env_ping_list_prune(canary, tmp_path):
    code = ("import docker; c = docker.from_env(); assert c.ping() is True; "
            "assert c.containers.list() == []; print(c.images.prune())")
    before = last_seq(canary)
    host = f"unix://{canary.listener('unix')['path']}"
    done = subprocess.run([sys.executable, "-c", code], env=client_env(tmp_path, host), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "SpaceReclaimed" in done.stdout
    seen = requests_of(new_records(canary, before))
    assert seen == [("GET", "/version"), ("GET", "/v1.50/_ping"), ("GET", "/v1.50/containers/json"),
                    ("POST", "/v1.50/images/prune")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_curl_unix_socket_ping(canary, method):
    before = last_seq(canary)
    argv = ["curl", "-sS", "-i", "--unix-socket", canary.listener("unix")["path"], "http://localhost/_ping"]
    if method == "HEAD":
        argv.insert(1, "-I")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("HTTP/1.1 200 OK")
    for header in ("Api-Version: 1.50", "Ostype: linux", "Docker-Experimental: false", "Builder-Version: 2",
                   "Swarm: inactive", "Server: Docker/"):
        assert header in done.stdout
    assert done.stdout.endswith("OK") == (method == "GET")
    assert requests_of(new_records(canary, before)) == [(method, "/_ping")]


def test_raw_libpod_ping_is_answered_like_podman(canary):
    before = last_seq(canary)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(canary.listener("unix")["path"])
        sock.sendall(b"GET /v4.9.3/libpod/_ping HTTP/1.1\r\nHost: d\r\n"
                     b"User-Agent: Go-http-client/1.1\r\n\r\n")
        answer = b""
        while b"\r\n\r\nOK" not in answer:
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
    head = answer.decode().lower()
    assert head.startswith("http/1.1 200")
    assert "libpod-api-version: 4.9.3" in head
    record = new_records(canary, before)[-1]
    assert (record["method"], record["path"], record["endpoint"]) == ("GET", "/v4.9.3/libpod/_ping", "/_ping")


@pytest.mark.parametrize("path", ["/_ping", "/v1.24/_ping", "/v1.99/_ping", "/v4.0.0/libpod/_ping",
                                  "/some/base/v1.41/_ping"])
def test_any_version_prefix_or_none_is_a_ping(canary, path):
    done = subprocess.run(["curl", "-sS", "--unix-socket", canary.listener("unix")["path"],
                           f"http://localhost{path}"], capture_output=True, text=True, timeout=30)
    assert done.stdout == "OK"


@pytest.fixture(scope="module")
def refusing(tmp_path_factory):
    work = tmp_path_factory.mktemp("canary-refuse")
    with started_canary(work, unix=[str(work / "docker.sock")], mode="refuse") as running:
        yield running


@needs_docker_cli
@pytest.mark.parametrize(("argv", "status"), [(["ps"], 1), (["system", "prune", "-af"], 1),
                                              (["run", "--rm", "alpine", "true"], 125)])
def test_refuse_mode_records_then_the_cli_reports_the_daemon_error(refusing, tmp_path, argv, status):
    # `docker run` reports a daemon error as 125 (its own convention), the others as 1.
    before = last_seq(refusing)
    done = docker(refusing, tmp_path, *argv)
    assert done.returncode == status, done
    assert "Error response from daemon: refused by the no-docker canary" in done.stderr
    requests = [r for r in new_records(refusing, before) if r["kind"] == "request"]
    assert requests and all(r["status"] == 403 for r in requests)
    assert any(r["method"] != "HEAD" for r in requests), "the CLI gave up before its real request"


def test_refuse_mode_docker_py_raises(refusing, tmp_path):
    # from_env() fetches /version first; docker-py wraps the 403 in a DockerException.
    code = ("import docker\ntry:\n docker.from_env()\nexcept docker.errors.DockerException as e:\n"
            " print(e)\n raise SystemExit(7)")
    host = f"unix://{refusing.listener('unix')['path']}"
    done = subprocess.run([sys.executable, "-c", code], env=client_env(tmp_path, host), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    assert "403" in done.stdout and "refused by the no-docker canary" in done.stdout


@pytest.mark.parametrize("tool", ["socat", "nc"])
def test_socat_and_nc_half_close_and_still_get_the_answer(canary, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"no {tool}")
    path = canary.listener("unix")["path"]
    argv = ["socat", "-t", "10", "-", f"UNIX-CONNECT:{path}"] if tool == "socat" else ["nc", "-N", "-U", path]
    before = last_seq(canary)
    done = subprocess.run(argv, input=b"GET /_ping?route=raw-tool HTTP/1.0\r\n\r\n", capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"HTTP/1.0 200 OK") and done.stdout.endswith(b"OK")
    assert requests_of(new_records(canary, before)) == [("GET", "/_ping")]
