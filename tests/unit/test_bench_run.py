"""The pure parts of the start-up bench (tests/bench/bench_run.py, regular_install.py): CPU time from
rusage, ratios, issue 14's targets, the Markdown table, the clean-install check, the cache key;
and the one OS-facing part the CPU figure rests on: a descendant its parent did not reap (bwrap
leaves its namespace init so) is reaped by the bench and its CPU counted. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import bench_run  # noqa: E402
import regular_install  # noqa: E402


def usage(user_s: float, sys_s: float) -> SimpleNamespace:
    return SimpleNamespace(ru_utime=user_s, ru_stime=sys_s)


def test_cpu_ms_reads_user_and_sys_in_ms():
    assert bench_run.cpu_ms(usage(0.012, 0.0035)) == pytest.approx((12.0, 3.5))


def test_cpu_delta_is_user_plus_sys_between_two_readings():
    assert bench_run.cpu_delta_ms(usage(1.0, 0.5), usage(1.020, 0.505)) == pytest.approx(25.0)


def test_cpu_delta_refuses_swapped_readings():
    with pytest.raises(ValueError, match="went backwards"):
        bench_run.cpu_delta_ms(usage(1.020, 0.505), usage(1.0, 0.5))


def test_cpu_delta_of_real_children_usage_is_not_negative():
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "sum(range(200000))"], check=True, timeout=120)
    assert bench_run.cpu_delta_ms(before, resource.getrusage(resource.RUSAGE_CHILDREN)) > 0


def test_ratios_against_every_reference_measured():
    got = bench_run.ratios({"no_docker": 50.0, "firejail": 25.0, "bwrap_same_flags": 5.0, "unshare": 2.5})
    assert got["no_docker/firejail"] == 2.0
    assert got["no_docker/bwrap_same_flags"] == 10.0
    assert got["firejail/bwrap_same_flags"] == 5.0 and got["bwrap_same_flags/firejail"] == 0.2
    assert "no_docker/unshare" not in got  # unshare is not a reference
    assert "firejail/firejail" not in got


def test_ratios_skip_a_reference_absent_or_zero():
    assert bench_run.ratios({"no_docker": 50.0, "bwrap_same_flags": 0.0}) == {}


@pytest.mark.parametrize(("wall", "fire_wall", "cpu", "fire_cpu", "met"), [
    (30.0, 30.01, 7.5, 5.0, (True, True, True, True, True)),       # every boundary on the right side
    (30.01, 40.0, 7.51, 5.0, (False, True, False, True, False)),   # just over 30 ms (6x bwrap), 1.5x
    (20.0, 20.0, 1.0, 5.0, (True, False, True, True, True)),       # as fast as firejail is not faster
    (24.0, 30.0, 20.01, 5.0, (True, True, False, False, True)),    # just over 4x firejail's CPU
])
def test_targets_at_their_boundaries(wall, fire_wall, cpu, fire_cpu, met):
    rows = bench_run.targets({"no_docker": wall, "firejail": fire_wall, "bwrap_same_flags": 5.0},
                             {"no_docker": cpu, "firejail": fire_cpu}, {})
    assert tuple(rows[k]["met"] for k in bench_run.TARGET_ORDER) == met
    assert rows["wall_at_most_30_ms"]["value"] == wall
    assert rows["wall_below_firejail"]["value"] == round(wall / fire_wall, 2)
    assert rows["cpu_at_most_1_5x_firejail"]["value"] == round(cpu / fire_cpu, 2)
    assert rows["cpu_at_most_4x_firejail"]["value"] == round(cpu / fire_cpu, 2)
    assert rows["wall_at_most_6x_bwrap"]["value"] == round(wall / 5.0, 2)
    assert all("why" not in row for row in rows.values())


def test_targets_without_firejail_say_why_not_met():
    rows = bench_run.targets({"no_docker": 20.0}, {"no_docker": 10.0},
                             {"firejail": "firejail not installed (apt-get install firejail)"})
    assert rows["wall_at_most_30_ms"]["met"] is True
    for key in ("wall_below_firejail", "cpu_at_most_1_5x_firejail", "cpu_at_most_4x_firejail"):
        assert rows[key]["met"] is None and rows[key]["value"] is None
        assert "firejail not installed" in rows[key]["why"]


def test_targets_without_no_docker_are_all_unmet_with_its_error():
    rows = bench_run.targets({"firejail": 30.0}, {"firejail": 5.0}, {"no_docker": "no regular install: boom"})
    assert all(row["met"] is None and "boom" in row["why"] for row in rows.values())


def _doc() -> dict:
    wall = {"no_docker": 50.0, "bwrap_same_flags": 5.0, "firejail": 25.0}
    cpu = {"no_docker": 40.0, "bwrap_same_flags": 4.0, "firejail": 5.0}
    return {"runs": 3, "cpus": 2, "median_ms": wall, "cpu_median_ms": cpu,
            "ratios": {"wall": bench_run.ratios(wall), "cpu": bench_run.ratios(cpu)},
            "targets": bench_run.targets(wall, cpu, {}), "missing": {"unshare": "unshare not installed"},
            "errors": {}}


def test_markdown_table_has_a_row_per_command_and_the_targets_in_order():
    # through JSON with sorted keys, as __main__ reads the document back
    text = bench_run.markdown(json.loads(json.dumps(_doc(), sort_keys=True)))
    row = "| `no-docker run -- true`, regular install | 50.0 | 40.0 | 2.00x | 8.00x | 10.00x | 10.00x |"
    assert row in text
    assert f"| {bench_run.LABELS['unshare']} | not measured: unshare not installed |" in text
    # an ordinary user's peer maps root (unshare -n alone is EPERM there)
    assert bench_run.UNSHARE_ARGV[:2] == (["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r"])
    goals = [line for line in text.splitlines() if line.startswith("| ") and ("<=" in line or "<" in line)]
    assert [g.split(" | ")[2] for g in goals] == ["**no** |"] * 5
    assert goals[0].startswith("| no-docker run -- true, wall median <= 30 ms | 50.0 ms")
    assert goals[2].startswith("| CPU median")


def test_a_warm_answer_is_six_numbers_of_a_run_that_exited_0():
    got = bench_run.parse_warm_answer(b"0 29.5 14.25 11.0 18.0 7.25\n")
    assert got == {"wall": 29.5, "cpu": 25.25, "user": 18.0, "sys": 7.25, "orphan_cpu": 0.0, "orphans": 0}


@pytest.mark.parametrize("line, says", [
    (b"", "not six numbers"), (b"0 1 2 3 4\n", "not six numbers"), (b"0 1 2 3 4 x\n", "not six numbers"),
    (b"125 1 2 3 4 5\n", "exited 125"), (b"0 1 -2 3 4 5\n", "negative"),
])
def test_a_warm_answer_that_is_not_a_clean_run_is_refused_with_the_line(line, says):
    with pytest.raises(ValueError, match=says):
        bench_run.parse_warm_answer(line)


def test_the_warm_helper_answers_each_request_and_is_reaped_at_close(tmp_path):
    # A stand-in helper speaking the same protocol (the real one needs a sandbox): one answer per
    # request, then EOF ends it and close() reaps it; a helper that dies is an error, not a hang.
    fake = ("import os, sys\nasked, answer = int(sys.argv[1]), int(sys.argv[2])\n"
            "while os.read(asked, 16):\n    os.write(answer, b'0 1.5 2 3 4 1\\n')\n")
    err = os.open(tmp_path / "err", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    helpers: list[bench_run.WarmHelper] = []
    try:
        helper = bench_run.WarmHelper([sys.executable, "-c", fake], err)
        helpers.append(helper)
        assert [helper.run_once()["cpu"] for _ in range(3)] == [5.0] * 3
        helper.close()
        helper.close()  # once: a second call closes nothing again
        assert helper.proc.returncode == 0
        says_gone = "import sys; print('gone', file=sys.stderr)"
        dying = bench_run.WarmHelper([sys.executable, "-c", says_gone], err)
        helpers.append(dying)
        dying.proc.wait(30)  # gone before it is asked: the request's write meets EPIPE
        with pytest.raises(RuntimeError, match="ended .status 0. without an answer: gone"):
            dying.run_once()
        mute = bench_run.WarmHelper([sys.executable, "-c", "import time; time.sleep(60)"], err)
        helpers.append(mute)
        mute.ANSWER_TIMEOUT = mute.CLOSE_GRACE = 0.2
        with pytest.raises(RuntimeError, match="no answer within 0.2 s"):
            mute.run_once()
        hangs_up = ("import os, sys, time\nos.close(int(sys.argv[2]))\nos.read(int(sys.argv[1]), 16)\n"
                    "time.sleep(60)")  # its answers closed, it lives on
        silent = bench_run.WarmHelper([sys.executable, "-c", hangs_up], err)
        helpers.append(silent)
        silent.CLOSE_GRACE = 0.2
        with pytest.raises(RuntimeError, match="ended .status still running. without an answer"):
            silent.run_once()
        garbled = bench_run.WarmHelper([sys.executable, "-c", fake.replace("0 1.5 2 3 4 1", "0 1.5 x")], err)
        helpers.append(garbled)
        with pytest.raises(RuntimeError, match="not six numbers"):
            garbled.run_once()
    finally:
        for each in helpers:
            each.close()  # the sleeper ignores EOF: killed after its CLOSE_GRACE
        os.close(err)
    assert all(each.proc.returncode is not None for each in helpers)  # every one reaped
    assert mute.proc.returncode == silent.proc.returncode == -9  # those deaf to EOF were killed


def test_unmeasured_reads_both_document_versions():
    assert bench_run.unmeasured({"missing": ["firejail"], "errors": {}}) == {"firejail": "absent"}
    assert bench_run.unmeasured({"missing": {"firejail": "x"}, "errors": {"no_docker": "y"}}) == {
        "firejail": "x", "no_docker": "y"}


# --- the regular install ----------------------------------------------------------------------

VENV = "/tmp/no-docker-bench-0/venv-abc"


def clean_report() -> dict:
    return {"modules_at_start": ["encodings", "site", "os"],
            "meta_path": ["_frozen_importlib.BuiltinImporter"], "no_site": 0,
            "pth_files": [regular_install.DEPS_PTH],
            "no_docker_cli": f"{VENV}/lib/python3.11/site-packages/no_docker/supervisor/cli.py"}


def test_a_clean_install_has_no_problems():
    assert regular_install.problems(clean_report(), VENV) == []


@pytest.mark.parametrize(("change", "says"), [
    ({"modules_at_start": ["site", "__editable___no_docker_0_1_0_finder"]}, "editable finder"),
    ({"meta_path": ["__editable___no_docker_0_1_0_finder._EditableFinder"]}, "editable finder"),
    ({"modules_at_start": ["site", "coverage", "coverage.control"]}, "coverage is loaded"),
    ({"pth_files": [regular_install.DEPS_PTH, "a1_coverage.pth"]}, "a1_coverage.pth"),
    ({"no_docker_cli": "/work/repo/supervisor/cli.py"}, "not from the venv"),
    ({"no_docker_cli": f"{VENV}-other/lib/no_docker/supervisor/cli.py"}, "not from the venv"),
    ({"no_site": 1}, "site is off"),
    ({"error": "exit 1: boom"}, "could not inspect"),
])
def test_what_makes_an_install_not_clean(change, says):
    report = {**clean_report(), **change}
    found = regular_install.problems(report, VENV)
    assert len(found) == 1 and says in found[0], found


def _tree(root: Path) -> None:
    (root / "supervisor" / "__pycache__").mkdir(parents=True)
    (root / "supervisor" / "cli.py").write_text("x = 1\n")
    (root / "supervisor" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"junk")
    (root / "canary").mkdir()
    (root / "canary" / "run.sh").write_text("true\n")
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "tests").mkdir()
    (root / "tests" / "t.py").write_text("")


def test_source_files_are_what_the_wheel_holds_without_byte_code(tmp_path):
    _tree(tmp_path)
    assert regular_install.source_files(tmp_path) == ["canary/run.sh", "pyproject.toml", "supervisor/cli.py"]


def test_content_key_follows_content_executable_bit_and_interpreter(tmp_path):
    _tree(tmp_path)

    def key(interpreter: str = "py 3.11") -> str:
        return regular_install.content_key(tmp_path, regular_install.source_files(tmp_path), interpreter)

    first = key()
    assert key() == first
    (tmp_path / "tests" / "t.py").write_text("not in the wheel")
    (tmp_path / "supervisor" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"other")
    assert key() == first
    assert key("py 3.12") != first
    os.chmod(tmp_path / "canary" / "run.sh", 0o755)
    second = key()
    assert second != first
    (tmp_path / "supervisor" / "cli.py").write_text("x = 2\n")
    assert key() not in (first, second)


def test_cache_dir_must_be_private(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    with pytest.raises(RuntimeError, match="not a private directory"):
        regular_install.ensure(Path("/nonexistent"), shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(RuntimeError, match="not a private directory"):
        regular_install.ensure(Path("/nonexistent"), link)


# --- orphans: the CPU wait4 does not see ------------------------------------------------------

_ORPHAN = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import bench_run
assert bench_run.set_subreaper(True)
# the parent exits at once; its child burns ~30 ms of CPU and exits: nobody in the tree reaps it
parent = [sys.executable, "-S", "-c",
          "import os, time\nif os.fork() == 0:\n    t = time.process_time()\n"
          "    while time.process_time() - t < 0.03: pass\n    os._exit(0)\nos._exit(0)"]
err = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
print(json.dumps(bench_run.run_once(parent, err)))
"""


def test_a_descendant_left_unreaped_is_reaped_and_its_cpu_counted(tmp_path):
    done = subprocess.run([sys.executable, "-c", _ORPHAN, str(BENCH), str(tmp_path / "stderr")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["orphans"] == 1
    assert got["orphan_cpu"] >= 25  # the grandchild's busy loop (process_time >= 30 ms)


_KEPT = r"""
import json, os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import bench_run
alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
dead = subprocess.Popen([sys.executable, "-c", "pass"])
bench_run.KEPT_CHILDREN.update((alive.pid, dead.pid))
out = {}
try:
    while not os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT):  # a zombie now, unreaped
        pass
    started = time.monotonic()
    out["kept"] = bench_run.reap_orphans(grace_s=30.0)
    out["seconds"] = time.monotonic() - started
    out["dead_still_ours"] = os.waitpid(dead.pid, 0)[0] == dead.pid  # not reaped by reap_orphans
    bench_run.KEPT_CHILDREN.discard(alive.pid)
    out["not_kept"] = bench_run.reap_orphans(grace_s=0.0)
finally:
    alive.kill()
    alive.wait()
print(json.dumps(out))
"""


def test_a_kept_child_is_neither_waited_for_nor_reaped_as_an_orphan():
    # The warm helper lives through every round: reap_orphans must not take it for a run's orphan
    # still running (each round waited out the whole grace, 2 s, before this was so), nor reap it
    # once dead (its whole life's CPU would go to the command measured then). In a child of its
    # own: reap_orphans reaps whatever child it finds, and pytest's are not its to take.
    done = subprocess.run([sys.executable, "-c", _KEPT, str(BENCH)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["kept"] == [0, 0.0, 0]
    assert got["seconds"] < 10  # at once, not after the grace
    assert got["dead_still_ours"] is True
    assert got["not_kept"] == [0, 0.0, 1]  # no longer kept: one child still running
