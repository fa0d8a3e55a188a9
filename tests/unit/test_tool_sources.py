"""What decides how a later command runs (supervisor/isolation/tool_sources.py): pure parts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.isolation import tool_sources as ts


@pytest.mark.parametrize(("filename", "module"), [
    ("pytest.py", "pytest"), ("json.pyc", "json"), ("x.pyw", "x"),
    ("_ssl.cpython-311-x86_64-linux-gnu.so", "_ssl"),
    ("yaml.abi3.so", "yaml"), ("foo.so", "foo"), ("README.md", None), ("my-tool.py", None), ("1x.py", None),
    (".py", None), ("pytest", None), ("pytest.ini", None),
])
def test_module_name_is_what_import_would_use(filename, module):
    assert ts.module_name(filename) == module


@given(st.text(min_size=1, max_size=30))
def test_module_name_is_an_identifier_or_none(filename):
    name = ts.module_name(filename)
    assert name is None or name.isidentifier()


@pytest.mark.parametrize(("filename", "named"), [
    ("json.py", True), ("pytest.py", True), ("pluggy", True), ("org", True), ("sys", True),
    ("pytest.ini", False), ("mymod_t25.py", False), ("tests", False),
    ("_ssl.cpython-311-x86_64-linux-gnu.so", True),
])
def test_named_modules_are_the_ones_a_start_up_imports(filename, named):
    # Named even when the Python running no-docker (pipx, the system's) does not have them.
    assert ts.named_module(filename) is named


def test_the_stanza_tag_is_found_only_near_the_top():
    assert ts.has_stanza(b"#!/bin/bash\nno-docker check ... # no-docker: re-exec stanza v2\n")
    assert not ts.has_stanza(b"#!/bin/bash\necho hi\n")
    assert not ts.has_stanza(b"x" * ts.STANZA_HEAD + b"# no-docker: re-exec stanza v2")


@pytest.mark.parametrize("rel", [".cache/pip", ".cache/pip/wheels", ".cache", ".npm", ".cargo/registry",
                                 "go", ".local/share/virtualenv"])
def test_a_code_cache_is_refused_inside_and_around(rel):
    why = ts.cache_refusal(f"/home/u/{rel}", "/home/u", {})
    assert why is not None and "--ro ~/" in why and "runs later" in why, why


@pytest.mark.parametrize("path", ["/home/u/data", "/home/u/.cache/matplotlib", "/srv/cache",
                                  "/home/u/gopher"])
def test_other_directories_are_not_caches(path):
    assert ts.cache_refusal(path, "/home/u", {}) is None


def test_caches_moved_by_variables_are_refused_too():
    env = {"PIP_CACHE_DIR": "/data/pipcache", "XDG_CACHE_HOME": "/xdg", "GOPATH": "relative/ignored"}
    assert "pip's cache" in ts.cache_refusal("/data/pipcache", "/home/u", env)
    assert "uv's cache" in ts.cache_refusal("/xdg/uv", "/home/u", env)
    assert ts.cache_refusal("/data/other", "/home/u", env) is None


def test_the_pytest_config_names_are_pytests_own():
    # _pytest/config/findpaths.py: the names rootdir discovery considers (pytest 9's table).
    import _pytest.config.findpaths as findpaths

    names = getattr(findpaths, "CONFIG_LOADERS_BY_NAME", None)
    if names is None:  # pytest < 9 has no table; its names are a subset of ours
        source = open(findpaths.__file__).read()  # noqa: SIM115
        assert all(f'"{n}"' in source for n in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini"))
    else:
        assert list(names) == list(ts.PYTEST_CONFIGS)


def test_a_cache_moved_by_pips_or_uvs_own_config_is_refused(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\ncache-dir = /data/pipc\n")
    (home / ".config" / "uv").mkdir(parents=True)
    (home / ".config" / "uv" / "uv.toml").write_text('cache-dir = "~/uvc"\n')
    assert "pip's cache" in ts.cache_refusal("/data/pipc/wheels", str(home), {})
    assert "uv's cache" in ts.cache_refusal(f"{home}/uvc", str(home), {})
    assert ts.cache_refusal("/data/other", str(home), {}) is None


def test_find_links_directories_are_refused_like_caches(tmp_path):
    # rt25b #5, #8: pip installs what a find-links directory holds; a venv's own pip.conf counts.
    env = {"PIP_FIND_LINKS": "/opt/wheels"}
    assert "find-links directory" in ts.cache_refusal("/opt/wheels", "/home/u", env)
    venv = tmp_path / ".venv"
    venv.mkdir()
    (venv / "pip.conf").write_text("[global]\ncache-dir = /data/c\nfind-links = file:///data/w /data/w2\n")
    for path in ("/data/c", "/data/w", "/data/w2/sub"):
        assert ts.cache_refusal(path, "/home/u", {}, (str(venv),)), path
    xdg = tmp_path / "xdg"
    (xdg / "pip").mkdir(parents=True)
    (xdg / "pip" / "pip.conf").write_text("[global]\ncache-dir = /data/x\n")
    assert ts.cache_refusal("/data/x", "/home/u", {"XDG_CONFIG_HOME": str(xdg)})
    assert ts.cache_refusal("/data/x", "/home/u", {"XDG_CONFIG_DIRS": f"/nowhere:{xdg}"})


@pytest.mark.parametrize(("name", "candidate"), [
    ("run-e2e", True), ("t.sh", True), ("x.bash.in", True), ("suite.test", True), (".envrc", True),
    ("README.md", False), ("setup.py", False), ("data.json", False),
])
def test_stanza_candidates_are_shell_like_names(name, candidate):
    assert ts.is_stanza_candidate(name) is candidate


def test_a_git_config_value_drops_an_inline_comment():
    from no_docker.supervisor.isolation.later_code import git_config_code_paths

    text = ('[include]\n\tpath = ../team.gitconfig ; shared\n\tpath = "a;b.inc" # c\n'
            '[core]\n\thooksPath = x#y\n')
    assert git_config_code_paths(text) == (["x"], ["../team.gitconfig", "a;b.inc"])


def test_the_stanza_tag_is_the_stanzas_own():
    # tool_sources keeps a copy (ci/stanza.py imports argparse: not on the run's start-up path):
    # any version of the line, v2 today.
    from no_docker.ci.stanza import STANZA, STANZA_TAG

    assert STANZA_TAG.encode().startswith(ts.STANZA_TAG)
    assert ts.has_stanza(b"#!/bin/bash\n" + STANZA.encode() + b"\n")


def _configparser_items(text: str) -> list[list[tuple[str, str]]] | None:
    import configparser

    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return [parser.items(section) for section in parser.sections()]


# Lines built from the pieces that decide how configparser reads a line: headers (DEFAULT
# too), both delimiters, comments, indentation, blank lines, control characters, non-ASCII.
_INI_LINE = st.one_of(
    st.sampled_from(["[global]", "[install]", "[DEFAULT]", "[ global ]", "[a]b]", "[]", "[x", "", "  ",
                     "# c", "; c", "  # c", "\r", "find-links = /a", "Find_Links=/b", "cache-dir: /c",
                     "index-url = file:///d", "  continued", "\tcontinued", "key", "= v", "k=v:w", "k:v=w",
                     "k = ", "x\ry = 1", "\x0bk = v", "k = v\x1c", "k = é"]),
    st.text(alphabet=" \t[]=:#;_-/abkKé\r\x0c", max_size=12),
)


@given(st.one_of(st.lists(_INI_LINE, max_size=8),
                 st.lists(_INI_LINE, max_size=8).map(lambda ls: ["[global]", *ls])))
def test_plain_ini_reads_what_configparser_reads(lines):
    # plain_ini stands in for configparser on the run path: where it answers, configparser
    # must give the same sections and items; where configparser refuses the file, plain_ini
    # must not answer (the caller then asks configparser, which refuses it).
    text = "\n".join(lines)
    plain = ts.plain_ini(text)
    if plain is not None:
        assert plain == _configparser_items(text)


def test_plain_ini_answers_for_the_usual_pip_conf():
    text = ("[global]\n# pip's cache\nfind-links = /opt/wheels\nextra-index-url = file:///opt/a file:///opt/b\n"
            "\n[install]\nIndex_URL: /x\n")
    assert ts.plain_ini(text) == [[("find-links", "/opt/wheels"), ("extra-index-url", "file:///opt/a file:///opt/b")],
                                  [("index_url", "/x")]]
    assert ts.plain_ini("[global]\nfind-links =\n    /opt/wheels\n") is None  # a continuation: configparser's
    assert ts.path_settings("[global]\nfind-links =\n    /opt/a\n    /opt/b\n") == [("find-links", "/opt/a"),
                                                                                  ("find-links", "/opt/b")]


def test_startup_refusal_names_the_variable_for_is_holds_and_inside():
    env = {"PYTHONUSERBASE": "/data/ub", "GIT_CONFIG_GLOBAL": "/data/x/gc", "BASH_ENV": "~/b/env.sh",
           "LD_PRELOAD": "/opt/l/a.so /opt/m/b.so", "XDG_CONFIG_DIRS": "/etc/xdg:/data/xdg",
           "EDITOR": "/data/bin/ed --wait"}
    assert "PYTHONUSERBASE" in ts.startup_refusal("/data/ub", "/home/u", env)  # is
    assert "PYTHONUSERBASE" in ts.startup_refusal("/data/ub/lib", "/home/u", env)  # inside a dir
    assert "PYTHONUSERBASE" in ts.startup_refusal("/data", "/home/u", env)  # holds
    assert "GIT_CONFIG_GLOBAL" in ts.startup_refusal("/data/x", "/home/u", env)  # holds a file
    assert ts.startup_refusal("/data/x/sub", "/home/u", env) is None  # beside a file: nothing
    assert "BASH_ENV" in ts.startup_refusal("/home/u/b", "/home/u", env)  # ~/ is $HOME's
    assert "LD_PRELOAD" in ts.startup_refusal("/opt/m", "/home/u", env)  # each of a list
    assert "XDG_CONFIG_DIRS" in ts.startup_refusal("/data/xdg/git", "/home/u", env)
    assert "EDITOR" in ts.startup_refusal("/data/bin", "/home/u", env)  # a program's first word
    assert ts.startup_refusal("/srv/w", "/home/u", env) is None
    assert ts.startup_refusal("/data/ubx", "/home/u", env) is None  # a prefix is not a parent


def test_startup_refusal_reads_git_config_from_the_environment():
    env = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me",
           "GIT_CONFIG_KEY_1": "include.path", "GIT_CONFIG_VALUE_1": "/data/inc.cfg"}
    assert "GIT_CONFIG_VALUE_1" in ts.startup_refusal("/data", "/home/u", env)
    assert ts.startup_refusal("/data", "/home/u", {**env, "GIT_CONFIG_COUNT": "bogus"}) is None
    assert ts.startup_refusal("/data", "/home/u", {}) is None
    params = {"GIT_CONFIG_PARAMETERS": "'user.name'='me' 'core.hookspath'='/data/hooks'"}
    assert "GIT_CONFIG_PARAMETERS" in ts.startup_refusal("/data", "/home/u", params)
    assert ts.startup_refusal("/data", "/home/u", {"GIT_CONFIG_PARAMETERS": "'unclosed"}) is None


def test_shared_sticky_is_world_writable_and_sticky():
    import stat

    from no_docker.supervisor.isolation.plan import shared_sticky

    assert shared_sticky(stat.S_IFDIR | 0o1777)
    assert not shared_sticky(stat.S_IFDIR | 0o0777)  # no sticky bit: not the shared kind
    assert not shared_sticky(stat.S_IFDIR | 0o1755)
