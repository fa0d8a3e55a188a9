"""The probe's pure parts, and the probe refusing when it is not in a sandbox (real host)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.isolation import probe
from no_docker.supervisor.isolation.plan import encode_plan, namespace_ids

PROBE = probe.__file__


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["unix", "tcp", "home", "ns.pid"]),
                          st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)), max_size=20))
def test_plan_round_trip(items):
    decoded = probe.decode_plan(encode_plan(items))
    for key in {k for k, _ in items}:
        assert decoded[key] == [v for k, v in items if k == key]


def test_plan_rejects_bad_keys_and_lines():
    with pytest.raises(ValueError):
        encode_plan([("two words", "x")])
    with pytest.raises(ValueError):
        probe.decode_plan(b"keyonly\n")


def test_mountinfo_with_escapes():
    text = ("116 93 0:46 /newroot / ro,nosuid - tmpfs tmpfs rw\n"
            "130 129 254:0 /tmp/a\\040b /tmp/a\\040b rw,relatime - ext4 /dev/vda rw\n"
            "131 130 0:6 /null /tmp/a\\040b/s.sock ro - devtmpfs devtmpfs rw\n")
    assert probe.parse_mountinfo(text) == [("/", False, "tmpfs", "0:46"), ("/tmp/a b", True, "ext4", "254:0"),
                                           ("/tmp/a b/s.sock", False, "devtmpfs", "0:6")]
    with pytest.raises(ValueError):
        probe.parse_mountinfo("garbage without separator\n")


def test_status_fields():
    fields = probe.status_fields("Name:\tpython\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n")
    assert fields["CapEff"] == "0000000000000000" and fields["NoNewPrivs"] == "1"


def test_expand_engine_paths():
    assert probe.expand("~/.docker/run/docker.sock", "/home/u", "") == "/home/u/.docker/run/docker.sock"
    assert probe.expand("$XDG/docker.sock", "/home/u", "/run/user/1000") == "/run/user/1000/docker.sock"
    assert probe.expand("$XDG/docker.sock", "/home/u", "") is None
    assert probe.expand("/run/docker.sock", "", "") == "/run/docker.sock"


def test_try_write_leaves_nothing_behind(tmp_path):
    assert probe.try_write(str(tmp_path)) is None  # writable: O_TMPFILE worked
    assert list(tmp_path.iterdir()) == []
    target = tmp_path / "f"
    target.write_text("keep")
    assert probe.try_write(str(target)) is None
    assert target.read_text() == "keep"
    assert probe.try_write(str(tmp_path / "missing")) is not None


def test_try_connect_refused_for_missing_path(tmp_path):
    import _socket
    import errno

    assert probe.try_connect(_socket.AF_UNIX, str(tmp_path / "none.sock")) == errno.ENOENT


def test_probe_on_the_host_refuses_at_p1():
    # What a prover that joined nothing would see: the host. Refused at P1, the first check,
    # before anything reaches out.
    plan = {"t0": ["0"], "home": ["/nonexistent"], **{f"ns.{k}": [v] for k, v in namespace_ids().items()}}
    with pytest.raises(probe.NotProven, match="same pid namespace") as info:
        probe.Probe(plan, gate=True).run_all()
    assert info.value.prop == "P1"


def test_probe_with_a_lying_plan_still_refuses():
    # The plan claims other outside namespaces: the kernel's view still gives the host away
    # (the init pid namespace's fixed inode, or else a /proc full of outside processes).
    plan = {f"ns.{k}": ["pid:[1]"] for k in ("pid", "net", "ipc", "uts")}
    with pytest.raises(probe.NotProven) as info:
        probe.Probe(plan, gate=True).run_all()
    assert info.value.prop == "P1"
    assert ("same pid namespace as outside (pid:[4026531836])" in str(info.value)
            or "/proc shows" in str(info.value)), info.value


def test_probe_imports_only_cheap_stdlib():
    # The supervisor imports it for the prover on every run, and `check` inside a run.
    code = f"import sys; sys.path.insert(0, {os.path.dirname(PROBE)!r}); import probe"
    argv = [sys.executable, "-I", "-S", "-X", "importtime", "-c", code]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "_socket" in imported and "probe" in imported  # the measurement works
    for heavy in ("socket", "json", "re", "enum", "subprocess", "typing"):
        assert heavy not in imported, sorted(imported)
    assert not any(name.startswith("no_docker") for name in imported)


@pytest.mark.parametrize("family, host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_listening_tcp_lists_a_listener_of_this_namespace(family, host):
    # P2's table of listeners (the gate proves the run's namespace has none before CMD) comes
    # from a sock_diag dump; a listener of ours must be in it, and gone once closed.
    with socket.socket(family) as server:
        try:
            server.bind((host, 0))
        except OSError as err:
            pytest.skip(f"no {host} here: {err}")
        server.listen(1)
        port = server.getsockname()[1]
        assert port in probe.listening_tcp(family)
    assert port not in probe.listening_tcp(family)


def test_the_held_proof_never_tries_sudo_and_check_does(monkeypatch):
    # Issue 26's decision: the per-run proof (held) rests P5 on NoNewPrivs and the empty
    # capability sets; `check` keeps the sudo try, waited for in its own step.
    tried = []
    monkeypatch.setattr(probe.Probe, "start_sudo", lambda self: tried.append(self.held is not None))
    held = probe.Probe({}, gate=True, held=probe.Held(frozenset(), (), None))
    assert "p5_sudo" not in [check.__name__ for _, check in held.steps()]
    for name in [check.__name__ for _, check in held.steps()]:
        monkeypatch.setattr(held, name, lambda: None)
    monkeypatch.setattr(held, "finish_userns_try", lambda: None)
    monkeypatch.setattr(probe, "visible_pids", lambda: [1])
    held.run_all()
    assert tried == [] and "P5" in held.proven
    check = probe.Probe({}, gate=False)
    steps = [(prop, step.__name__) for prop, step in check.steps()]
    assert steps.index(("P5", "p5_sudo")) == steps.index(("P5", "p5")) + 1
