"""Properties of issue 27's default-deny (guard part): the environment lists, install arguments
and the run paths judged against the runner's layout. Pure, except one check of ``place``
against the kernel's own resolution of ``..`` in a real directory tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.ci import runner_paths as rp
from no_docker.ci.environment import (
    ALLOWED,
    REFUSED,
    REFUSED_PREFIXES,
    before_no_docker_problem,
    outside_problem,
)
from no_docker.ci.script_rules import ARCHIVE_SUFFIXES, Kind, judge_script, requirement_problem

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
PARTS = st.lists(st.sampled_from(["..", ".", "", "a", "b", "_temp", "work", "repo", ".cache", "pip", "~"]),
                 min_size=1, max_size=8)
PROTECTED = (rp.RUNNER_TEMP, rp.FILE_COMMANDS, rp.ACTIONS, f"{rp.WORK}/_tool", rp.TOOL_CACHE, rp.RUNNERS)


@settings(max_examples=150, deadline=None)
@given(NAMES, st.one_of(st.none(), st.text(max_size=20)))
def test_only_the_short_list_passes_outside(name: str, value: str | None) -> None:
    if outside_problem(name, value) is None:
        assert name in ALLOWED and value is not None and ALLOWED[name].match(value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(REFUSED) + list(REFUSED_PREFIXES)),
       st.from_regex(r"[A-Z0-9_]{0,8}", fullmatch=True))
def test_what_tools_read_is_refused_everywhere(start: str, rest: str) -> None:
    name = start + rest if start in REFUSED_PREFIXES else start
    assert before_no_docker_problem(name) is not None
    assert outside_problem(name, "x") is not None
    assert before_no_docker_problem(name.lower()) is not None  # npm_config_*, xdg_... read as well


def test_the_issue27_variables_are_refused() -> None:
    for name in ("XDG_CONFIG_DIRS", "XDG_CONFIG_HOME", "XDG_DATA_DIRS", "APT_CONFIG", "PIP_FIND_LINKS",
                 "PYTHONPATH", "PYTHONSTARTUP", "PYTHONUSERBASE", "BASH_ENV", "ENV", "LD_PRELOAD",
                 "GIT_CONFIG_GLOBAL", "NODE_OPTIONS", "npm_config_prefix", "OPENSSL_CONF", "CC"):
        assert before_no_docker_problem(name), name


@settings(max_examples=150, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True), st.sampled_from(ARCHIVE_SUFFIXES),
       st.booleans())
def test_a_word_ending_like_an_archive_is_never_a_requirement(stem: str, suffix: str, upper: bool) -> None:
    word = stem + (suffix.upper() if upper else suffix)
    assert requirement_problem(word) is not None
    assert [j.kind for j in judge_script(f"pip install {word}")] == [Kind.PLAIN]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="abz09._-/:@~+=<>![], ", min_size=1, max_size=24))
def test_pip_installs_by_name_only(word: str) -> None:
    judged = judge_script(f"pip install '{word}'") if "'" not in word else []
    if judged and judged[0].kind is Kind.ALLOWED:
        assert requirement_problem(word) is None
        assert not any(c in word for c in "/:@ ~") and not word.startswith(".")


SPEC_OPERATORS = ["==", "!=", "<=", ">=", "<", ">", "~=", "==="]
SPEC_VERSIONS = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,2}){0,3}((a|b|rc)[0-9])?(\.post[0-9])?(\.dev[0-9])?"
                              r"(\.\*)?", fullmatch=True)


@settings(max_examples=600, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?", fullmatch=True),
       st.one_of(st.sampled_from(["", "[x]", "[a,b]", "[a_b-c]"]),
                 st.from_regex(r"\[[A-Za-z0-9._,-]{1,8}\]", fullmatch=True)),
       st.one_of(st.just(""), st.tuples(st.sampled_from(SPEC_OPERATORS), SPEC_VERSIONS).map("".join)))
def test_an_accepted_requirement_is_one_pip_parses(name: str, extras: str, spec: str) -> None:
    """Every word the guard accepts is a requirement to the packaging pip vendors (what
    ``pip install WORD`` parses it with): T-87 asks the real pip, a second per word; this asks
    its parser, for many more words (T-87's run found ``B8[x]~=00``, which pip refuses)."""
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement

    word = name + extras + spec
    if requirement_problem(word) is None:
        try:
            parsed = Requirement(word)
        except InvalidRequirement as error:
            raise AssertionError(f"the guard accepts {word!r}, pip's parser refuses it: {error}") from None
        assert parsed.url is None and (str(parsed.specifier) == spec or not spec), word


@settings(max_examples=250, deadline=None)
@given(st.one_of(PARTS.map("/".join), PARTS.map(lambda p: "/" + "/".join(p))),
       st.sampled_from([rp.DEFAULT_WORKSPACE, f"{rp.DEFAULT_WORKSPACE}/a/b", rp.HOME, rp.WORK]))
def test_an_accepted_writable_path_holds_nothing_that_runs_later(path: str, cwd: str) -> None:
    placed = rp.place(path, cwd)
    assert placed.startswith("/") and "//" not in placed
    assert not {"..", "."} & set(placed.split("/"))
    if rp.writable_problem(placed, lambda rel: False) is None:
        assert rp.in_workspace(placed) is not None or (rp.is_under(placed, rp.CACHE) and placed != rp.CACHE)
        assert not rp.is_under(rp.HOME, placed) and not rp.is_under(rp.WORK, placed)
        assert not any(rp.is_under(placed, d) or rp.is_under(d, placed) for d in PROTECTED)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directories a/b/c nested 6 deep, every name at every level: any path of those names
    and `..` from a/b/c (3 deep) exists as long as it climbs at most 3 and goes down at most 3."""
    root = tmp_path_factory.mktemp("tree")
    def grow(at: Path, depth: int) -> None:
        if depth:
            for name in ("a", "b", "c"):
                (at / name).mkdir()
                grow(at / name, depth - 1)
    grow(root, 6)
    return root


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "a", "b", "c"]), min_size=1, max_size=6))
def test_place_resolves_dotdot_as_the_kernel_does_without_links(tree: Path, parts: list[str]) -> None:
    depth, low = 3, 3
    for part in parts:  # keep to paths that exist in the tree
        depth += {"..": -1, ".": 0}.get(part, 1)
        low = min(low, depth)
        if depth > 6 or low < 0:
            return
    cwd = tree / "a" / "b" / "c"
    rel = "/".join(parts)
    real = os.path.realpath(os.path.join(cwd, rel))  # every component exists and none is a link
    assert rp.place(rel, str(cwd)) == real


def test_a_link_of_the_repository_is_not_followed() -> None:
    links = {"sub"}
    assert rp.writable_problem(f"{rp.DEFAULT_WORKSPACE}/sub/x", links.__contains__)
    assert rp.writable_problem(f"{rp.DEFAULT_WORKSPACE}/subx", links.__contains__) is None


def test_below_what_an_earlier_run_wrote_is_refused() -> None:
    ws = rp.DEFAULT_WORKSPACE
    assert rp.writable_problem(ws, lambda rel: False, [ws]) is None  # the same root again
    assert rp.writable_problem(f"{ws}/build", lambda rel: False, [ws])
    assert rp.writable_problem(f"{rp.CACHE}/mytool", lambda rel: False, [f"{rp.CACHE}/mytool"]) is None
    assert "pip" in rp.writable_problem(f"{rp.CACHE}/pip", lambda rel: False, [])  # a code cache


def test_the_runner_dirs_hold_what_runs_later() -> None:
    assert Path(rp.FILE_COMMANDS).parent == Path(rp.RUNNER_TEMP)
    for d in (rp.HOME, rp.WORK, rp.RUNNER_TEMP, rp.FILE_COMMANDS, rp.TOOL_CACHE, f"{rp.WORK}/proj"):
        assert rp.writable_problem(d, lambda rel: False), d
    assert rp.readable_problem(rp.FILE_COMMANDS, lambda rel: False)
    assert rp.readable_problem("/usr/share/doc", lambda rel: False) is None
