"""review and the `no-docker mutants` command line (real subprocesses of the installed CLI)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from no_docker.mutants import pins
from no_docker.mutants import review as rv
from no_docker.mutants.dynamic import Dynamic

PAYLOAD = pins.ROOT / "mutants" / "payloads" / "reach-engine.sh"
GOOD = "#!/usr/bin/env bash\n# route: ok (network) fine\ndocker ps --filter label=no-docker-route=ok\n"
BAD = "#!/usr/bin/env bash\n# route: bad (network) no\ndocker rm -f x\necho $UNQUOTED\n"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "mutants", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_review_of_the_pinned_payload_is_clean_and_identical():
    result = rv.review(PAYLOAD)
    assert result.clean, rv.render(result)
    assert result.old_sha256 == result.new_sha256
    assert len(result.routes) >= 40
    assert "identical to the pinned version" in result.diff


def test_review_shows_lint_shellcheck_routes_diff_and_hashes(tmp_path):
    path = tmp_path / "p.sh"
    path.write_text(BAD)
    pins_file = tmp_path / "pins.json"
    pins.write_pin("mutants/payloads/p.sh", "0" * 64, pins_file)
    result = rv.review(path, "mutants/payloads/p.sh", pins_file)
    text = rv.render(result)
    assert not result.clean
    assert any("destructive-engine-command" in f for f in result.lint)
    assert any("SC2086" in f for f in result.shellcheck), result.shellcheck
    assert [r.id for r in result.routes] == ["bad"]
    assert "0" * 64 in text and result.new_sha256 in text
    with pytest.raises(ValueError):
        rv.accept(result, pins_file)
    assert pins.load_pins(pins_file)["mutants/payloads/p.sh"] == "0" * 64


def test_accept_pins_a_clean_payload_only_when_the_dynamic_check_agrees(tmp_path):
    path = tmp_path / "p.sh"
    path.write_text(GOOD)
    pins_file = tmp_path / "pins.json"
    static_only = rv.review(path, "mutants/payloads/p.sh", pins_file)
    assert static_only.clean and not static_only.acceptable, rv.render(static_only)
    with pytest.raises(ValueError, match="dynamic check did not run"):
        rv.accept(static_only, pins_file)
    refused = rv.review(path, "mutants/payloads/p.sh", pins_file,
                        dynamic=lambda data: Dynamic(True, ["POST /containers/x/kill on /run/docker.sock"],
                                                     3, 0))
    with pytest.raises(ValueError, match="POST /containers/x/kill"):
        rv.accept(refused, pins_file)
    assert "mutants/payloads/p.sh" not in pins.load_pins(pins_file)
    result = rv.review(path, "mutants/payloads/p.sh", pins_file, dynamic=lambda data: Dynamic(True, [], 2, 0))
    assert result.acceptable, rv.render(result)
    assert "no pin yet" in result.diff and "dynamic: clean (2 canary records" in rv.render(result)
    rv.accept(result, pins_file)
    pins.verify_copy(path, "mutants/payloads/p.sh", pins_file)


def test_the_dynamic_check_never_runs_a_payload_the_lint_refused(tmp_path):
    path = tmp_path / "p.sh"
    path.write_text(BAD)
    ran = []
    result = rv.review(path, "mutants/payloads/p.sh", tmp_path / "pins.json", dynamic=ran.append)
    assert ran == [] and result.dynamic is not None and not result.dynamic.ran


def test_cli_lint_prints_file_line_col_reason_and_exits_1(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("echo ok\ndocker system prune -af\n")
    done = cli("lint", str(bad), str(PAYLOAD))
    assert done.returncode == 1
    assert done.stdout == f"{bad}:2:1: destructive-engine-command: docker system prune changes engine state\n"


def test_cli_lint_of_the_payload_exits_0():
    done = cli("lint", str(PAYLOAD))
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def test_cli_verify_exits_0_and_lists_every_pin():
    done = cli("verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   mutants/payloads/reach-engine.sh" in done.stdout


@pytest.mark.parametrize("args", [[], ["lint"], ["apply", "a"], ["frobnicate"], ["lint", "/no/such/file.sh"],
                                  ["lint", "/tmp"], ["lint", "/dev/null"], ["review", "/tmp"],
                                  ["lint", "/proc/self/mem"], ["review", "/proc/self/mem"]])  # EIO on read
def test_cli_usage_errors_exit_2_with_one_line(args):
    done = cli(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("no-docker: mutants:") and done.stderr.count("\n") == 1, done.stderr


def test_cli_apply_names_the_flag_or_file_it_cannot_use(tmp_path):
    target = pins.ROOT / "tests" / "fixtures" / "devenv" / "devenv.sh"
    binary = tmp_path / "tool.sh"
    binary.write_bytes(b"#!/bin/sh\n\xff\n")
    cases = [
        (["--out", str(tmp_path / "m.sh"), "--at", "NO SUCH MARKER"], target,
         f"no-docker: --at 'NO SUCH MARKER': not found in {target}"),
        (["--out", str(tmp_path / "missing" / "m.sh")], target,
         f"no-docker: --out {tmp_path / 'missing' / 'm.sh'}: cannot write: No such file or directory"),
        (["--out", str(tmp_path / "m.sh")], binary, f"no-docker: {binary}: not a UTF-8 text file (byte 10)"),
    ]
    for options, tgt, message in cases:
        done = cli("apply", str(PAYLOAD), str(tgt), *options)
        assert (done.returncode, done.stderr) == (2, message + "\n"), (options, done.stderr)


def test_cli_apply_refuses_a_copy_that_is_not_the_pinned_payload(tmp_path):
    copy = tmp_path / "reach-engine.sh"
    copy.write_text(PAYLOAD.read_text() + "\n")
    target = tmp_path / "t.sh"
    target.write_text("#!/bin/bash\necho hi\n")
    done = cli("apply", str(copy), str(target), "--out", str(tmp_path / "m.sh"),
               "--name", "mutants/payloads/reach-engine.sh")
    assert done.returncode == 1
    assert "does not match the pin" in done.stderr
    assert not (tmp_path / "m.sh").exists()
