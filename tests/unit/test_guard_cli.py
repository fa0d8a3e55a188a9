"""``no-docker guard`` end to end on small git repositories, with the real ShellCheck,
actionlint and git."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.ci.stanza import STANZA
from no_docker.supervisor import cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workflows"
REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECT = re.compile(r"#\s*expect:\s*([a-z-]+)")
FINDING = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+): (?P<rule>[a-zA-Z0-9/_-]+): (?P<message>.+)$")

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=120)


def make_repo(tmp_path: Path, files: dict[str, str], untracked: dict[str, str] | None = None) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    if files:
        git(repo, "add", "--", *files)
    for rel, text in (untracked or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


SUITE = f"#!/usr/bin/env bash\n{STANZA}\nset -euo pipefail\necho ok\n"


def guard(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = cli.main(["guard", *args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_good_fixtures_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {f".github/workflows/{p.name}": p.read_text() for p in FIXTURES.glob("good-*.yml")}
    files["tests/suite.sh"] = SUITE
    repo = make_repo(tmp_path, files)
    status, out, err = guard(capsys, "--allow-declared", str(repo))
    assert (status, out) == (0, []), err
    count = len(list(FIXTURES.glob("good-*.yml")))
    assert re.search(rf"no-docker: guard: 0 findings in {count} workflows and 1 shell scripts", err)
    # The fixture's one declared exemption is a finding unless the caller allows declarations.
    status, out, err = guard(capsys, str(repo))
    assert status == 1 and [line.split(": ")[1] for line in out] == ["declared-unisolated"], out


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("bad-*.yml")))
def test_bad_fixture_findings_are_file_line_rule_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    text = (FIXTURES / name).read_text()
    rel = f".github/workflows/{name}"
    repo = make_repo(tmp_path, {rel: text})
    status, out, _ = guard(capsys, str(repo))
    assert status == 1
    parsed = [FINDING.match(line) for line in out]
    assert all(parsed), out
    got = {(m["file"], int(m["line"]), m["rule"]) for m in parsed if m}
    want = {
        (rel, n, mm.group(1)) for n, line in enumerate(text.splitlines(), 1) if (mm := EXPECT.search(line))
    }
    # the fixtures are otherwise actionlint- and ShellCheck-clean: T-19 findings only (those
    # that are hostile shell on purpose say so, and only their T-19 findings are compared)
    if "# fixture: not actionlint-clean" in text:
        got = {g for g in got if not g[2].startswith("actionlint/")}
    assert got == want


def test_broken_yaml_is_exit_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {".github/workflows/broken.yml": (FIXTURES / "broken-yaml.yml").read_text()})
    status, out, err = guard(capsys, str(repo))
    assert (status, out) == (2, [])
    assert err.startswith("no-docker: guard: .github/workflows/broken.yml:9: invalid YAML: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_not_a_repository_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    status, out, err = guard(capsys, str(plain))
    assert (status, out) == (2, [])
    assert err == f"no-docker: guard: {str(plain)!r} is not inside a git repository (git rev-parse failed)\n"
    status, _, err = guard(capsys, str(tmp_path / "missing"))
    assert status == 2 and "is not a directory" in err and "missing" in err


def test_shellcheck_runs_on_every_shell_script_git_would_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = "#!/bin/sh\necho $1\n"
    repo = make_repo(
        tmp_path,
        {
            "bin/tool": bad,
            "lib/a.bash": "echo $1\n",
            "README.md": "echo $1\n",
            "tool.py": "#!/usr/bin/env python3\n",
            ".gitignore": "build/\n",
        },
        untracked={"untracked.sh": bad, "build/gen.sh": bad},
    )
    status, out, err = guard(capsys, str(repo), "--json")
    assert status == 1
    doc = json.loads("\n".join(out))
    assert doc["checked"] == {"shell_scripts": ["bin/tool", "lib/a.bash", "untracked.sh"], "workflows": [],
                              "untracked": ["untracked.sh"]}
    assert {(f["file"], f["line"], f["rule"]) for f in doc["findings"]} == {
        ("bin/tool", 2, "shellcheck/SC2086"),
        ("lib/a.bash", 1, "shellcheck/SC2086"),
        ("untracked.sh", 2, "shellcheck/SC2086"),
    }
    assert doc["ok"] is False and doc["repo"] == str(repo)


UNISOLATED = "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make test\n"


def test_untracked_scripts_and_workflows_are_checked_alike_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 18 item 11: a new workflow was checked before `git add`, a new shell script was
    # not. Both are now checked as they are on disk (and named on stderr); files git ignores
    # (a venv's activate script, a scratch workflow) never reach the runner and are not.
    bad = "#!/bin/sh\necho $1\n"
    repo = make_repo(
        tmp_path,
        {"ok.sh": "#!/bin/sh\necho ok\n", ".gitignore": "build/\n.github/workflows/scratch.yml\n"},
        untracked={"new.sh": bad, ".github/workflows/new.yml": UNISOLATED, "build/gen.sh": bad,
                   ".github/workflows/scratch.yml": UNISOLATED},
    )
    status, out, err = guard(capsys, str(repo))
    assert status == 1
    got = {tuple(line.split(": ")[:2]) for line in out}
    assert got == {("new.sh:2", "shellcheck/SC2086"), (".github/workflows/new.yml:6", "unisolated-step")}, out
    assert ("no-docker: guard: not tracked by git yet, checked as they are on disk: "
            ".github/workflows/new.yml, new.sh\n") in err
    assert err.endswith("in 1 workflows and 2 shell scripts\n"), err
    git(repo, "add", "-A")
    status, out, err = guard(capsys, str(repo))
    assert status == 1 and {tuple(line.split(": ")[:2]) for line in out} == got
    assert "not tracked" not in err


def test_actionlint_findings_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workflow = "on: push\njobs:\n  a:\n    steps:\n      - run: echo $FOO\n"
    repo = make_repo(tmp_path, {".github/workflows/a.yaml": workflow})
    status, out, _ = guard(capsys, str(repo))
    assert status == 1
    rules = {FINDING.match(line)["rule"] for line in out}  # type: ignore[index]
    assert "actionlint/syntax-check" in rules  # runs-on is missing
    assert "actionlint/shellcheck" in rules  # unquoted $FOO, through the same ShellCheck


def test_guard_from_a_subdirectory_checks_the_whole_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"sub/a.sh": "#!/bin/sh\necho $1\n"})
    status, out, _ = guard(capsys, str(repo / "sub"))
    assert status == 1 and out[0].startswith("sub/a.sh:2: shellcheck/SC2086: ")


def test_help_names_every_option_and_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["guard", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "REPO",
        "--json",
        "isolation-order",
        "mixed-step",
        "continue-on-error",
        "shellcheck/SCnnnn",
        "exit status",
        "# no-docker: unisolated: REASON",
        "unisolated-step",
        "--allow-declared",
        "declared-unisolated",
    ):
        assert word in text


def test_console_script_runs_the_guard_on_this_project() -> None:
    """The project's own workflows and scripts pass their own guard."""
    exe = Path(sys.executable).parent / "no-docker"
    proc = subprocess.run([str(exe), "guard", "--allow-declared", str(REPO_ROOT)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^no-docker: guard: 0 findings in [1-9]\d* workflows", proc.stderr, re.M)
    # the two jobs that run no-docker's own code unisolated are declared, and reported (issue 17)
    declared = re.findall(r"^no-docker: guard: declared unisolated \(reviewed exemption\): (\S+): ",
                          proc.stderr, re.M)
    assert [d.split(":")[0] for d in declared] == [".github/workflows/ci.yml"] * 2, proc.stderr


def test_tracked_symlink_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\necho $1\n")
    repo = make_repo(tmp_path, {"ok.sh": "#!/bin/sh\necho ok\n"})
    (repo / "link.sh").symlink_to(outside)
    git(repo, "add", "link.sh")
    status, out, err = guard(capsys, str(repo))
    assert (status, out) == (0, []), err
    assert "1 shell scripts" in err


def test_lone_surrogate_in_a_step_name_prints_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow = (
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: no-docker run -- make test\n"
        '      - name: "up\\ud800load"\n        run: make upload\n'
    )
    repo = make_repo(tmp_path, {".github/workflows/a.yml": workflow})
    status, out, err = guard(capsys, str(repo))
    assert status == 1 and "Traceback" not in err, err
    # actionlint also refuses the escape; the T-19 finding prints it escaped
    order = [line for line in out if ": isolation-order: " in line]
    assert len(order) == 1 and order[0].startswith(
        ".github/workflows/a.yml:7: isolation-order: step 'up\\ud800load' of job 'a' is not isolated"
    )


def test_a_declaration_is_a_finding_unless_the_caller_allows_it() -> None:
    """Default-deny: `# no-docker: unisolated: REASON` is the workflow's own claim; without
    --allow-declared the guard reports each declared step as a finding and exits 1."""
    exe = Path(sys.executable).parent / "no-docker"
    proc = subprocess.run([str(exe), "guard", str(REPO_ROOT)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rules = re.findall(r"^(\S+):\d+: (\S+): ", proc.stdout, re.M)
    assert rules == [(".github/workflows/ci.yml", "declared-unisolated")] * 2, proc.stdout
