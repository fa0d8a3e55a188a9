"""T-19 rules over the fixture workflows and over small scripts (pure: no git, no tools).

Each bad fixture marks the line of every finding it must produce with ``# expect: RULE``;
the good ones carry no such mark and must produce nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.ci.findings import (
    RULE_CACHE,
    RULE_CONTAINER,
    RULE_CONTINUE,
    RULE_DECLARED,
    RULE_ENV,
    RULE_MIXED,
    RULE_ORDER,
    RULE_SHELL,
    RULE_UNISOLATED,
)
from no_docker.ci.repo import is_shell_script, pytest_config_isolates
from no_docker.ci.script_rules import Kind, judge_script
from no_docker.ci.shell_commands import has_stanza_first
from no_docker.ci.stanza import STANZA
from no_docker.ci.workflow_rules import WorkflowError, check_workflow, unisolated_declarations

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workflows"
EXPECT = re.compile(r"#\s*expect:\s*([a-z-]+)")


class FakeRepo:
    """What the checks ask the repository, answered from a dict."""

    def __init__(
        self,
        stanza_scripts: tuple[str, ...] = ("tests/suite.sh",),
        pytest_isolates: bool = False,
        actions: tuple[str, ...] = (),
        links: tuple[str, ...] = (),
        configs: dict[str, list[tuple[str, str]] | None] | None = None,
    ) -> None:
        self.stanza_scripts = stanza_scripts
        self.pytest_isolates = pytest_isolates
        self.actions = actions
        self.links = links
        self.configs = configs or {}

    def script_has_stanza(self, path: str) -> bool:
        return path in self.stanza_scripts

    def pytest_config_isolates(self) -> bool:
        return self.pytest_isolates

    def is_no_docker_action(self, path: str) -> bool:
        return path in self.actions

    def has_link(self, path: str) -> bool:
        return path in self.links

    def run_config(self, directory: str) -> list[tuple[str, str]] | None:
        return self.configs.get(directory, [])


def expected(text: str) -> set[tuple[int, str]]:
    return {(n, m.group(1)) for n, line in enumerate(text.splitlines(), 1) if (m := EXPECT.search(line))}


def fixture_names(prefix: str) -> list[str]:
    names = sorted(p.name for p in FIXTURES.glob(f"{prefix}*.yml"))
    assert names, f"no fixture {prefix}*.yml in {FIXTURES}"
    return names


@pytest.mark.parametrize("name", fixture_names("good-"))
def test_good_fixture_has_no_finding(name: str) -> None:
    text = (FIXTURES / name).read_text()
    assert expected(text) == set()
    assert check_workflow(text, name, FakeRepo()) == []


@pytest.mark.parametrize("name", fixture_names("bad-"))
def test_bad_fixture_reports_each_rule_on_its_line(name: str) -> None:
    text = (FIXTURES / name).read_text()
    want = expected(text)
    assert want, f"{name} marks no expected finding"
    got = {(f.line, f.rule) for f in check_workflow(text, name, FakeRepo())}
    # a declaration becomes a finding in guard.main (without --allow-declared), not here
    declared = {(line, "declared-unisolated") for line, _, _ in unisolated_declarations(text, name)}
    assert got | declared == want


def test_each_rule_has_a_bad_fixture() -> None:
    rules = set()
    for name in fixture_names("bad-"):
        rules |= {rule for _, rule in expected((FIXTURES / name).read_text())}
    assert rules == {RULE_ORDER, RULE_MIXED, RULE_CONTINUE, RULE_UNISOLATED, RULE_ENV, RULE_SHELL,
                     RULE_CONTAINER, RULE_CACHE, RULE_DECLARED}


def test_broken_yaml_is_an_error_naming_file_and_line() -> None:
    text = (FIXTURES / "broken-yaml.yml").read_text()
    [(line, rule)] = expected(text)
    assert rule == "invalid-yaml"
    with pytest.raises(WorkflowError) as info:
        check_workflow(text, "broken-yaml.yml", FakeRepo())
    assert info.value.line == line
    assert str(info.value).startswith(f"broken-yaml.yml:{line}: invalid YAML: ")


@pytest.mark.parametrize("text", ["a: [1, 2\n", "---\na: 1\n---\nb: 2\n", "\tjobs: {}\n", "key: 'x\n"])
def test_other_broken_yaml_is_an_error_not_a_traceback(text: str) -> None:
    with pytest.raises(WorkflowError, match=r"^w\.yml:\d+: invalid YAML: "):
        check_workflow(text, "w.yml", FakeRepo())


def test_yaml_nested_past_the_stack_is_an_error_not_a_traceback() -> None:
    text = "jobs:\n  t:\n    env:\n      X: " + "[" * 3000 + "]" * 3000 + "\n"
    with pytest.raises(WorkflowError, match=r"^w\.yml:1: YAML nested deeper than the guard can read$"):
        check_workflow(text, "w.yml", FakeRepo())


def test_empty_or_jobless_workflow_has_no_finding() -> None:
    assert check_workflow("", "w.yml", FakeRepo()) == []
    assert check_workflow("on: push\njobs: []\n", "w.yml", FakeRepo()) == []


def workflow(*steps: str) -> str:
    body = "".join(f"      - {step}\n" for step in steps)
    return f"on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n{body}"


def rules_of(text: str, repo: FakeRepo | None = None) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in check_workflow(text, "w.yml", repo or FakeRepo())]


def test_the_old_isolated_mark_no_longer_counts() -> None:
    """Issue 17 B: a step is judged by what it runs, never by a claim (the mark could even sit
    inside a string)."""
    text = workflow("run: make test  # no-docker: isolated", "run: no-docker run -- pytest")
    assert rules_of(text) == [(6, RULE_UNISOLATED)]


def test_declaration_above_a_step_belongs_to_that_step_and_only_as_a_comment() -> None:
    text = workflow(
        "run: no-docker run -- pytest",
        "run: |\n          true\n          # no-docker: unisolated: text of the block above",
        "run: make report",
    )
    # the third step (line 10) is not exempt: the "comment" is the second step's run: text
    assert rules_of(text) == [(7, RULE_ORDER), (10, RULE_ORDER)]
    exempt = workflow("run: echo hi\n      # no-docker: unisolated: the report is reviewed in #12",
                      "run: make report")
    assert rules_of(exempt) == []
    assert rules_of(workflow("run: echo\n      # no-docker: unisolated: short", "run: make")) == [
        (8, RULE_UNISOLATED)
    ]  # a reason of fewer than 8 characters is no reason


def test_local_action_counts_only_as_no_dockers_own_file_in_a_clean_workspace() -> None:
    first = workflow("uses: ./ci\n        with: {run: make test}", "run: no-docker run -- pytest")
    assert rules_of(first, FakeRepo(actions=("ci",))) == []
    assert rules_of(first, FakeRepo(actions=())) == [(6, RULE_UNISOLATED)]
    later = workflow("run: no-docker run -- pytest", "uses: ./ci\n        with: {run: make test}")
    # code under test ran in the workspace first and could have rewritten ci/action.yml
    assert rules_of(later, FakeRepo(actions=("ci",))) == [(7, RULE_ORDER)]
    install = workflow("uses: ./ci\n        with: {run: make test, install: .}")
    assert rules_of(install, FakeRepo(actions=("ci",))) == [(6, RULE_UNISOLATED)]
    temp = workflow("uses: ./ci\n        with: {run: make test, options: --rw /home/runner/work/_temp}")
    assert rules_of(temp, FakeRepo(actions=("ci",))) == [(6, RULE_UNISOLATED)]


@pytest.mark.parametrize("step", ["run: pytest -q", "run: pytest --no-docker -q",
                                  "run: python -m pytest --no-docker", "run: bash tests/suite.sh"])
def test_self_isolating_forms_are_not_provable_by_the_guard(step: str) -> None:
    assert rules_of(workflow(step), FakeRepo(pytest_isolates=True)) == [(6, RULE_UNISOLATED)]


def test_non_plain_shell_and_unparsable_script_are_refused() -> None:
    assert rules_of(workflow("run: no-docker run -- pytest", "run: print(1)\n        shell: python")) == [
        (7, RULE_ORDER), (8, RULE_SHELL)
    ]
    assert rules_of(workflow("run: no-docker run -- pytest", "run: 'if then fi ('")) == [(7, RULE_ORDER)]
    assert rules_of(workflow("run: no-docker run -- t\n        shell: bash --rcfile ./x -i {0}")) == [
        (6, RULE_UNISOLATED), (7, RULE_SHELL)
    ]


def test_github_expressions_in_run_are_refused() -> None:
    text = workflow("run: no-docker run -- pytest -k ${{ matrix.k }}")
    assert rules_of(text) == [(6, RULE_UNISOLATED)]
    with_input = workflow("uses: knittingcode/no-docker/ci@v1\n"
                          "        with: {run: 'pytest -k ${{ matrix.k }}'}")
    assert rules_of(with_input) == []  # the action's run: input runs inside, and never through ${{ }} in bash


@pytest.mark.parametrize(
    ("script", "kinds"),
    [
        ("no-docker run -- pytest", ["isolated"]),
        ("exec /opt/venv/bin/no-docker run -- make", ["plain"]),
        ("exec no-docker run --work . -- make", ["isolated"]),
        ("sudo -E no-docker run -- make", ["plain"]),
        ("sudo -n no-docker run -- make", ["isolated"]),
        ("env -S 'sh -c make' no-docker run -- true", ["plain"]),
        ("env FOO=1 no-docker run -- true", ["isolated"]),
        ("env BASH_ENV=./x no-docker run -- true", ["plain"]),
        ("PYTHONPATH=. no-docker run -- true", ["plain"]),
        ("no-docker guard", ["allowed"]),
        ("no-docker prove", ["plain"]),
        ("set -euo pipefail; cd tests; echo hi", ["allowed", "allowed", "allowed"]),
        ("set -k", ["plain"]),
        ("sudo apt-get install -y -qq bubblewrap", ["allowed"]),
        ("sudo apt-get install -y ./local.deb", ["plain"]),
        ("pip install --quiet no-docker 'pytest>=8'", ["allowed"]),
        ("pip install -e .", ["plain"]),
        ("pip install -r requirements.txt", ["plain"]),
        ("python3 -I -m pip install no-docker", ["allowed"]),
        ("python -m pip install no-docker", ["plain"]),
        ("echo FORCE_COLOR=1 >> \"$GITHUB_ENV\"", ["allowed"]),
        ("echo FOO=1 >> \"$GITHUB_ENV\"", ["plain"]),  # default-deny: not on the short list
        ("echo PIP_FIND_LINKS=./dist >> \"$GITHUB_ENV\"", ["plain"]),
        ("echo BASH_ENV=./x >> \"$GITHUB_ENV\"", ["plain"]),
        ("echo ./bin >> \"$GITHUB_PATH\"", ["plain"]),
        ("no-docker run -- env >> \"$GITHUB_ENV\"", ["plain"]),
        ("f=$GITHUB_ENV; echo FOO=1 >> \"$f\"", ["plain"]),
        ("if [ -f x ]; then no-docker run -- t; fi", ["allowed", "isolated"]),
        ("no-docker run -- t || ./deploy", ["isolated", "plain"]),
        ('eval "no-docker run -- t"', ["plain"]),
        ("$RUNNER run -- t", ["plain"]),
        ("no-docker run -- t \"$(make x)\"", ["isolated", "plain"]),
        ("x='a[$(make)]'; [[ 1 -eq x ]]", ["plain"]),
        ('echo "${!x}"', ["plain"]),
        ("printf -v x y", ["plain"]),
        ("f() { echo BASH_ENV=./x; } >> \"$GITHUB_ENV\"", ["plain"]),
        ("no-docker run -- sh <<'EOF'\nmake\nEOF", ["isolated"]),
        ("no-docker run -- sh <<EOF\nmake\nEOF", ["plain"]),
        # issue 27: environment default-deny where pip or apt runs outside
        ("export XDG_CONFIG_DIRS=.ci; pip install no-docker", ["plain"]),
        ("export APT_CONFIG=ci/apt.conf; sudo apt-get update", ["plain"]),
        ("export FOO=1; pip install no-docker", ["allowed", "plain"]),
        ("export FOO=1; no-docker run -- t", ["isolated"]),  # only no-docker outside: a plain name is fine
        ("FOO=1 pip install x", ["plain"]),
        ("FORCE_COLOR=1 pip install x", ["allowed"]),
        ("LANG=/tmp/x pip install x", ["plain"]),  # a locale with a / is a path
        # install arguments: by name from the index only
        ("pip install no-docker-99.0.tar.gz", ["plain"]),
        ("pip install 'no-docker==99.0.tar.gz'", ["plain"]),
        ("pip install --find-links ./dist no-docker", ["plain"]),
        ("pip install --index-url file:///x no-docker", ["plain"]),
        ("pip install 'no-docker @ https://example.invalid/x.whl'", ["plain"]),
        ("sudo apt-get -o APT::Update::Pre-Invoke::=./x update", ["plain"]),
        ("sudo apt-get install -y ./x.deb", ["plain"]),
        ("sudo apt-get install -y x.deb", ["plain"]),
        # run paths, normalised, against the runner's layout
        ("no-docker run --rw /home/runner/work/proj/.. -- t", ["plain"]),
        ("no-docker run --rw ../.. -- t", ["plain"]),
        ("no-docker run --rw ~/.cache/mytool -- t", ["isolated"]),
        ("no-docker run --rw ~/.cache/pip -- t", ["plain"]),  # a code cache (issue 25)
        ("no-docker run --rw ~ -- t", ["plain"]),
        ("no-docker run --work=/home/runner/work/_temp -- t", ["plain"]),
        ("no-docker run --ro /home/runner/work/_temp/_runner_file_commands -- t", ["plain"]),
        ("no-docker run --report /home/runner/work/_temp/_runner_file_commands/x -- t", ["plain"]),
        ("no-docker run --rw build -- t", ["isolated"]),
        ("no-docker run make --rw /home/runner", ["isolated"]),  # CMD's own words, inside the run
        ("no-docker run --rw .git/hooks -- t", ["plain"]),
        ("echo x > .git/config", ["plain"]),
        ("cd sub && no-docker run -- t", ["allowed", "isolated"]),
        ("cd .. && no-docker run -- t", ["allowed", "plain"]),
        ("cd; no-docker run -- t", ["plain", "isolated"]),
        ("for d in a b; do cd a; done", ["plain"]),
        # a failed run stops the later ones, or they may read a rewritten pyproject.toml
        ("no-docker run -- a; no-docker run -- b", ["isolated", "isolated"]),
        ("no-docker run -- a && no-docker run -- b", ["isolated", "isolated"]),
        ("no-docker run -- a || true; no-docker run -- b", ["isolated", "allowed", "plain"]),
        ("set +e; no-docker run -- a; no-docker run -- b", ["allowed", "isolated", "plain"]),
        ("no-docker run -- a; no-docker run --rw sub -- b", ["isolated", "plain"]),
        # files written outside a run
        ("echo x > ~/.gitconfig", ["plain"]),
        ("echo x > /tmp/x", ["plain"]),
        ("echo x > notes.txt", ["allowed"]),
        ("echo '[tool.no-docker]' > pyproject.toml; no-docker run -- t", ["allowed", "plain"]),
    ],
)
def test_script_judgement(script: str, kinds: list[str]) -> None:
    assert [j.kind.value for j in judge_script(script)] == kinds, judge_script(script)


def test_stanza_must_be_the_first_command() -> None:
    assert has_stanza_first(f"#!/usr/bin/env bash\n# suite\n\n{STANZA}\nset -eu\n", STANZA)
    assert not has_stanza_first(f"#!/bin/bash\nset -eu\n{STANZA}\n", STANZA)
    assert not has_stanza_first("#!/bin/bash\nno-docker check || exit 125\n", STANZA)
    assert not has_stanza_first("", STANZA)


@pytest.mark.parametrize(
    ("name", "head", "shell"),
    [
        ("a.sh", b"", True),
        ("b.bash", b"x", True),
        ("run", b"#!/bin/sh\n", True),
        ("run", b"#!/usr/bin/env bash\n", True),
        ("run", b"#!/usr/bin/env -S bash -eu\n", True),
        ("run", b"#! /bin/dash\n", True),
        ("run", b"#!/usr/bin/python3\n", False),
        ("run", b"#!/bin/shx\n", False),
        ("README", b"# sh\n", False),
        ("x.shx", b"", False),
    ],
)
def test_is_shell_script(name: str, head: bytes, shell: bool) -> None:
    assert is_shell_script(name, head) is shell


PYPROJECT_ON = "[tool.pytest.ini_options]\nno_docker = true\nrequired_plugins = ['no-docker']\n"


@pytest.mark.parametrize(
    ("files", "isolates"),
    [
        (
            {"pyproject.toml": PYPROJECT_ON},
            True,
        ),
        ({"pyproject.toml": "[tool.pytest.ini_options]\nno_docker = true\n"}, False),  # plugin not required
        ({"pytest.ini": "[pytest]\nno_docker = true\nrequired_plugins = no-docker>=0.1\n"}, True),
        ({"setup.cfg": "[tool:pytest]\nno_docker = 1\nrequired_plugins = no_docker\n"}, True),
        # pytest.ini wins over pyproject.toml, as in pytest
        (
            {
                "pytest.ini": "[pytest]\n",
                "pyproject.toml": PYPROJECT_ON,
            },
            False,
        ),
        ({"pyproject.toml": "not toml ["}, False),
        ({}, False),
    ],
)
def test_pytest_config_isolates(files: dict[str, str], isolates: bool) -> None:
    assert pytest_config_isolates(files) is isolates


ISOLATED_COMMANDS = ["no-docker run -- pytest", "no-docker run -- make test", "exec no-docker run -- ./t.sh"]
PLAIN_LINES = st.sampled_from(["make", "./deploy.sh", "python x.py", "curl -s example.invalid", "sh -c true",
                               "pytest --no-docker", "bash tests/suite.sh"])
ISOLATED_LINES = st.sampled_from(ISOLATED_COMMANDS)
STEP_TEXT = {"isolated": "no-docker run -- make test", "allowed": "echo hi", "plain": "make lint"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["isolated", "allowed", "plain"]), min_size=1, max_size=8))
def test_default_deny_matches_a_simple_model(steps: list[str]) -> None:
    """Model: a plain step is reported as unisolated before the first isolated step; after it,
    every step that is not isolated is reported as out of order; nothing else is."""
    text = workflow(*(f"run: {STEP_TEXT[kind]}" for kind in steps))
    seen_isolated = False
    want = []
    for index, kind in enumerate(steps):
        if seen_isolated and kind != "isolated":
            want.append((6 + index, RULE_ORDER))
        elif kind == "plain":
            want.append((6 + index, RULE_UNISOLATED))
        seen_isolated = seen_isolated or kind == "isolated"
    assert rules_of(text) == want, text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(PLAIN_LINES, ISOLATED_LINES), min_size=1, max_size=6))
def test_step_is_mixed_exactly_when_it_has_both_kinds(commands: list[str]) -> None:
    text = workflow("run: |\n" + "".join(f"          {c}\n" for c in commands))
    isolated = set(ISOLATED_COMMANDS)
    has_isolated = any(c in isolated for c in commands)
    has_plain = any(c not in isolated for c in commands)
    want = [(6, RULE_MIXED)] if has_isolated and has_plain else [(6, RULE_UNISOLATED)] if has_plain else []
    assert rules_of(text) == want, text


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_run_script_is_judged_never_an_exception(script: str) -> None:
    assert all(j.kind in Kind for j in judge_script(script))


def test_characters_that_crash_tree_sitter_bash_are_masked() -> None:
    """tree-sitter-bash 0.25.1 segfaults on ``a{`` + U+E0100 (and other astral characters):
    checked in a child, so a regression fails this test instead of killing the session."""
    code = (
        "from no_docker.ci.script_rules import Kind, judge_script\n"
        "for s in ['a{\\U000e0100', 'a{\\U000ee563', 'echo \\U0001f389 && no-docker run -- t', 'x\\ud800']:\n"
        "    print([j.kind.value for j in judge_script(s)])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2] == "['allowed', 'isolated']"


def test_lone_surrogate_in_a_step_name_is_checked() -> None:
    text = workflow('name: "\\ud800"\n        run: no-docker run -- t', "run: make")
    [finding] = check_workflow(text, "w.yml", FakeRepo())
    assert finding.rule == RULE_ORDER


YAMLISH = st.lists(
    st.sampled_from(
        [
            "jobs:",
            "steps:",
            "- ",
            "run: ",
            "uses: x",
            "continue-on-error: 1",
            "{",
            "}",
            "[",
            "]",
            "'",
            '"',
            "#",
            "\n",
            "\t",
            "  ",
            "&a",
            "*a",
            "!!",
            "|",
            ">",
            "%",
            "@",
            "\x00",
            "\x07",
            "`",
            ": ",
            "on:",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(YAMLISH)
def test_any_text_gives_findings_or_a_workflow_error_never_a_traceback(text: str) -> None:
    try:
        findings = check_workflow(text, "w.yml", FakeRepo())
    except WorkflowError as err:
        assert str(err).startswith(f"w.yml:{err.line}: ") and err.line >= 1, (text, str(err))
        assert "\n" not in str(err), (text, str(err))
    else:
        assert all(f.file == "w.yml" and f.line >= 1 for f in findings), text


def test_a_key_given_twice_is_refused_wherever_it_is() -> None:
    """PyYAML keeps both pairs; the guard reads the first `steps:`, the runner may run the second."""
    text = ("on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - run: no-docker run -- t\n"
            "    steps:\n      - run: make test\n")
    assert rules_of(text) == [(7, RULE_UNISOLATED)]


def test_paths_of_the_repository_are_judged_through_its_links_and_config() -> None:
    rel = workflow("run: no-docker run --rw sub/x -- t")
    assert rules_of(rel) == []
    assert rules_of(rel, FakeRepo(links=("sub",))) == [(6, RULE_UNISOLATED)]
    plain = workflow("run: no-docker run -- t")
    assert rules_of(plain, FakeRepo(configs={".": [("--rw", "../../_temp")]})) == [(6, RULE_UNISOLATED)]
    assert rules_of(plain, FakeRepo(configs={".": [("--rw", "build")]})) == []
    assert rules_of(plain, FakeRepo(configs={".": None})) == [(6, RULE_UNISOLATED)]


def test_a_file_written_outside_makes_the_local_action_untrusted() -> None:
    repo = FakeRepo(actions=("ci",))
    assert rules_of(workflow("uses: ./ci\n        with: {run: make}"), repo) == []
    wrote = workflow("run: echo x > ci/action.yml", "uses: ./ci\n        with: {run: make}")
    assert rules_of(wrote, repo) == [(7, RULE_UNISOLATED)]


def test_download_artifact_writes_only_into_the_workspace() -> None:
    into_path = workflow("uses: actions/download-artifact@v4\n        with: {name: a, path: ~/.local/bin}")
    assert rules_of(into_path) == [(6, RULE_UNISOLATED)]
    then_below = workflow("uses: actions/download-artifact@v4\n        with: {name: a, path: dist}",
                          "run: no-docker run --rw dist/x -- t")
    assert rules_of(then_below) == [(8, RULE_UNISOLATED)]
    into_root = workflow("uses: actions/download-artifact@v4\n        with: {name: a}",
                         "run: no-docker run -- t")
    assert rules_of(into_root) == [(6, RULE_UNISOLATED), (8, RULE_UNISOLATED)]
    into_git = workflow("uses: actions/download-artifact@v4\n        with: {name: a, path: .git/hooks}")
    assert rules_of(into_git) == [(6, RULE_UNISOLATED)]
    runs_in_it = workflow("uses: actions/download-artifact@v4\n        with: {name: a, path: dist}",
                          "run: cd dist && no-docker run -- t")
    assert rules_of(runs_in_it) == [(8, RULE_UNISOLATED)]  # the artifact may hold a pyproject.toml


def test_a_later_step_that_may_run_after_a_failure_is_refused() -> None:
    text = workflow("run: no-docker run -- a", "if: always()\n        run: no-docker run -- b")
    assert rules_of(text) == [(7, RULE_ORDER)]
    text = workflow("run: no-docker run -- a",
                    "if: github.event_name == 'push'\n        run: no-docker run -- b")
    assert rules_of(text) == []


def test_run_options_the_guard_reads_are_the_supervisors() -> None:
    """The guard's model of ``no-docker run``'s options is the supervisor's own list."""
    from no_docker.ci import script_rules
    from no_docker.supervisor import run

    assert set(script_rules._PATH_OPTIONS) == set(run._PATH_OPTIONS)
    assert set(script_rules._PATH_OPTIONS) | set(script_rules._OTHER_VALUE_OPTIONS) == set(run._VALUE_OPTIONS)
    assert [j.kind for j in judge_script("no-docker run --keep-env X --rw /home/runner -- t")] == [Kind.PLAIN]
