"""The pure parts of ``no-docker prove``: evidence per route, rows, the verdict, the table."""

from __future__ import annotations

import subprocess
import sys

from no_docker.supervisor.proving import prove as pv


def _route_of(record):
    return record.get("route")


def test_addresses_in_maps_var_run_and_finds_ports():
    assert pv.addresses_in("HTTP/2 preface to /var/run/cri-dockerd.sock") == ["/run/cri-dockerd.sock"]
    tls = "a TLS ClientHello to 127.0.0.1:2376 (SNI carries the route)"
    assert pv.addresses_in(tls) == ["127.0.0.1:2376"]
    assert pv.addresses_in("docker found by PATH lookup") == []


def test_evidence_by_id_and_by_named_listener_only():
    records = [
        {"kind": "request", "route": "a", "listener": "/run/docker.sock"},
        {"kind": "raw", "route": None, "listener": "/run/containerd/containerd.sock"},
        {"kind": "connection", "route": None, "listener": "/run/containerd/containerd.sock"},
        {"kind": "raw", "route": None, "listener": "/run/crio/crio.sock"},
    ]
    assert pv.evidence("a", "anything", records, _route_of) == pv.Evidence(1, 0)
    preface = "HTTP/2 preface to /run/containerd/containerd.sock"
    grpc = pv.evidence("containerd-grpc", preface, records, _route_of)
    assert grpc == pv.Evidence(0, 1)  # the connection record alone is not evidence of the preface
    assert pv.evidence("b", "docker ps", records, _route_of) == pv.Evidence(0, 0)


def test_network_row_outcomes():
    none = pv.Evidence(0, 0)
    reached = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(2, 0), {"r": ("failed", "ENOENT")},
                             none)
    assert (reached.control_ok, reached.isolated_ok) == (True, True)
    assert reached.control.startswith("yes") and reached.isolated == "no (failed)"
    unavailable = pv.network_row("r", {"r": ("unavailable", "podman not found")}, none,
                                 {"r": ("unavailable", "")}, none)
    assert unavailable.control_ok is None and "podman not found" in unavailable.control
    silent = pv.network_row("r", {"r": ("unavailable", " ")}, none, {"r": ("failed", "")}, none)
    assert silent.control_ok is False  # unavailable without a reason is a miss, never a pass
    leaked = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0), {"r": ("reached", "")},
                            pv.Evidence(1, 0))
    assert leaked.isolated_ok is False and leaked.isolated.startswith("YES")
    skipped = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0), {}, none)
    assert skipped.isolated_ok is None and skipped.isolated == "NOT ATTEMPTED"
    hidden_tool = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0),
                                 {"r": ("unavailable", "python3: No such file")}, none)
    assert hidden_tool.isolated_ok is None and hidden_tool.isolated.startswith("NOT TRIED")
    missing_both = pv.network_row("r", {"r": ("unavailable", "ctr not found")}, none,
                                  {"r": ("unavailable", "ctr not found")}, none)
    assert missing_both.isolated_ok is True
    claimed = pv.network_row("r", {"r": ("reached", "")}, none, {"r": ("failed", "")}, none)
    assert claimed.control_ok is False  # the payload's word alone is not evidence
    listener = pv.network_row("r", {"r": ("failed", "tls handshake")}, pv.Evidence(0, 1),
                              {"r": ("failed", "")}, none)
    assert listener.control_ok is True  # the canary's record is, whatever the client thought


def test_record_route_reads_a_tls_hello_sni():
    import base64

    def sni_of(data):
        return data.decode() if data else None

    def raw(text):
        return {"kind": "raw", "raw_kind": "tls", "bytes": base64.b64encode(text.encode()).decode()}

    hello = raw("tls-2376-hello.no-docker-route.invalid")
    assert pv.record_route(hello, _route_of, sni_of) == "tls-2376-hello"
    assert pv.record_route(raw("example.com"), _route_of, sni_of) is None
    assert pv.record_route(raw("Bad_ID.no-docker-route.invalid"), _route_of, sni_of) is None
    assert pv.record_route({"kind": "raw", "raw_kind": "tls", "bytes": "!!"}, _route_of, sni_of) is None
    assert pv.record_route({"kind": "request", "route": "x"}, _route_of, sni_of) == "x"


def test_persistence_row_checks_files_not_words():
    ok = pv.persistence_row("bashrc", {"bashrc": ("written", "")}, {"bashrc": ("written", "")}, [])
    assert ok.isolated_ok  # written into the run's own empty home: nothing outside changed
    bad = pv.persistence_row("bashrc", {"bashrc": ("written", "")}, {"bashrc": ("blocked", "")},
                             ["created /h/.zshenv"])
    assert not bad.isolated_ok and "FILES CHANGED" in bad.isolated


def test_diff_digests():
    assert pv.diff_digests({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["changed b", "created c"]
    assert pv.diff_digests({"a": "1"}, {}) == ["removed a"]


def _row(route, control_ok, isolated_ok, kind="network"):
    return pv.Row(route, kind, "c", "i", control_ok, isolated_ok)


def test_verdict_statuses():
    good = [_row("a", True, True), _row("b", None, True), _row("p", True, True, "persistence")]
    assert pv.verdict(good, []).status == "PROVEN"
    assert pv.verdict(good, []).exit_status == 0
    assert pv.verdict(good, ["no docker CLI"]).status == "INCOMPLETE"
    assert pv.verdict(good, ["no docker CLI"]).exit_status == 125
    assert pv.verdict([_row("a", False, True)], []).status == "FAILED"
    leak = pv.verdict([_row("a", True, False)], ["no docker CLI"])
    assert leak.status == "FAILED" and "a" in leak.line  # a leak outranks incompleteness
    assert pv.verdict(good, [], extra_records=3).status == "FAILED"
    assert pv.verdict([], []).status == "FAILED"  # nothing declared proves nothing
    assert pv.verdict([], ["bwrap is missing"]).status == "INCOMPLETE"  # nothing could run
    no_cli = pv.verdict([_row("a", False, True)], ["no docker CLI"])
    assert no_cli.status == "INCOMPLETE" and "the control did not reach: a" in no_cli.line
    untried = pv.verdict([*good, _row("c", True, None)], [])
    assert untried.status == "INCOMPLETE" and "not tried inside the run: c" in untried.line


def test_render_table_has_one_line_per_row_and_the_headings():
    text = pv.render_table([_row("docker-host-inherited", True, True), _row("x", None, True)])
    lines = text.splitlines()
    assert lines[0].split() == ["route", "kind", "reached", "without", "isolation",
                                "reached", "with", "isolation"]
    assert len(lines) == 4 and lines[2].startswith("docker-host-inherited")


def test_prove_bad_arguments_are_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "prove", "--bogus"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    expected = "no-docker: prove: unknown argument '--bogus'; usage: no-docker prove [--real-engine] [--json]"
    assert done.stderr.strip() == expected
    assert "Traceback" not in done.stderr


def test_shipped_fixture_target_is_the_tests_copy():
    from pathlib import Path

    tests_copy = Path(__file__).resolve().parents[1] / "fixtures" / "devenv" / pv.DEVENV_SCRIPT_NAME
    assert tests_copy.read_text() == pv.DEVENV_SCRIPT
    assert pv.MUTANT_MARKER in pv.DEVENV_SCRIPT


def test_persistence_rows_read_plainly():
    """Issue 18.11: "no (files unchanged; written)" read as if the write had happened outside."""
    cron = ("unavailable", "crontab not found")
    control = {"bashrc": ("written", ""), "git-config": ("written", ""), "crontab": cron}
    inside = {"bashrc": ("written", ""), "git-config": ("blocked", ""), "crontab": cron}
    rows = {r: pv.persistence_row(r, control, inside, []) for r in control}
    assert (rows["bashrc"].control, rows["bashrc"].isolated) == (
        "yes (written)", "no (written inside, thrown away; outside unchanged)")
    assert rows["git-config"].isolated == "no (the write was refused; outside unchanged)"
    assert rows["crontab"].isolated == "no (crontab not found inside; outside unchanged)"
    assert rows["crontab"].control_ok is None
