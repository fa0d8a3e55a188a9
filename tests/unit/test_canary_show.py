"""``no-docker canary show``: the table and the counts, from a log real clients wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from no_docker.canary.process import started_canary
from no_docker.canary.records import parse_log
from no_docker.canary.show import render, summarize
from no_docker.canary.sniff import H2_PREFACE

DOCKER = "/usr/local/bin/docker"


def show(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "no_docker.canary", "show", *args], capture_output=True,
                          text=True, timeout=30)


@pytest.mark.skipif(not os.access(DOCKER, os.X_OK), reason=f"no docker CLI at {DOCKER}")
def test_show_a_log_of_real_clients(tmp_path):
    sock_path = str(tmp_path / "docker.sock")
    with started_canary(tmp_path, unix=[sock_path], tcp=["127.0.0.1:0"]) as canary:
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DOCKER_CONFIG": str(tmp_path),
               "DOCKER_HOST": f"unix://{sock_path}"}
        ps = subprocess.run([DOCKER, "ps", "--filter", "label=no-docker-route=seed-path"], env=env,
                            capture_output=True, timeout=60)
        assert ps.returncode == 0
        curl = subprocess.run(["curl", "-sS", "--unix-socket", sock_path, "http://d/_ping?route=curl-unix"],
                              capture_output=True, timeout=30)
        assert curl.returncode == 0
        with socket.create_connection(("127.0.0.1", canary.listener("tcp")["port"])) as sock:
            sock.sendall(H2_PREFACE)
            assert sock.recv(100) == b""
        curl_pid = next(r["peer"]["pid"] for r in canary.records() if r["kind"] == "connection"
                        and r["peer"].get("comm") == "curl")
        canary.stop()

    table = show(str(canary.log))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["SEQ", "TIME", "LISTENER", "PID", "STATUS", "ROUTE", "REQUEST"]
    ps_line = next(line for line in lines if "/containers/json" in line)
    assert "seed-path" in ps_line and "GET /v1.50/containers/json?filters=" in ps_line
    curl_line = next(line for line in lines if "curl-unix" in line)
    assert f" {curl_pid} " in curl_line and "GET /_ping?route=curl-unix" in curl_line
    assert any(line.rstrip().endswith("raw: h2 preface") and "127.0.0.1:0" in line for line in lines)
    assert f"  {sock_path}: 2 connections, 3 requests, 0 raw" in lines
    assert "  127.0.0.1:0: 1 connections, 0 requests, 1 raw" in lines
    assert "  seed-path: 1" in lines and "  curl-unix: 1" in lines

    as_json = json.loads(show(str(canary.log), "--json").stdout)
    assert as_json["per_route"] == {"curl-unix": 1, "seed-path": 1}
    assert as_json["totals"] == {"connection": 3, "request": 3, "raw": 1}
    assert [row["what"] for row in as_json["rows"]][-1] == "raw: h2 preface"


def test_show_of_a_missing_log_is_one_line_exit_1(tmp_path):
    done = show(str(tmp_path / "nope.jsonl"))
    assert done.returncode == 1
    assert done.stderr == (f"no-docker canary: show {tmp_path / 'nope.jsonl'}: cannot read: "
                           "No such file or directory\n")


def test_show_of_a_file_that_is_no_log_is_one_line_exit_1_but_an_empty_log_is_fine(tmp_path):
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(b"\x7fELF\xff\n[1, 2]\n")
    done = show(str(garbled))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"no-docker canary: show {garbled}: not a canary log: no line is a record "
                           "(line 1: not JSON (not UTF-8))\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    done = show(str(empty), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["rows"] == [], done.stderr


def test_render_names_unreadable_lines_and_never_drops_a_request():
    lines = [b'{"kind":"request","seq":1,"time":"2026-11-30T01:02:03.456789Z","listener":"l","conn":1,'
             b'"method":"POST","path":"/v1.50/' + b"x" * 300 + b'","query":"","status":404}\n',
             b'{"kind":"requ']
    text = render(summarize(parse_log(lines)))
    assert "POST /v1.50/" + "x" * 300 in text
    assert "01:02:03.456" in text
    assert "unreadable: line 2: not JSON" in text
