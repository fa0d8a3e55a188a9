"""The payload-bearing mutant of the real-project demonstration (tests/bench/bench_real_attempts.py,
tests/bench/payload_operator.py, issue 26 item 2): the operator makes exactly the one mutation per
named function, the code it makes compiles and keeps the docstring first, the plugin directory
registers it with cosmic-ray without installing anything, the session is bounded to the same
mutants every time; and, slow, the whole demonstration on pytest-docker's sdist (skipped, with
the reason, when the package index cannot be reached: a skip is not a pass)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import bench_real_attempts  # noqa: E402
import payload_operator  # noqa: E402

BIN = Path(sys.executable).parent
needs_cosmic_ray = pytest.mark.skipif(not (BIN / "cosmic-ray").exists(),
                                      reason="cosmic-ray is not installed (the test extra has it)")

MODULE = '''\
import subprocess


def execute(command):
    """Run a shell command."""
    return subprocess.check_output(command, shell=True)


class Executor:
    def execute(self, sub):
        return execute("docker compose " + sub)


def other():
    return 1
'''


def test_with_payload_inserts_marked_lines_before_the_body_line():
    out = payload_operator.with_payload("def f():\n    x = 1\n    return x\n", 1, "    ")
    lines = out.splitlines()
    assert lines[0] == "def f():" and lines[-2:] == ["    x = 1", "    return x"]
    inserted = lines[1:-2]
    assert inserted
    assert all(line.startswith("    ") and line.endswith(payload_operator.MARK) for line in inserted)
    compile(out, "f.py", "exec")


def test_the_payload_asks_only_read_only_questions():
    # the model of mutants/payloads/reach-engine.sh: a ping and `docker version`, nothing that changes
    assert "GET /_ping" in payload_operator.PAYLOAD and '"docker", "version"' in payload_operator.PAYLOAD
    for verb in ("POST", "DELETE", "prune", "rm", "kill", "stop", "run\","):
        assert verb not in payload_operator.PAYLOAD.replace("_nd_subprocess.run(", ""), verb


def test_choose_keeps_every_payload_mutant_and_spreads_the_rest():
    specs = [("p1", payload_operator.OPERATOR, 0), ("p2", payload_operator.OPERATOR, 1)]
    specs += [(f"j{i}", f"core/Op{i % 3}", i) for i in range(30)]
    kept = bench_real_attempts.choose(specs, 5, pinned=())
    assert kept[:2] == ["p1", "p2"] and len(kept) == 7 and len(set(kept)) == 7
    assert {op for j, op, _ in specs if j in kept[2:]} == {"core/Op0", "core/Op1", "core/Op2"}
    assert bench_real_attempts.choose(list(reversed(specs)), 5, pinned=())[2:] == kept[2:]  # any order
    assert bench_real_attempts.choose(specs, 0) == ["p1", "p2"]
    pinned = bench_real_attempts.choose(specs, 5, pinned=(("core/Op1", 28), ("core/Op0", 0)))
    assert pinned[:7] == kept and pinned[7:] == ["j28"]  # a pinned mutant once, after the spread ones


def test_status_lines_are_only_no_dockers():
    text = "24 passed\nno-docker: 3 attempts to reach an engine: ...\nno-docker: run X ended\nnoise"
    assert bench_real_attempts.status_lines(text) == ["no-docker: 3 attempts to reach an engine: ...",
                                                      "no-docker: run X ended"]


@needs_cosmic_ray
@pytest.mark.skipif(not (BIN / "mutmut").exists(), reason="mutmut is not installed (the test extra has it)")
def test_no_sdist_is_a_skip_with_its_reason_never_a_pass(tmp_path: Path):
    missing = tmp_path / bench_real_attempts.SDIST
    done = subprocess.run([sys.executable, str(BENCH / "bench_real_attempts.py"), "--sdist", str(missing)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == bench_real_attempts.EXIT_SKIPPED != 0, done.stderr
    why = f"--sdist {missing}: not a file named {bench_real_attempts.SDIST}"
    assert json.loads(done.stdout) == {"skipped": why}
    assert "SKIPPED, not a pass" in done.stderr


@needs_cosmic_ray
def test_the_operator_mutates_each_named_function_once_and_nothing_else():
    from cosmic_ray.mutating import mutate_code

    operator = payload_operator._operator_class()("execute")
    first = mutate_code(MODULE, operator, 0)
    second = mutate_code(MODULE, operator, 1)
    assert first and second and mutate_code(MODULE, operator, 2) is None
    for mutated in (first, second):
        compile(mutated, "plugin.py", "exec")
        assert mutated.count(payload_operator.MARK) == len(payload_operator.PAYLOAD.splitlines())
        # everything of the original is still there, in order; the payload lines are the only new ones
        kept = [line for line in mutated.splitlines() if payload_operator.MARK not in line]
        assert kept == MODULE.splitlines()
    lines, method = first.splitlines(), second.splitlines()
    top = lines.index("def execute(command):")
    assert lines[top + 1] == '    """Run a shell command."""'  # the docstring stays first
    assert payload_operator.MARK in lines[top + 2]
    assert payload_operator.MARK in method[method.index("    def execute(self, sub):") + 1]
    assert mutate_code(MODULE, payload_operator._operator_class()("absent"), 0) is None
    for example in operator.examples():
        op = payload_operator._operator_class()(**example.operator_args)
        assert mutate_code(example.pre_mutation_code, op, 0) == example.post_mutation_code


@needs_cosmic_ray
def test_the_plugin_dir_registers_the_operator_with_cosmic_ray(tmp_path: Path):
    plugin = payload_operator.plugin_dir(tmp_path / "plugin")
    code = "from cosmic_ray.plugins import operator_names; print('\\n'.join(operator_names()))"
    env = {"PYTHONPATH": str(plugin), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    with_it = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=env)
    assert with_it.returncode == 0, with_it.stderr
    assert payload_operator.OPERATOR in with_it.stdout.splitlines()
    env.pop("PYTHONPATH")
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=env)
    assert without.returncode == 0 and payload_operator.OPERATOR not in without.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.needs_bwrap
@needs_cosmic_ray
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
@pytest.mark.skipif(not (BIN / "mutmut").exists(), reason="mutmut is not installed (the test extra has it)")
def test_the_real_project_names_its_payload_mutants_and_scores_the_rest_as_cosmic_ray_does():
    done = subprocess.run([sys.executable, str(BENCH / "bench_real_attempts.py"), "--mutants", "2"],
                          capture_output=True, text=True, timeout=1500)
    doc = json.loads(done.stdout)
    if "skipped" in doc:
        pytest.skip(f"pytest-docker's sdist could not be had: {doc['skipped']}")
    assert done.returncode == 0 and doc["problems"] == [], (doc.get("problems"), done.stderr[-3000:])
    cr = doc["cosmic-ray"]
    assert len(cr["payload_mutants"]) == 2 and cr["tried"] == cr["payload_mutants"]
    assert cr["summary"][0] == f"2 of {cr['kept']} mutants tried to reach a container engine:", cr["summary"]
    assert any("/var/run/docker.sock" in line for line in cr["summary"][1:3]), cr["summary"]
    assert cr["outcomes_agree"] and cr["pending"] == 0
    assert doc["mutmut"]["results"] and not doc["mutmut"]["engine_attempts"]
