"""apply: a pinned, lint-clean payload goes into bash, sh and Python targets at the marker; an
unpinned, tampered or unlinted payload never does. The mutants run here carry a harmless
payload (it only appends to the route log): the real one runs only inside a namespace."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import apply as ap
from no_docker.mutants import pins
from no_docker.supervisor.errors import UsageError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mutants"
NAME = "mutants/payloads/test-payload.sh"
# `false` and an unset variable prove the target's `set -euo pipefail` does not stop the payload.
PAYLOAD = """#!/usr/bin/env bash
# route: applied (network) the test payload ran
false
log=${NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log}
printf '%s\\n' "applied attempted reached ${UNSET_IN_TARGET:-}" >> "$log"
"""


@pytest.fixture
def pinned_payload(tmp_path):
    payload = tmp_path / "test-payload.sh"
    payload.write_text(PAYLOAD)
    pins_file = tmp_path / "pins.json"
    pins.write_pin(NAME, pins.sha256_file(payload), pins_file)
    return payload, pins_file


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_bash_mutant_runs_payload_at_marker_and_target_goes_on(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    out = tmp_path / "devenv-mutant"
    mutant = ap.apply(payload, FIXTURES / "devenv", out, "# no-docker: mutant here", name=NAME,
                      pins_file=pins_file)
    assert mutant.language == "bash"
    lines = out.read_text().splitlines()
    assert lines[mutant.line - 1] == "# no-docker: mutant here"
    assert lines[mutant.line].startswith("# >>> no-docker mutant: " + NAME)
    assert out.stat().st_mode & 0o111, "the mutant keeps the target's executable bit"
    done = run(["bash", str(out), "no-such-command"], tmp_path)
    assert done.returncode == 2 and "usage: devenv" in done.stderr  # the target ran on after the payload
    assert (tmp_path / "no-docker-routes.log").read_text() == "applied attempted reached \n"


def test_sh_target_feeds_the_payload_to_bash(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    target = tmp_path / "t.sh"
    target.write_text("#!/bin/sh\nset -eu\necho before\n# MARK\necho after\n")
    out = tmp_path / "m.sh"
    assert ap.apply(payload, target, out, "# MARK", name=NAME, pins_file=pins_file).language == "sh"
    done = run(["sh", str(out)], tmp_path)
    assert done.stdout == "before\nafter\n", done.stderr
    assert "applied attempted reached" in (tmp_path / "no-docker-routes.log").read_text()


def test_python_mutant_runs_payload_through_bash(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    target = tmp_path / "tool.py"
    target.write_text('"""doc"""\nfrom __future__ import annotations\nimport sys\n\nprint("after")\n')
    out = tmp_path / "m.py"
    mutant = ap.apply(payload, target, out, name=NAME, pins_file=pins_file)
    assert mutant.line == 3, "default: after the top-level imports"
    done = run([sys.executable, str(out)], tmp_path)
    assert done.stdout == "after\n", done.stderr
    assert "applied attempted reached" in (tmp_path / "no-docker-routes.log").read_text()


def test_python_marker_inside_a_function_is_indented(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    out = tmp_path / "m.py"
    ap.apply(payload, FIXTURES / "devenv.py", out, "# no-docker: mutant here", name=NAME, pins_file=pins_file)
    tree = ast.parse(out.read_text())
    up = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "up")
    calls = [n for n in ast.walk(up) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "run"
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "_no_docker_subprocess"]
    assert len(calls) == 1, "the payload call sits inside up(), where the marker is"


def test_tampered_payload_is_refused_and_nothing_is_written(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    payload.write_text(PAYLOAD + "docker ps\n")
    out = tmp_path / "m.sh"
    with pytest.raises(pins.PinError, match="does not match the pin"):
        ap.apply(payload, FIXTURES / "devenv", out, name=NAME, pins_file=pins_file)
    assert not out.exists()


def test_pinned_but_unlinted_payload_is_refused(tmp_path):
    payload = tmp_path / "bad.sh"
    payload.write_text("#!/bin/bash\ndocker rm -f x\n")
    pins_file = tmp_path / "pins.json"
    pins.write_pin(NAME, pins.sha256_file(payload), pins_file)
    with pytest.raises(ap.ApplyError, match="destructive-engine-command"):
        ap.apply(payload, FIXTURES / "devenv", tmp_path / "m.sh", name=NAME, pins_file=pins_file)


def test_unpinned_payload_is_refused(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    with pytest.raises(pins.PinError, match="no pin"):
        ap.apply(payload, FIXTURES / "devenv", tmp_path / "m.sh", name="mutants/payloads/nope.sh",
                 pins_file=pins_file)


@pytest.mark.parametrize(("marker", "message"), [("NOT THERE", "not found"), ("docker", "make it unique")])
def test_marker_must_exist_once(tmp_path, pinned_payload, marker, message):
    payload, pins_file = pinned_payload
    with pytest.raises(UsageError, match=message):
        ap.apply(payload, FIXTURES / "devenv", tmp_path / "m.sh", marker, name=NAME, pins_file=pins_file)


def test_out_may_not_be_the_target(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    target = tmp_path / "t.sh"
    target.write_text("#!/bin/bash\necho hi\n")
    with pytest.raises(UsageError, match="target itself"):
        ap.apply(payload, target, target, name=NAME, pins_file=pins_file)
    assert target.read_text() == "#!/bin/bash\necho hi\n"


def test_real_payload_applies_to_both_fixtures(tmp_path):
    """The pinned payload and the realistic targets: the mutants parse (not run here)."""
    payload = pins.ROOT / "mutants" / "payloads" / "reach-engine.sh"
    out_sh, out_py = tmp_path / "devenv", tmp_path / "devenv.py"
    ap.apply(payload, FIXTURES / "devenv", out_sh, "# no-docker: mutant here")
    ap.apply(payload, FIXTURES / "devenv.py", out_py, "# no-docker: mutant here")
    assert subprocess.run(["bash", "-n", str(out_sh)], capture_output=True, timeout=120).returncode == 0
    ast.parse(out_py.read_text())
    assert payload.read_text().split("\n", 1)[1] in out_sh.read_text()


def test_a_binary_target_or_an_unwritable_out_is_a_usage_error(tmp_path, pinned_payload):
    payload, pins_file = pinned_payload
    binary = tmp_path / "tool.sh"
    binary.write_bytes(b"#!/bin/sh\n\xff\xfe\x00")
    with pytest.raises(UsageError, match=r"tool\.sh: not a UTF-8 text file"):
        ap.apply(payload, binary, tmp_path / "m.sh", name=NAME, pins_file=pins_file)
    for out in (tmp_path / "missing" / "m.sh", tmp_path):
        with pytest.raises(UsageError, match=rf"--out {re.escape(str(out))}: cannot write"):
            ap.apply(payload, FIXTURES / "devenv", out, name=NAME, pins_file=pins_file)
