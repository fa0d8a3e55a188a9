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
    assert reached.control == "reached the canary" and reached.isolated == "did not reach it"
    assert reached.isolated_why == "the mutant said: failed: ENOENT"  # kept in full for --json
    unavailable = pv.network_row("r", {"r": ("unavailable", "podman not found")}, none,
                                 {"r": ("unavailable", "")}, none)
    assert unavailable.control_ok is None and unavailable.control == "unavailable here"
    assert unavailable.control_why == "podman is not installed on this machine (not on PATH)"
    silent = pv.network_row("r", {"r": ("unavailable", " ")}, none, {"r": ("failed", "")}, none)
    assert silent.control_ok is False  # unavailable without a reason is a miss, never a pass
    leaked = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0), {"r": ("reached", "")},
                            pv.Evidence(1, 0))
    assert leaked.isolated_ok is False and leaked.isolated == "REACHED THE CANARY (1 record)"
    skipped = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0), {}, none)
    assert skipped.isolated_ok is None and skipped.isolated == "NOT ATTEMPTED"
    hidden_tool = pv.network_row("r", {"r": ("reached", "")}, pv.Evidence(1, 0),
                                 {"r": ("unavailable", "python3: No such file")}, none)
    assert hidden_tool.isolated_ok is None and hidden_tool.isolated.startswith("NOT TRIED")
    assert "python3: No such file" in hidden_tool.isolated_why
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


def test_a_missed_route_is_said_with_what_the_control_saw():
    """CI, 2026-12-02: "the control did not reach: podman-cli" said nothing of why (a cold
    page cache: a timeout); the line now carries the reason."""
    missed = pv.Row("podman-cli", "network", "failed", "i", False, True,
                    control_why="the mutant said: failed: timeout after 15s")
    line = pv.verdict([missed, _row("b", True, True)], []).line
    assert "the control did not reach: podman-cli (the mutant said: failed: timeout after 15s)" in line
    assert "the control did not reach: a;" in pv.verdict([_row("a", False, True)], ["x"]).line


def test_warm_engine_clients_reads_each_installed_client_once(tmp_path):
    exe = tmp_path / "podman"
    exe.write_bytes(b"x" * (3 << 20))
    unreadable = tmp_path / "docker"  # a directory: open() fails, the client is skipped
    unreadable.mkdir()
    where = {"podman": str(exe), "docker": str(unreadable)}
    assert pv.warm_engine_clients(where.get) == [str(exe)]
    assert pv.warm_engine_clients(lambda name: None) == []
    assert {"docker", "podman"} <= set(pv.ENGINE_CLIENTS)


def test_render_table_has_one_line_per_row_and_the_headings():
    text = pv.render_table([_row("docker-host-inherited", True, True), _row("x", None, True)])
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["route", "kind"]
    assert "without isolation (the control)" in lines[0] and "under no-docker run" in lines[0]
    assert len(lines) == 4 and lines[2].startswith("docker-host-inherited")


LONG = ("timeout: failed to run command ‘/usr/bin/docker’: No such file or directory, and a reason "
        "much longer than any column: " + "x" * 200)


def test_reasons_are_never_cut_on_screen_or_in_json():
    """Issue 28.4: reasons were cut at 60 characters, also in --json."""
    none = pv.Evidence(0, 0)
    row = pv.network_row("r", {"r": ("failed", LONG)}, none, {"r": ("failed", "")}, none, tried="a route")
    assert row.control == "DID NOT REACH the canary" and row.control_why == f"the mutant said: failed: {LONG}"
    text = pv.render_table([row])
    assert f"[1] the mutant said: failed: {LONG}" in text.splitlines()
    assert "..." not in text


def test_the_same_reason_is_one_note():
    rows = [pv.network_row(r, {r: ("unavailable", "ctr not found")}, pv.Evidence(0, 0), {}, pv.Evidence(0, 0))
            for r in ("a", "b")]
    notes = [line for line in pv.render_table(rows).splitlines() if line.startswith("[")]
    assert notes == ["[1] ctr is not installed on this machine (not on PATH)",
                     "[2] the mutant never tried it inside the run"]


def test_a_missing_command_reads_as_missing_not_as_a_timeout():
    said = "timeout: failed to run command ‘/usr/bin/docker’: No such file or directory"
    assert pv.plain_reason(said) == "/usr/bin/docker is not installed on this machine"
    assert pv.plain_reason("timeout: failed to run command 'x': Permission denied") == (
        "x cannot be run here: Permission denied")
    assert pv.plain_reason("exit 3: something else") == "exit 3: something else"


def test_a_route_the_control_cannot_take_is_unavailable_not_failed():
    """Issue 26.4: sudo without rights read as a failure of the proof."""
    none = pv.Evidence(0, 0)
    control = {"sudo": ("failed", "exit 1: sudo: a password is required")}
    why = pv.sudo_refusal(1, "sudo: a password is required\n", 1000)
    assert why is not None and "sudo: a password is required" in why and "uid 1000" in why
    row = pv.network_row("sudo", control, none, {"sudo": ("failed", "")}, none, cannot=why)
    assert (row.control, row.control_ok, row.control_why) == ("unavailable here", None, why)
    assert row.isolated_ok is True  # the isolated side is judged as ever
    result = pv.verdict([row, _row("a", True, True)], [])
    assert result.status == "PROVEN" and "(1 unavailable here, not counted)" in result.line


def test_a_precondition_never_hides_what_reached_or_leaked():
    """`cannot` only explains a miss: a control that reached is reached, a leak is a leak."""
    one = pv.Evidence(1, 0)
    row = pv.network_row("sudo", {"sudo": ("reached", "")}, one, {"sudo": ("reached", "")}, one,
                         cannot="sudo refuses")
    assert row.control_ok is True and row.isolated_ok is False
    assert pv.verdict([row], []).status == "FAILED"


def test_sudo_refusal_reads_sudos_last_line():
    assert pv.sudo_refusal(0, "", 0) is None
    assert "(exit 1)" in pv.sudo_refusal(1, "", 65534)
    audit = "sudo: error initializing audit plugin sudoers_audit\n"
    assert "(sudo: error initializing audit plugin sudoers_audit)" in pv.sudo_refusal(1, audit, 65534)


def test_the_verdict_counts_every_row():
    """Issue 28.4: the verdict counted only the network rows."""
    rows = [_row("a", True, True), _row("b", None, True), _row("p", True, True, "persistence"),
            _row("q", None, True, "persistence")]
    line = pv.verdict(rows, []).line
    assert line.startswith("no-docker prove: PROVEN - 2 network routes: without isolation 1 of 1 reached")
    assert "2 persistence routes: without isolation 1 of 1 tried their write (1 unavailable here" in line
    assert "under no-docker run 0 changed a file outside" in line


def test_new_routes_reads_only_complete_lines():
    text = "a attempted reached\nb attempted failed exit 1\nc attempted re"
    assert pv.new_routes(text, 0) == ["a", "b"]
    assert pv.new_routes(text, 1) == ["b"]
    assert pv.new_routes("", 0) == []


class _Stream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_progress_is_one_updating_line_on_a_terminal_and_plain_lines_elsewhere():
    plain, term = _Stream(False), _Stream(True)
    for stream in (plain, term):
        say = pv.Progress(stream)
        say("stage one")
        say("route 1", transient=True)
        say("route 2", transient=True)
        say.close()
    assert plain.text == "stage one\nroute 1\nroute 2\n"
    assert term.text == "\r\033[Kstage one\n\r\033[Kroute 1\r\033[Kroute 2\r\033[K"


def test_on_a_terminal_only_the_updating_line_is_cut(monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")  # shutil.get_terminal_size reads it first
    term = _Stream(True)
    say = pv.Progress(term)
    say("a stage that is longer than thirty columns")
    say("a route line that is longer than thirty columns", transient=True)
    assert term.text == ("\r\033[Ka stage that is longer than thirty columns\n"
                         "\r\033[Ka route line that is longer t")


def test_watching_says_each_route_and_stops(tmp_path):
    import time

    log = tmp_path / "routes.log"
    said = []
    with pv.watching(log, 2, "label", lambda text, **kw: said.append(text), interval=0.01):
        log.write_text("a attempted reached\n")
        time.sleep(0.2)
        log.write_text("a attempted reached\nb attempted failed\n")
    # the last poll runs after the body: nothing the mutant logged is left unsaid
    assert said == ["no-docker: label: route 1 of 2 tried (a)", "no-docker: label: route 2 of 2 tried (b)"]


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
        "wrote the file", "outside unchanged (written inside, thrown away)")
    assert rows["git-config"].isolated == "outside unchanged (the write was refused)"
    assert rows["crontab"].isolated == "outside unchanged (unavailable inside too)"
    assert rows["crontab"].control_why == "crontab is not installed on this machine (not on PATH)"
    later = pv.persistence_row("pytest-config", {"pytest-config": ("written", "")},
                               {"pytest-config": ("written", "")}, [])
    assert later.isolated == "outside unchanged (written in the work dir, moved aside at the end)"
    assert rows["crontab"].control_ok is None
