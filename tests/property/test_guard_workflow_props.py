"""Property (issue 17 B): workflows built from the guard's allowed forms pass; one planted
step, construct or setting outside them is refused wherever it stands.

A generated job is: allowed steps (checkout, setup, installs by name, the guard, builtins)
followed by isolated steps (`no-docker run`, the remote action), each possibly wrapped in
`if`/`&&`/`set -e`. Mutations are the red-team classes: a plain step anywhere, code hidden in
an isolated step, environment or shell that makes bash source files, an expression pasted
into `run:`, a job container or engine service, a local action merely named like ours.
"""

from __future__ import annotations

from hypothesis import given, note, settings
from hypothesis import strategies as st
from no_docker.ci.workflow_rules import check_workflow


class Repo:
    def script_has_stanza(self, path: str) -> bool:
        return True  # even a stanza script does not make a step isolated any more

    def pytest_config_isolates(self) -> bool:
        return True

    def is_no_docker_action(self, path: str) -> bool:
        return False  # a local action named like ours, not our bytes

    def has_link(self, path: str) -> bool:
        return False

    def run_config(self, directory: str) -> list[tuple[str, str]] | None:
        return []


ALLOWED = st.sampled_from([
    "uses: actions/checkout@v4", "uses: actions/setup-python@v5", "run: no-docker guard",
    "run: sudo apt-get install -y -qq bubblewrap", "run: pip install --quiet no-docker",
    "run: python3 -I -m pip install no-docker 'pytest>=8'", "run: echo hello",
    "run: set -euo pipefail && echo ok", 'run: echo FORCE_COLOR=1 >> "$GITHUB_ENV"',
    "uses: actions/upload-artifact@v4\n        with: {name: a, path: dist}",
    "uses: actions/download-artifact@v4\n        with: {name: a, path: dist}",
])
ISOLATED = st.sampled_from([
    "run: no-docker run -- pytest -q", "run: no-docker run -- make test",
    "run: set -e; no-docker run -- ./t.sh", "run: if true; then no-docker run -- make; fi",
    "uses: knittingcode/no-docker/ci@v1\n        with: {run: make test}",
    "run: |\n          no-docker run -- bash <<'SCRIPT'\n          make check\n          SCRIPT",
])
BAD_STEPS = [
    "run: make test", "run: pytest --no-docker -q", "run: python -m pytest --no-docker",
    "run: bash tests/suite.sh", "run: pip install -e .", "run: python -m pip install x",
    "run: make test  # no-docker: isolated", "uses: ./ci", "uses: some/other-action@v1",
    "run: env -S 'sh -c \"make test\"' no-docker run -- true",
    "run: |\n          x='a[$(make test)]'\n          no-docker run -- true\n          [[ 1 -eq x ]]",
    "run: |\n          p='$(make test)'\n          no-docker run -- echo \"${p@P}\"",
    "run: printf -v 'a[$(make)]' x; no-docker run -- true",
    "run: |\n          no-docker run -- sh <<$'EOF'\n          EOF\n          make test\n          EOF",
    "run: no-docker run -- pytest -k ${{ matrix.x }}",
    'run: echo "BASH_ENV=./x" >> "$GITHUB_ENV"',
    "run: no-docker run -- t\n        shell: bash --rcfile ./x -i {0}",
    "run: no-docker run -- t\n        env: {BASH_ENV: ./x}",
    "run: no-docker run -- t || ./deploy.sh",
    # issue 27's bypasses
    "run: export XDG_CONFIG_DIRS=.ci; pip install no-docker",
    "run: pip install no-docker-99.0.tar.gz",
    "uses: knittingcode/no-docker/ci@v1\n        with: {install: no-docker-99.0.tar.gz, run: make}",
    "run: no-docker run --rw /home/runner/work/proj/.. -- make",
    "run: export APT_CONFIG=ci/apt.conf; sudo apt-get update",
    "run: echo x > ~/.gitconfig",
    "uses: actions/cache@v4\n        with: {path: ~/.cache/pip, key: k}",
]
JOB_SETTINGS = ["    container: docker:dind\n", "    services:\n      d:\n        image: docker:dind\n",
                "    env:\n      BASH_ENV: ./x\n", "    env:\n      XDG_CONFIG_DIRS: .ci\n",
                "    env:\n      UNKNOWN_TO_THE_GUARD: x\n",
                "    defaults:\n      run:\n        shell: bash -i {0}\n"]


def workflow(steps: list[str], job_extra: str = "") -> str:
    body = "".join(f"      - {step}\n" for step in steps)
    return f"on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n{job_extra}    steps:\n{body}"


JOBS = st.tuples(st.lists(ALLOWED, max_size=4), st.lists(ISOLATED, max_size=3)).map(lambda t: [*t[0], *t[1]])


@settings(max_examples=80, deadline=None)
@given(JOBS)
def test_workflows_from_the_allowed_forms_pass(steps):
    text = workflow(steps)
    note(text)
    assert check_workflow(text, "w.yml", Repo()) == [], text


@settings(max_examples=120, deadline=None)
@given(JOBS, st.sampled_from(BAD_STEPS), st.data())
def test_a_planted_step_outside_the_forms_is_refused(steps, bad, data):
    at = data.draw(st.integers(0, len(steps)), label="at")
    text = workflow([*steps[:at], bad, *steps[at:]])
    note(text)
    assert check_workflow(text, "w.yml", Repo()), f"ACCEPTED:\n{text}"


@settings(max_examples=40, deadline=None)
@given(JOBS, st.sampled_from(JOB_SETTINGS))
def test_a_job_setting_that_runs_code_or_an_engine_is_refused(steps, extra):
    text = workflow(steps, extra)
    note(text)
    assert check_workflow(text, "w.yml", Repo()), f"ACCEPTED:\n{text}"
