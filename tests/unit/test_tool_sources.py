"""What decides how a later command runs (supervisor/isolation/tool_sources.py): pure parts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
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


# rt5 #3 (T-80): path_settings against pip's own reading of the same file: pip's parser class
# (configuration._RawConfigParser: its key normalisation), read from a file as pip reads it
# (text mode: CR line ends), each value split as pip's optparse defaults split it, and each
# word taken as pip's build_source takes a location (file: -> url_to_path, a remote URL: none).
_PIP_KEYS = ["find-links", "--find-links", "Find_Links", "--CACHE_DIR", "cache-dir", "index-url",
             "--pypi-url", "extra-index-url", "constraint", "--requirement", "editable", "python", "src",
             "other", "--no-index"]
_PIP_VALUES = ["/a", "/a b", "file:/a", "file:///a%20b", "file://localhost/a", "http://x/y", "~/a", "rel",
               "FILE:///c", "", "'/q'", "/a\n  /b"]
_PIP_LINE = st.one_of(
    st.sampled_from(["[global]", "[install]", "# c", "; c", "", "[x"]),
    st.builds(lambda k, d, v: f"{k}{d}{v}", st.sampled_from(_PIP_KEYS), st.sampled_from(["=", " = ", ": "]),
              st.sampled_from(_PIP_VALUES)),
)


def _pips_locations(path: str) -> set[tuple[str, str]] | None:
    import configparser

    from pip._internal.configuration import _RawConfigParser
    from pip._internal.utils.urls import url_to_path
    from pip._internal.vcs import is_url

    parser = _RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error:
        return None  # pip refuses to start with this file
    found = set()
    for section in parser.sections():
        for key, value in parser.items(section):
            if key not in ts.PIP_PATH_OPTIONS:
                continue
            for word in value.split() if ts.PIP_PATH_OPTIONS[key][1] else [value]:
                if not word:
                    continue  # an empty value names nothing (pip: no cache, no location)
                if key in ("cache-dir", "src", "python"):
                    found.add((key, word))  # type="path": taken as written
                elif word.startswith("file:"):
                    found.add((key, url_to_path(word)))
                elif not is_url(word):
                    found.add((key, word))
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_PIP_LINE, max_size=8).map(lambda ls: ["[global]", *ls]),
       st.sampled_from(["\n", "\r", "\r\n"]))
def test_path_settings_find_what_pip_itself_reads(tmp_path_factory, lines, end):
    path = tmp_path_factory.mktemp("pc") / "pip.conf"
    text = end.join(line.replace("\n", end) for line in lines) + end
    path.write_bytes(text.encode())
    pips = _pips_locations(str(path))
    ours = set(ts.path_settings(path.read_bytes().decode()))
    if pips is not None:
        assert pips <= ours, (text, pips - ours)


def test_the_pip_option_table_is_pips_own():
    # Every long name of pip's options that name what the next install takes from (its dest),
    # in install/download/wheel/lock: a new alias in pip is a key no-docker would not read.
    from pip._internal.commands import create_command

    dests = {"find_links", "index_url", "extra_index_urls", "constraints", "build_constraints",
             "requirements", "requirements_from_scripts", "editables", "src_dir", "cache_dir", "python"}
    names = set()
    for command in ("install", "download", "wheel"):
        parser = create_command(command).parser
        for option in parser._get_all_options():
            if option.dest in dests and option.action in ("store", "append"):
                names |= {o[2:] for o in option._long_opts}
    assert names <= set(ts.PIP_PATH_OPTIONS), names - set(ts.PIP_PATH_OPTIONS)
    appended = {n for n, (_, split) in ts.PIP_PATH_OPTIONS.items() if split}
    for command in ("install", "download", "wheel"):
        for option in create_command(command).parser._get_all_options():
            if option.dest in dests and option.action in ("store", "append"):
                for o in option._long_opts:
                    assert (option.action == "append") == (o[2:] in appended), o


def test_requirement_files_lines_are_read_as_pip_reads_them():
    text = ("# c\n-r more.txt\n--constraint=c.txt\n-f/wh  # comment\n-e ./proj\npkg @ file:///opt/p.whl\n"
            "--index-url https://pypi.org/simple\n-i ${D}/idx\nname==1.0 \\\n  --hash=sha256:x\nx\r-c\t/z\n")
    assert ts.requirement_references(text, {"D": "/d"}) == [
        ("requirements file", "more.txt"), ("constraints file", "c.txt"), ("find-links directory", "/wh"),
        ("editable project", "./proj"), ("requirement", "/opt/p.whl"), ("local index", "/d/idx"),
        ("constraints file", "/z")]


def test_pips_reading_of_a_cr_file_with_dashed_keys_is_ours(tmp_path):
    # the control of the generated comparison: a file pip reads, with something in it
    path = tmp_path / "pip.conf"
    path.write_bytes(b"[global]\r--find-links = file://localhost/a /b\rcache-dir = /c x\r")
    expected = {("find-links", "/a"), ("find-links", "/b"), ("cache-dir", "/c x")}
    assert _pips_locations(str(path)) == expected
    assert expected <= set(ts.path_settings(path.read_bytes().decode()))
