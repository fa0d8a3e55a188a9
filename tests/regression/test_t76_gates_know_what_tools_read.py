"""T-76: the gates know what the tools they allow read and run (rt4 G1, G2, G3, L1).

- G1: ``actions/setup-python`` with ``pip-install:`` (v6.1.0+) runs ``python -m pip install ARGS``
  in the workspace, outside any run: refused, whatever the ref; an input the guard does not
  know is "cannot tell", never passed.
- G2: a second ``actions/checkout`` (another repository, ref or path, ``.`` included), or a
  first one of something else than the reviewed commit, writes the workspace: a local action
  after it is not the one the guard compared with ci/action.yml.
- G3: ``actions/setup-go@v5`` caches when ``cache:`` is not written (its action.yml: ``cache:
  default: true``): ``restored-cache`` judges every input's default for the ref's version.
- L1: the lint refuses curl values read from a file (``-w @FILE``, ``@-``, ``-H @FILE``, ``--url
  @FILE``) and a ``--write-out`` format that is not constant: a format file the payload writes
  could hold ``%output{>>FILE}`` (curl >= 8.3 writes FILE).

Controls: what the allowed thing does is shown on real components where it can be (``python -m
pip`` imports the workspace's ``pip/``; git replaces the files at a checkout's path; curl reads
its ``-w`` format from the file), and the guard's own control (the same workflow without the
input, one checkout, ``cache: true`` written) is asserted too. The guard runs as ``no-docker
guard`` on real git repositories. Weakened builds: ``weakened/t76-*.patch``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, no_docker_argv

FINDING = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+): (?P<rule>[a-zA-Z0-9/_-]+): (?P<message>.+)$")
HEAD = "on: push\npermissions: {}\njobs:\n"
CHECKOUT = "      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def job(name: str, steps: str) -> str:
    return f"  {name}:\n    runs-on: ubuntu-latest\n    steps:\n{steps}"


def guard_findings(tmp_path: Path, text: str, files: dict[str, str] | None = None
                   ) -> tuple[int, set[tuple[int, str]], str]:
    """``no-docker guard`` over a repository holding the workflow ``ci.yml``: status, the T-19
    findings as (line, rule) (actionlint's and ShellCheck's own left out), stdout."""
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / ".github" / "workflows" / "ci.yml").write_text(text)
    for rel, content in (files or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(content)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, timeout=60)
    done = subprocess.run(no_docker_argv("guard", str(repo)), capture_output=True, text=True, timeout=120)
    matches = [FINDING.match(line) for line in done.stdout.splitlines()]
    assert all(matches), done.stdout + done.stderr
    found = {(int(m["line"]), m["rule"]) for m in matches if m and not m["rule"].startswith(
        ("actionlint/", "shellcheck/"))}
    return done.returncode, found, done.stdout


def marked(text: str) -> set[tuple[int, str]]:
    return {(n, m.group(1)) for n, line in enumerate(text.splitlines(), 1)
            if (m := re.search(r"#\s*expect:\s*([a-z-]+)", line))}


def test_t76_g1_setup_python_pip_install_is_refused(tmp_path: Path) -> None:
    # control: what the action runs with pip-install (`python -m pip install -e .`, in the
    # workspace) imports the workspace's pip/ first: the repository's code, outside
    work = tmp_path / "w"
    (work / "pip").mkdir(parents=True)
    marker = tmp_path / "MARK"
    (work / "pip" / "__init__.py").write_text("")
    (work / "pip" / "__main__.py").write_text(f"open({str(marker)!r}, 'a').write('ran')\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-e", "."], cwd=work, timeout=60, check=False,
                   capture_output=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert marker.read_text() == "ran"
    # held: every ref (a tag, a major, an older minor, a commit) with pip-install is a finding
    setup = ("      - uses: actions/setup-python@{ref}{mark}\n"
             "        with:\n          python-version: '3.12'\n")
    run = "      - run: no-docker run -- python -m pytest -q\n"
    refs = ["v6.1.0", "v6", "v5.6.0", "0123456789abcdef0123456789abcdef01234567"]
    text = HEAD + "".join(
        job(f"j{i}", CHECKOUT + setup.format(ref=ref, mark="  # expect: unisolated-step")
            + "          pip-install: -e .\n" + run) for i, ref in enumerate(refs))
    # an input the guard does not know: cannot tell, refused; and the guard's control, the
    # same step without pip-install: no finding
    text += job("unknown", CHECKOUT + setup.format(ref="v6", mark="  # expect: unisolated-step")
                + "          install-extras: -e .\n" + run)
    text += job("control", CHECKOUT + setup.format(ref="v6.1.0", mark="") + run)
    status, found, out = guard_findings(tmp_path / "g", text)
    assert status == 1, out
    assert found == marked(text), out
    assert "pip-install: -e ." in out and "cannot tell" in out, out


def test_t76_g2_checkout_after_the_first_is_a_write(tmp_path: Path) -> None:
    # control: a second checkout replaces the files at its path (git, as actions/checkout runs it):
    # ./ci-action then holds another repository's action.yml, not the reviewed one
    evil = tmp_path / "evil"
    evil.mkdir()
    subprocess.run(["git", "init", "-q", str(evil)], check=True, timeout=60)
    (evil / "action.yml").write_text("runs: {using: composite, steps: [{run: echo x, shell: bash}]}\n")
    subprocess.run(["git", "-C", str(evil), "add", "-A"], check=True, timeout=60)
    subprocess.run(["git", "-C", str(evil), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
                    "x"], check=True, timeout=60)
    workspace = tmp_path / "ws"
    (workspace / "ci-action").mkdir(parents=True)
    ours = (REPO / "ci" / "action.yml").read_text()
    (workspace / "ci-action" / "action.yml").write_text(ours)  # the reviewed bytes, first checkout
    shutil.rmtree(workspace / "ci-action")  # actions/checkout empties a path that is not its repo
    subprocess.run(["git", "clone", "-q", str(evil), str(workspace / "ci-action")], check=True, timeout=60)
    assert (workspace / "ci-action" / "action.yml").read_text() != ours
    # held: each second checkout of other content (another repository, only another ref, into
    # `.`), and a first one of another ref, makes the local action a finding; the same commit
    # checked out again is the reviewed tree (the control "again")
    local = "      - uses: ./ci-action  # expect: unisolated-step\n        with:\n          run: pytest\n"
    second = "      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n"
    variants = ["          repository: someone/evil-actions\n          path: ci-action\n",
                "          ref: other\n          path: ci-action\n",
                "          repository: someone/evil-actions\n          path: .\n"]
    text = HEAD + "".join(job(f"j{i}", CHECKOUT + second + v + local) for i, v in enumerate(variants))
    text += job("first-ref", CHECKOUT + "          ref: other\n" + local)
    text += job("control", CHECKOUT + local.replace("  # expect: unisolated-step", ""))
    text += job("again", CHECKOUT + second + local.replace("  # expect: unisolated-step", ""))
    status, found, out = guard_findings(tmp_path / "g", text, {"ci-action/action.yml": ours})
    assert status == 1, out
    assert found == marked(text), out
    assert "wrote the workspace" in out, out


def test_t76_g3_cache_on_by_default_is_a_finding(tmp_path: Path) -> None:
    go = "      - uses: actions/setup-go@{ref}{mark}\n        with:\n          go-version: '1.22'\n{extra}"
    run = "      - run: no-docker run -- go test ./...\n"
    cache = "  # expect: restored-cache"
    steps = [("v5", cache, ""),  # rt4 G3: action.yml `cache: default: true` (v4 on)
             ("v4.1.0", cache, ""),
             ("0123456789abcdef0123456789abcdef01234567", cache, ""),  # a commit: any version
             ("v5", cache, "          cache: true\n"),  # the control: written, as before
             ("v5", "", "          cache: false\n"),
             ("v3", "", "")]  # default false up to v3
    text = HEAD + "".join(job(f"j{i}", CHECKOUT + go.format(ref=ref, mark=mark, extra=extra) + run)
                          for i, (ref, mark, extra) in enumerate(steps))
    # setup-node v5+ caches by default too (package-manager-cache), and runs the package manager
    node = "      - uses: actions/setup-node@v5  # expect: restored-cache unisolated-step\n" \
           "        with:\n          node-version: 20\n"
    text += job("node", CHECKOUT + node + run)
    want = marked(text) | {(n, "unisolated-step") for n, line in enumerate(text.splitlines(), 1)
                           if "restored-cache unisolated-step" in line}
    status, found, out = guard_findings(tmp_path / "g", text)
    assert status == 1, out
    assert found == want, out
    assert "cache (by default at @v5)" in out, out


# The plant: the payload writes a format file in its run dir, and curl reads its -w from it.
PLANT = ("echo '%output{>>/home/u/.bashrc}docker rm -f db' > no-docker-fmt\n"
         "curl -q -s -w @no-docker-fmt --unix-socket /run/docker.sock http://d/_ping\n")
FROM_FILE = {
    "plant": (PLANT, "write-outside-run-dir"),
    "attached": ("curl -q -s -w@no-docker-fmt --unix-socket /run/docker.sock http://d/_ping",
                 "write-outside-run-dir"),
    "stdin": ("curl -q -s --write-out @- --unix-socket /run/docker.sock http://d/_ping < no-docker-fmt",
              "write-outside-run-dir"),
    "variable": ('curl -q -s -w "%out${x}put{/tmp/y}" --unix-socket /run/docker.sock http://d/_ping',
                 "write-outside-run-dir"),
    "header-file": ("curl -q -s -H @no-docker-h --unix-socket /run/docker.sock http://d/_ping",
                    "curl-option-not-allowed"),
}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (the control runs it)")
def test_t76_l1_curl_values_read_from_a_file_are_refused(tmp_path: Path) -> None:
    from no_docker.mutants.lint import lint_source

    # control: curl reads its --write-out format from @FILE (a file the payload can write)
    fmt = tmp_path / "no-docker-fmt"
    fmt.write_text("from-the-file %{http_code}")
    done = subprocess.run(["curl", "-q", "-s", "-o", os.devnull, "-w", f"@{fmt}", "file:///dev/null"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.startswith("from-the-file "), (done.stdout, done.stderr)
    for name, (source, code) in FROM_FILE.items():
        assert [f.code for f in lint_source(source, "t.sh")] == [code], name
    # and a constant format on the command line is still read-only
    assert lint_source("curl -q -s -w '%{http_code}' --unix-socket /run/docker.sock http://d/_ping") == []
