"""T-87: the guard's model of a pip requirement agrees with pip: every word the guard lets a step
outside a run `pip install` is one pip looks up in an index, never a local file or directory of
that name, even when the checkout holds one (issue 27: `no-docker-99.0.tar.gz`).

Measured against the real pip of this environment, offline (``--dry-run --no-index --no-deps``,
no config, an empty HOME): for words hypothesis draws from names, extras, specifiers and file
suffixes, a file (or a project directory) of exactly that name lies in pip's working directory.
A word the guard accepts must make pip say that no version satisfies the requirement (it asked
the index); one the guard refuses for its archive suffix is, in pip's hands, a local file. Any
disagreement is a failing, shrunk example. Weakened build: ``weakened/t87-*.patch``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from no_docker.ci.script_rules import ARCHIVE_SUFFIXES, requirement_problem

PIP_TIMEOUT = 60
AS_REQUIREMENT = ("Could not find a version that satisfies the requirement", "Requirement already satisfied")
AS_LOCAL = ("Processing ./", "Processing /", "file://", "Invalid wheel filename",
            "does not appear to be a Python project")

NAME = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?", fullmatch=True)
EXTRAS = st.sampled_from(["", "[x]", "[a,b]"])
SPEC = st.one_of(st.just(""), st.tuples(st.sampled_from(["==", ">=", "<", "~=", "!=", "==="]),
                                        st.from_regex(r"[0-9]{1,2}(\.[0-9a-z*]{1,3}){0,2}", fullmatch=True))
                 .map("".join))
SUFFIX = st.sampled_from(["", *ARCHIVE_SUFFIXES, ".tar.gz", ".TAR.GZ", ".Zip", ".tar.bz2", ".txt", ".py"])
WORDS = st.tuples(NAME, EXTRAS, SPEC, SUFFIX).map("".join)
# mostly words the guard accepts (the archive suffixes are the other test's)
PLAIN_WORDS = st.tuples(NAME, EXTRAS, SPEC, st.sampled_from(["", "", ".txt", ".py", ".d", ".gz"])
                        ).map("".join)


def pip_output(word: str, cwd: Path, home: Path) -> str:
    """What ``pip install WORD`` does with WORD, offline, from ``cwd`` (never installs)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PIP_CONFIG_FILE": os.devnull, "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-I", "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--no-input", word],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
    return done.stdout + done.stderr


def plant(cwd: Path, word: str, as_dir: bool) -> None:
    """A file (a small zip, as an archive would be) or a project directory named ``word``."""
    target = cwd / word
    if as_dir:
        target.mkdir()
        (target / "pyproject.toml").write_text('[project]\nname = "planted"\nversion = "1"\n')
    else:
        with zipfile.ZipFile(target, "w") as z:
            z.writestr("PKG-INFO", "Metadata-Version: 2.1\nName: planted\nVersion: 1\n")


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return tmp_path_factory.mktemp("pip-cwd"), tmp_path_factory.mktemp("pip-home")


def _fresh(root: Path) -> Path:
    n = len(list(root.iterdir()))
    cwd = root / f"w{n}"
    cwd.mkdir()
    return cwd


# No shrinking: each example is a pip process (about a second); the falsifying word is printed.
@settings(max_examples=20, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(PLAIN_WORDS, WORDS), st.booleans())
@example("no-docker-99.0.tar.gz", False)  # issue 27's word, always tried
@example("no-docker==99.0.tar.gz", False)
@example("no-docker", True)  # a project directory named like the package
@example("B8[x]~=00", False)  # found by this test: ~= needs two release segments
@example("x==1.0a1.*", False)  # .* after a pre-release is no specifier
def test_t87_a_word_the_guard_accepts_is_looked_up_in_an_index(places: tuple[Path, Path], word: str,
                                                               as_dir: bool) -> None:
    if requirement_problem(word) is not None:
        return  # refused: the next test measures those
    cwd = _fresh(places[0])
    plant(cwd, word, as_dir)
    out = pip_output(word, cwd, places[1])
    assert any(m in out for m in AS_REQUIREMENT) and not any(m in out for m in AS_LOCAL), \
        f"the guard accepts {word!r}, but pip took the local {'dir' if as_dir else 'file'}:\n{out[-600:]}"


@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(NAME, EXTRAS, SPEC, st.sampled_from([".tar.gz", ".zip", ".whl", ".tgz", ".TAR.GZ"]))
def test_t87_an_archive_suffix_is_a_local_file_to_pip(places: tuple[Path, Path], name: str, extras: str,
                                                      spec: str, suffix: str) -> None:
    """Why the guard refuses these: pip installs the local file (its build code would run)."""
    word = name + extras + spec + suffix
    assert requirement_problem(word) is not None
    cwd = _fresh(places[0])
    plant(cwd, word, as_dir=False)
    out = pip_output(word, cwd, places[1])
    assert any(m in out for m in AS_LOCAL), f"pip did not take the local file {word!r}:\n{out[-600:]}"


def test_t87_the_issue27_word() -> None:
    assert requirement_problem("no-docker-99.0.tar.gz") is not None
    assert requirement_problem("no-docker") is None
