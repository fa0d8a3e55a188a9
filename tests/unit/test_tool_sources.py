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
