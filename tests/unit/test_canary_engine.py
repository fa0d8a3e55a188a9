"""The answer table (pure): paths taken apart, and what each client needs to go on."""

from __future__ import annotations

import json

import pytest
from no_docker.canary.engine import Answer, Request, answer, split_api_path
from no_docker.canary.server import render_answer


@pytest.mark.parametrize(("path", "base", "version", "libpod", "endpoint"), [
    ("/_ping", "", None, False, "/_ping"),
    ("/v1.50/containers/json", "", "1.50", False, "/containers/json"),
    ("/v4.9.3/libpod/_ping", "", "4.9.3", True, "/_ping"),
    ("/some/base/v1.41/images/json", "/some/base", "1.41", False, "/images/json"),
    ("/some/base/_ping", "/some/base", None, False, "/_ping"),
    ("/v1.50/images/docker.io/library/alpine:latest", "", "1.50", False,
     "/images/docker.io/library/alpine:latest"),
    ("/v1.50/nothing/known", "", "1.50", False, "/nothing/known"),
    ("/", "", None, False, "/"),
])
def test_split_api_path(path, base, version, libpod, endpoint):
    api = split_api_path(path)
    assert (api.base, api.version, api.libpod, api.endpoint) == (base, version, libpod, endpoint)


def body(method: str, path: str, **kw) -> object:
    found = answer(Request(method, path, **kw))
    return json.loads(found.body) if found.body else None


def test_ping_headers_the_go_client_reads():
    found = answer(Request("HEAD", "/_ping"))
    headers = dict(found.headers)
    assert found.status == 200 and found.body == b""
    assert headers["Api-Version"] == "1.50" and headers["Ostype"] == "linux"
    assert headers["Docker-Experimental"] == "false" and headers["Builder-Version"] == "2"
    assert headers["Swarm"] == "inactive" and headers["Server"].startswith("Docker/")
    assert answer(Request("GET", "/v1.50/_ping")).body == b"OK"
    assert "Libpod-API-Version" in dict(answer(Request("GET", "/v4.9.3/libpod/_ping")).headers)


@pytest.mark.parametrize(("method", "path", "status", "expected"), [
    ("GET", "/version", 200, lambda b: b["ApiVersion"] == "1.50"),
    ("GET", "/v1.50/containers/json", 200, lambda b: b == []),
    ("GET", "/v1.50/images/json", 200, lambda b: b == []),
    ("GET", "/v1.50/volumes", 200, lambda b: b == {"Volumes": [], "Warnings": None}),
    ("GET", "/v1.50/networks", 200, lambda b: b == []),
    ("POST", "/v1.50/images/prune", 200, lambda b: b == {"ImagesDeleted": [], "SpaceReclaimed": 0}),
    ("POST", "/v1.50/networks/prune", 200, lambda b: b == {"NetworksDeleted": []}),
    ("DELETE", "/v1.50/images/x", 200, lambda b: b[0] == {"Untagged": "x"}),
    ("POST", "/v1.50/containers/create", 201, lambda b: len(b["Id"]) == 64),
    ("POST", "/v1.50/containers/abc/wait", 200, lambda b: b == {"StatusCode": 0}),
    ("POST", "/v1.50/containers/abc/start", 204, lambda b: b is None),
    ("DELETE", "/v1.50/containers/abc", 204, lambda b: b is None),
    ("GET", "/v1.50/containers/abc/json", 200,
     lambda b: b["State"]["Running"] is True and len(b["Id"]) == 64),
    ("GET", "/v1.50/images/docker.io/library/alpine:latest/json", 200,
     lambda b: b["RepoTags"] == ["docker.io/library/alpine:latest"]),
    ("GET", "/v1.50/volumes/v1", 404, lambda b: b["message"] == "No such object: v1"),
    ("GET", "/v1.50/frobnicate", 404, lambda b: b == {"message": "page not found"}),
    ("POST", "/v4.9.3/libpod/system/prune", 200, lambda b: b["ReclaimedSpace"] == 0),
    ("DELETE", "/v4.9.3/libpod/images/remove", 200, lambda b: b["ExitCode"] == 0),
    ("POST", "/v4.9.3/libpod/containers/abc/wait", 200, lambda b: b == 0),
])
def test_answers(method, path, status, expected):
    found = answer(Request(method, path))
    assert found.status == status
    parsed = json.loads(found.body) if found.body else None
    assert expected(parsed), parsed


def test_attach_with_upgrade_is_a_101_and_without_is_a_200_stream():
    upgraded = answer(Request("POST", "/v1.50/containers/abc/attach", headers={"upgrade": "tcp"}))
    assert (upgraded.status, upgraded.upgrade) == (101, "tcp")
    assert ("Upgrade", "tcp") in upgraded.headers
    plain = answer(Request("POST", "/v1.50/containers/abc/attach"))
    assert (plain.status, plain.upgrade, plain.content_type) == (200, "", "application/vnd.docker.raw-stream")


def test_pull_is_a_json_lines_stream():
    found = answer(Request("POST", "/v1.50/images/create", params={"fromImage": "docker.io/library/alpine",
                                                                      "tag": "latest"}))
    lines = [json.loads(line) for line in found.body.splitlines()]
    assert lines[-1] == {"status": "Status: Downloaded newer image for docker.io/library/alpine:latest"}


def test_ids_differ_by_nonce():
    one = body("POST", "/containers/create", nonce="1-1")
    two = body("POST", "/containers/create", nonce="1-2")
    assert one["Id"] != two["Id"]


def test_refuse_mode_is_an_error_for_everything_even_a_ping():
    for method, path in (("HEAD", "/_ping"), ("GET", "/version"), ("POST", "/v1.50/containers/prune")):
        found = answer(Request(method, path), mode="refuse")
        assert found.status == 403
        assert json.loads(found.body)["message"].startswith("refused by the no-docker canary")


def test_render_answer_head_gets_the_length_but_no_body_and_101_204_get_neither():
    ping = Answer(200, b"OK", "text/plain", (("Api-Version", "1.50"),))
    got = render_answer(ping, "GET", False, "D", "HTTP/1.1")
    assert got == (b"HTTP/1.1 200 OK\r\nApi-Version: 1.50\r\nContent-Type: text/plain\r\n"
                   b"Content-Length: 2\r\nDate: D\r\n\r\nOK")
    head = render_answer(ping, "HEAD", True, "D", "HTTP/1.0")
    assert head.startswith(b"HTTP/1.0 200 OK\r\n") and head.endswith(b"Content-Length: 2\r\nDate: D\r\n"
                                                                    b"Connection: close\r\n\r\n")
    upgraded = render_answer(Answer(101, b"", "application/vnd.docker.raw-stream",
                                           (("Upgrade", "tcp"),), upgrade="tcp"), "POST", True, "D")
    assert upgraded.startswith(b"HTTP/1.1 101 Switching Protocols\r\n") and b"Content-Length" not in upgraded
    assert b"Connection: close" not in upgraded and upgraded.endswith(b"\r\n\r\n")
    assert b"Content-Length" not in render_answer(Answer(204), "DELETE", False, "D")
