"""Packaging (issue 15 item 6): ``python -m build`` makes an sdist and a wheel with the license as
an SPDX expression; the wheel installs into a clean venv outside the repository, and
``no-docker --version`` and ``no-docker prove`` (PROVEN) work from there.

Then the README's install, config and pytest snippets, as written, in a small project of one's
own with that wheel.

And every command but `prove` as an unprivileged user, from that wheel in a venv of the system
Python. One test, about 50 s: the build (an isolated build env), the install (dependencies from the
configured index), and ``prove``. It found a real bug the first time: installed in a venv under
/tmp, the outer guard bound the venv and the package inside it as two mounts, and the run
inside refused (P4) because a read-only bind of the outer one leaves the inner one writable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import readme_snippets

REPO = Path(__file__).resolve().parents[2]


def _skip_reason() -> str | None:
    try:
        import build  # noqa: F401
    except ImportError:
        return "the `build` package is not installed (pip install -e '.[test]')"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_wheel_installs_outside_the_repo_and_proves():
    with tempfile.TemporaryDirectory(prefix="no-docker-wheel-") as scratch:
        base = Path(scratch)
        built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(base / "dist"), str(REPO)],
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        log = built.stdout + built.stderr
        assert "License classifiers are deprecated" not in log
        assert "`project.license` as a TOML table is deprecated" not in log
        assert "is absent from the `packages` configuration" not in log
        wheel = next((base / "dist").glob("no_docker-*-py3-none-any.whl"))
        sdist = next((base / "dist").glob("no_docker-*.tar.gz"))
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert "License-Expression: MIT" in meta and "Requires-Dist: psutil" in meta
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        for data in ("no_docker/mutants/pins.json", "no_docker/ci/action.yml",
                     "no_docker/supervisor/isolation/probe.py", "no_docker/ci/workflows/guard.yml"):
            assert data in names, data
        with tarfile.open(sdist) as tf:
            assert any(n.endswith("/LICENSE") for n in tf.getnames())

        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                                   capture_output=True, text=True, timeout=300)
        assert installed.returncode == 0, installed.stderr[-3000:]
        work = base / "elsewhere"
        work.mkdir()
        version = subprocess.run([str(venv / "bin" / "no-docker"), "--version"], cwd=work,
                                 capture_output=True, text=True, timeout=60)
        assert version.returncode == 0 and version.stdout.strip().startswith("no-docker 0."), version
        # The command is supervisor/no-docker, not a wrapper pip generates (pip 23's imports re:
        # 4.4 ms of every run): a run's interpreter loads neither re nor enum.
        script = (venv / "bin" / "no-docker").read_text()
        assert script.startswith(f"#!{venv}/bin/python"), script
        statements = [line for line in script.splitlines() if line and not line.startswith("#")]
        assert statements[:2] == ["import sys", "from no_docker.supervisor.cli import console_main"], script
        if shutil.which("bwrap"):
            command = [str(venv / "bin" / "python"), "-X", "importtime", str(venv / "bin" / "no-docker"),
                       "run", "--quiet", "--", "true"]
            timed = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=120)
            assert timed.returncode == 0, timed.stderr[-2000:]
            loaded = {line.rsplit("|", 1)[1].strip() for line in timed.stderr.splitlines()
                      if line.startswith("import time:") and line.count("|") == 2}
            assert "no_docker.supervisor.run" in loaded and not loaded & {"re", "enum"}, sorted(loaded)
        where = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import no_docker.supervisor as s; print(s.__file__)"],
                               cwd=work, capture_output=True, text=True, timeout=60)
        assert where.stdout.startswith(str(venv)), where  # the wheel's copy, not the repository's
        proved = subprocess.run([str(venv / "bin" / "no-docker"), "prove"], cwd=work,
                                capture_output=True, text=True, timeout=300)
        verdict = [line for line in proved.stdout.splitlines() if line.startswith("no-docker prove:")]
        if proved.returncode != 0 and "outer guard" in proved.stderr and "cannot" in proved.stderr:
            pytest.skip(f"the outer guard cannot be made here: {proved.stderr.strip()[-300:]}")
        assert proved.returncode == 0, proved.stdout[-3000:] + proved.stderr[-3000:]
        assert verdict and verdict[0].startswith("no-docker prove: PROVEN"), verdict

        if _nonroot_possible():
            every_command_as_a_newcomer(base, wheel)

        # The README's "Using it in a project": install, config and pytest snippets, as written,
        # in a small project of one's own beside a clone (a copy of this tree) in ../no-docker.
        clone(base / "no-docker")
        project = base / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text('[project]\nname = "example"\nversion = "0"\n\n'
                                                + readme_snippets.snippets()["config"])
        (project / "test_example.py").write_text(
            "import os\n\ndef test_inside_a_run():\n    assert os.environ.get('CI') == 'kept'\n")
        shell_env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                     "HOME": os.environ.get("HOME", "/root"), "CI": "kept", "LANG": "C.UTF-8"}
        for line in readme_snippets.lines("install"):
            done = subprocess.run(["bash", "-c", line], cwd=project, env=shell_env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
        for line in readme_snippets.lines("pytest"):
            done = subprocess.run(["bash", "-c", line], cwd=project, env=shell_env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            assert "1 passed" in done.stdout, f"{line}: {done.stdout}"
            assert "isolation proven" in done.stderr, f"{line}: {done.stderr}"

        # the wheel snippet: built in the clone, installed into a fresh venv of another project
        other = base / "other"
        other.mkdir()
        subprocess.run([sys.executable, "-m", "venv", str(other / ".venv")], check=True, timeout=120)
        for line in readme_snippets.lines("wheel"):
            done = subprocess.run(["bash", "-c", line], cwd=other, env=shell_env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        version = subprocess.run([str(other / ".venv" / "bin" / "no-docker"), "--version"], cwd=other,
                                 capture_output=True, text=True, timeout=60)
        assert version.returncode == 0, version
        assert version.stdout.strip() == f"no-docker {METADATA['version']}", version


METADATA = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# what a clone holds that a copy of this tree must leave out (the venv, caches, build output)
NOT_IN_A_CLONE = {".venv", ".git", ".pytest_cache", ".hypothesis", ".ruff_cache", "build", "dist",
                  "no_docker.egg-info", "__pycache__"}


def clone(dest: Path) -> None:
    """A copy of this tree as a fresh clone has it (git ls-files would miss uncommitted work)."""
    shutil.copytree(REPO, dest, ignore=lambda d, names: [n for n in names if n in NOT_IN_A_CLONE])


def test_the_distribution_metadata_is_complete_and_publishable():
    for key in ("name", "version", "description", "readme", "requires-python", "license", "license-files",
                "classifiers", "keywords", "dependencies"):
        assert METADATA.get(key), f"[project] {key} is missing"
    assert not any(c.startswith("License ::") for c in METADATA["classifiers"])  # deprecated by `license`
    assert "Operating System :: POSIX :: Linux" in METADATA["classifiers"]
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in " ".join(METADATA["classifiers"])
    eps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["cosmic_ray.distributors"] == {"no-docker": "no_docker.ci.cosmic_ray:NoDockerDistributor"}
    assert "pip install no-docker " not in (REPO / "README.md").read_text()  # not a name of ours


SYSTEM_PYTHON = "/usr/bin/python3"


def _nonroot_possible() -> bool:
    return (os.geteuid() == 0 and shutil.which("setpriv") is not None and os.access(SYSTEM_PYTHON, os.X_OK)
            and shutil.which("bwrap") is not None)


def every_command_as_a_newcomer(base: Path, wheel: Path) -> None:
    """The wheel in a venv of the system Python (readable by everyone), then every command as an
    unprivileged user in a fresh login-less shell: no XDG_RUNTIME_DIR, no NO_DOCKER_STATE_DIR.

    `prove` is left out: as a user without sudo rights its control cannot take the `sudo`
    route, and the verdict is FAILED (reported to the lead as its own issue)."""
    uid = 61000 + int.from_bytes(os.urandom(2), "big") % 4000
    venv = base / "sysvenv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    home, work = base / "newcomer-home", base / "newcomer-work"
    for d in (home, work):
        d.mkdir()
        os.chown(d, uid, uid)
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o005 | (0o001 if os.path.isdir(path) else 0))
    os.chmod(base, 0o755)
    (work / "empty.jsonl").write_text("")
    expected = {"--version": 0, "--help": 0, "run -- true": 0, "runs": 0, "runs --json": 0,
                "end --all": 0, "check": 125, "stanza": 0, "mutants verify": 0,
                "canary show empty.jsonl": 0, "run --quiet -- git -C repo status --short": 0,
                "guard repo": 0}
    try:
        for command, status in expected.items():
            env = ["PATH=" + f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", f"HOME={home}", "LANG=C.UTF-8"]
            # The repository exists before the run: one made *inside* a run is code that runs
            # later (its hooks and config), which the run's audit refuses (125).
            shell = f"cd {work} && {{ [ -d repo ] || git init -q repo; }} && exec no-docker {command}"
            done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                                   "env", "-i", *env, "/bin/sh", "-c", shell],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == status, f"{command}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
            assert "Traceback" not in done.stderr and "state dir" not in done.stderr, (command, done.stderr)
    finally:
        shutil.rmtree(f"/tmp/no-docker-{uid}", ignore_errors=True)
