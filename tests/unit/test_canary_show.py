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
    assert lines[0].split() == ["SEQ", "TIME", "LISTENER", "PEER", "STATUS", "ROUTE", "REQUEST"]
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


def _log(*records: dict) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in records]


def test_show_json_keeps_pid_an_integer_and_gives_a_tcp_peer_its_own_field():
    # Issue 18 item 11: `pid` was the TCP peer's address (a string) on TCP rows.
    t = "2026-11-30T01:02:03.456789Z"
    lines = _log(
        {"kind": "connection", "seq": 1, "time": t, "listener": "/s", "conn": 1,
         "peer": {"pid": 4242, "uid": 0, "gid": 0, "comm": "curl"}},
        {"kind": "request", "seq": 2, "time": t, "listener": "/s", "conn": 1, "method": "GET",
         "path": "/_ping", "query": "", "status": 200},
        {"kind": "connection", "seq": 3, "time": t, "listener": "127.0.0.1:0", "conn": 2,
         "peer": {"address": "127.0.0.1", "port": 40522}},
        {"kind": "raw", "seq": 4, "time": t, "listener": "127.0.0.1:0", "conn": 2, "summary": "h2 preface"},
        {"kind": "connection", "seq": 5, "time": t, "listener": "[::1]:2375", "conn": 3,
         "peer": {"address": "::1", "port": 5}},
        {"kind": "request", "seq": 6, "time": t, "listener": "[::1]:2375", "conn": 3, "method": "GET",
         "path": "/v", "query": "", "status": 200},
    )
    rows = summarize(parse_log(lines)).as_json()["rows"]
    assert [(r["pid"], r["peer_address"]) for r in rows] == [(4242, None), (None, "127.0.0.1:40522"),
                                                            (None, "[::1]:5")]
    text = render(summarize(parse_log(lines))).splitlines()
    assert text[0].split() == ["SEQ", "TIME", "LISTENER", "PEER", "STATUS", "ROUTE", "REQUEST"]
    assert text[1].split()[3] == "4242" and text[2].split()[3] == "127.0.0.1:40522"
    assert text[3].split()[3] == "[::1]:5"


def test_show_reads_old_and_odd_peers_without_error():
    # Logs written before this change hold the same records; older or hand-edited ones may
    # lack a peer, carry SO_PEERCRED's error, or a pid that is not a number: never a string
    # (nor a bool) in `pid`, never a traceback.
    t = "2026-11-30T01:02:03.456789Z"
    peers = [None, {"error": "Bad file descriptor"}, {"pid": "4242"}, {"pid": True}, "pid 1",
             {"address": "127.0.0.1"}, {"pid": 0, "uid": 0, "gid": 0}]
    records = []
    for n, peer in enumerate(peers, start=1):
        connection = {"kind": "connection", "seq": 2 * n - 1, "time": t, "listener": "l", "conn": n}
        if peer is not None:
            connection["peer"] = peer
        records += [connection, {"kind": "request", "seq": 2 * n, "time": t, "listener": "l", "conn": n,
                                 "method": "GET", "path": "/_ping", "query": "", "status": 200}]
    records.append({"kind": "request", "seq": 99, "time": t, "listener": "l", "conn": 77, "method": "GET",
                    "path": "/no-connection-record", "query": "", "status": 200})
    records.append({"kind": "connection", "seq": 100, "time": t, "listener": "l", "conn": [8],
                    "peer": {"pid": 8}})
    records.append({"kind": "request", "seq": 101, "time": t, "listener": "l", "conn": [8], "method": "GET",
                    "path": "/a-conn-that-is-a-list", "query": "", "status": 200})
    summary = summarize(parse_log(_log(*records)))
    assert [(r["pid"], r["peer_address"]) for r in summary.as_json()["rows"]] == [
        (None, None), (None, None), (None, None), (None, None), (None, None), (None, "127.0.0.1"), (0, None),
        (None, None), (8, None)]
    assert render(summary).count("\n") > len(peers)
