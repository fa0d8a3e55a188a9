"""What decides how a later command runs (supervisor/isolation/tool_sources.py): pure parts."""

from __future__ import annotations

import os
import sys

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


def test_shadows_the_standard_library_and_installed_modules(tmp_path):
    assert ts.shadows("json", [])
    assert ts.shadows("sys", [])  # built in
    (tmp_path / "somepkg").mkdir()
    (tmp_path / "somepkg" / "__init__.py").write_text("")
    assert ts.shadows("somepkg", [str(tmp_path)])
    assert not ts.shadows("no_such_module_t25", [str(tmp_path)])
    # Named even when the Python running no-docker (pipx, the system's) does not have them.
    assert ts.shadows("pytest", []) and ts.shadows("pluggy", []) and ts.shadows("pip", [])
    assert "pytest" in sys.modules and ts.shadows("pytest", sys.path[1:])


def test_the_stanza_tag_is_found_only_near_the_top():
    assert ts.has_stanza(b"#!/bin/bash\nno-docker check ... # no-docker: re-exec stanza v2\n")
    assert not ts.has_stanza(b"#!/bin/bash\necho hi\n")
    assert not ts.has_stanza(b"x" * ts.STANZA_HEAD + b"# no-docker: re-exec stanza v2")


@pytest.mark.parametrize("rel", [".cache/pip", ".cache/pip/wheels", ".cache", ".npm", ".cargo/registry",
                                 "go", ".local/share/virtualenv"])
def test_a_code_cache_is_refused_inside_and_around(rel):
    why = ts.cache_refusal(f"/home/u/{rel}", "/home/u", {})
    assert why is not None and "--ro ~/" in why and "runs later" in why, why


@pytest.mark.parametrize("path", ["/home/u/data", "/home/u/.cache/matplotlib", "/srv/cache", "/home/u/gopher"])
def test_other_directories_are_not_caches(path):
    assert ts.cache_refusal(path, "/home/u", {}) is None


def test_caches_moved_by_variables_are_refused_too():
    env = {"PIP_CACHE_DIR": "/data/pipcache", "XDG_CACHE_HOME": "/xdg", "GOPATH": "relative/ignored"}
    assert "pip's cache" in ts.cache_refusal("/data/pipcache", "/home/u", env)
    assert "uv's cache" in ts.cache_refusal("/xdg/uv", "/home/u", env)
    assert ts.cache_refusal("/data/other", "/home/u", env) is None


def test_the_pytest_config_names_are_pytests_own():
    # _pytest/config/findpaths.py locate_config: the same names, in the same order.
    import _pytest.config.findpaths as findpaths

    source = open(findpaths.__file__).read()
    positions = [source.find(f'"{name}"') for name in ts.PYTEST_CONFIGS]
    assert all(p > 0 for p in positions), dict(zip(ts.PYTEST_CONFIGS, positions, strict=True))
    assert os.path.basename(findpaths.__file__) == "findpaths.py"
