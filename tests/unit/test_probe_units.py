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


def _run_probe_on_host(tmp_path, plan_items, command):
    """Run the probe exactly as a fake bwrap would: on the host, with a plan fd."""
    data = encode_plan(plan_items)
    fd = os.memfd_create("plan", 0)
    os.write(fd, data)
    marker = tmp_path / "cmd-ran"
    try:
        return subprocess.run([sys.executable, "-I", "-S", PROBE, "--plan-fd", str(fd), "--",
                               "sh", "-c", f"touch {marker}"], pass_fds=(fd,), capture_output=True,
                              text=True, timeout=30), marker
    finally:
        os.close(fd)


def test_probe_on_the_host_refuses_at_p1_and_does_not_run_the_command(tmp_path):
    items = [("t0", "0"), ("home", "/nonexistent")] + [(f"ns.{k}", v) for k, v in namespace_ids().items()]
    result, marker = _run_probe_on_host(tmp_path, items, None)
    assert result.returncode == 125
    assert result.stderr.startswith("no-docker: P1 not proven: same pid namespace"), result.stderr
    assert not marker.exists()


def test_probe_with_a_lying_plan_still_refuses(tmp_path):
    # The plan claims other outside namespaces: the kernel's view still gives the host away
    # (the init pid namespace's fixed inode, or else a /proc full of outside processes).
    items = [(f"ns.{k}", "pid:[1]") for k in ("pid", "net", "ipc", "uts")]
    result, marker = _run_probe_on_host(tmp_path, items, None)
    assert result.returncode == 125
    assert ("P1 not proven: same pid namespace as outside (pid:[4026531836])" in result.stderr
            or "P1 not proven: /proc shows" in result.stderr), result.stderr
    assert not marker.exists()


def test_probe_bad_arguments_refuse():
    result = subprocess.run([sys.executable, "-I", "-S", PROBE, "--bogus", "1", "--", "true"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 125 and "bad arguments" in result.stderr


def test_probe_imports_only_cheap_stdlib():
    argv = [sys.executable, "-I", "-S", "-X", "importtime", PROBE, "--bogus", "1", "--", "true"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "_socket" in imported  # the measurement works
    for heavy in ("socket", "json", "re", "enum", "subprocess", "typing"):
        assert heavy not in imported, sorted(imported)
    assert not any(name.startswith("no_docker") for name in imported)


def test_probe_program_is_a_fresh_compiled_file(tmp_path):
    from no_docker.supervisor.isolation.plan import probe_program

    source = tmp_path / "probe.py"
    source.write_text("print('v1')\n")
    compiled = probe_program(str(source))
    assert compiled.endswith(".pyc") and os.path.exists(compiled)
    ran = subprocess.run([sys.executable, "-I", "-S", compiled], capture_output=True, text=True)
    assert ran.stdout == "v1\n"
    assert probe_program(str(source)) == compiled  # fresh: reused
    source.write_text("print('v2, longer')\n")  # another size: stale, recompiled
    assert subprocess.run([sys.executable, "-I", "-S", probe_program(str(source))], capture_output=True,
                          text=True).stdout == "v2, longer\n"


def test_probe_program_falls_back_to_the_source_when_it_cannot_compile(tmp_path):
    from no_docker.supervisor.isolation.plan import probe_program

    source = tmp_path / "probe.py"
    source.write_text("print('x')\n")
    (tmp_path / "__pycache__").write_text("not a directory")  # the cache cannot be made
    assert probe_program(str(source)) == str(source)


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
