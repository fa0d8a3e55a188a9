"""The dynamic check of ``mutants review`` (issue 17 A): what the canary recorded is judged.

Pure tests of the verdict over canary records and file snapshots, then real runs in the outer
guard (canary in answer mode on every engine path; no real engine can be reached there): the
pinned payload is clean, a payload that sends a write is refused, and payloads generated from
the lint's accepted subset are harmless.
"""

from __future__ import annotations

import base64
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from no_docker.mutants import pins
from no_docker.mutants.dynamic import (
    EMPTY_SHA256,
    H2_PREFACE,
    dynamic_check,
    h2_frames_problem,
    judge_files,
    judge_records,
)
from no_docker.mutants.lint import lint_source

PAYLOAD = pins.ROOT / "mutants" / "payloads" / "reach-engine.sh"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
HEADERS = b"\x00\x00\x01\x01\x04\x00\x00\x00\x01\x82"


def request(method: str, path: str, body_len: int = 0) -> dict:
    return {"kind": "request", "listener": "/run/docker.sock", "method": method, "path": path,
            "body_len": body_len}


def raw(raw_kind: str, data: bytes) -> dict:
    return {"kind": "raw", "listener": "/run/containerd/containerd.sock", "raw_kind": raw_kind,
            "bytes": base64.b64encode(data).decode(), "summary": raw_kind}


@pytest.mark.parametrize("record", [
    {"kind": "connection", "listener": "x"},
    request("GET", "/_ping"), request("HEAD", "/_ping"), request("GET", "/v1.47/containers/json"),
    request("GET", "/v4.0.0/libpod/_ping"), request("GET", "/images/json"),
    raw("h2-preface", H2_PREFACE + SETTINGS), raw("h2-preface", H2_PREFACE), raw("tls", b"\x16\x03\x01\x00"),
], ids=lambda r: f"{r.get('kind')}-{r.get('method', r.get('raw_kind', ''))}-{r.get('path', '')}")
def test_reads_pass(record):
    assert judge_records([record]) == []


@pytest.mark.parametrize("record", [
    request("POST", "/containers/x/kill"), request("DELETE", "/containers/x"),
    request("GET", "/containers/x/export"), request("GET", "/_ping", body_len=3),
    request("PUT", "/_ping"), raw("h2-preface", H2_PREFACE + SETTINGS + HEADERS),
    raw("garbage", b"\x00rm -rf"), raw("bad-http", b"POST /x HTTP/1.1\r\n"), raw("tls", b"not tls"),
    {"kind": "something-new"},
], ids=lambda r: f"{r.get('kind')}-{r.get('method', r.get('raw_kind', ''))}-{r.get('path', '')}")
def test_anything_else_is_refused(record):
    assert judge_records([record])


def test_h2_frames_after_the_preface():
    assert h2_frames_problem(H2_PREFACE + SETTINGS + SETTINGS) is None
    assert "type 1" in (h2_frames_problem(H2_PREFACE + HEADERS) or "")
    assert h2_frames_problem(b"GET / HTTP/1.1\r\n") is not None


def test_files_outside_the_run_dir():
    before = {".bashrc": "a" * 64}
    assert judge_files(before, {".bashrc": "a" * 64, "new-probe": EMPTY_SHA256}, "$HOME") == []
    assert judge_files(before, {".bashrc": "b" * 64}, "$HOME") == ["$HOME/.bashrc: its bytes changed"]
    assert judge_files(before, {".bashrc": "a" * 64, "x": "c" * 64}, "$HOME") == [
        "$HOME/x: a new file with content"]
    assert judge_files(before, {}, "$HOME") == ["$HOME/.bashrc: removed"]


needs_guard = pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None,
                                 reason="the outer guard needs unshare and nsenter (util-linux)")


@needs_guard
def test_the_pinned_payload_sends_only_reads():
    result = dynamic_check(PAYLOAD.read_bytes())
    assert result.ran, result.problems
    assert result.ok, result.problems
    assert result.records > 40  # the canary was reached on the routes: the check saw something


@needs_guard
def test_a_payload_that_writes_is_refused():
    # Run directly (no lint first) to prove the second witness on its own; inside the outer
    # guard the only engine is the canary.
    bad = (b"curl -q -s -o /dev/null -X POST --unix-socket /run/docker.sock http://d/containers/x/kill\n"
           b"echo changed >> \"$HOME/.bashrc\"\n")
    result = dynamic_check(bad)
    assert result.ran and not result.ok
    assert any("POST /containers/x/kill" in p for p in result.problems), result.problems
    assert "$HOME/.bashrc: its bytes changed" in result.problems


SUBSET = [
    "docker ps --filter label=no-docker-route=gen < /dev/null",
    "docker -H unix:///run/docker.sock images -q < /dev/null",
    "curl -q -sS -o /dev/null --unix-socket /run/docker.sock 'http://d/_ping?route=gen'",
    "printf 'GET /_ping HTTP/1.0\\r\\n\\r\\n' | timeout -k 1 3 nc -N -U /var/run/docker.sock",
    "out=$(timeout -k 1 3 docker version < /dev/null 2>&1); echo \"${out%%$'\\n'*}\"",
    "DOCKER_HOST=tcp://127.0.0.1:2375 timeout -k 1 3 docker info < /dev/null",
    ": >> \"$HOME/.bashrc\"",
]


@needs_guard
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(SUBSET), min_size=2, max_size=5).map("\n".join))
def test_payloads_the_lint_accepts_are_harmless_in_the_dynamic_check(payload):
    """Every accepted payload is proven harmless by the dynamic check (a few per run: each
    one starts an outer guard)."""
    assert lint_source(payload, "gen.sh") == [], payload
    result = dynamic_check(payload.encode())
    assert result.ok, (payload, result.problems)


@needs_guard
def test_a_payload_that_does_not_end_is_refused_not_a_traceback():
    result = dynamic_check(b"sleep 30\n", timeout=1)
    assert result.ran and not result.ok
    assert result.problems == ["the payload did not end within 1 s"]
