"""What decides how a later command runs, for the tools no-docker is used with (DESIGN §7, P4).

Git's discovery, shell start-up files and virtual environments are in ``later_code``; this
module names the rest, each from the tool's own documentation or source, so that the walk
(``later_code.survey``) fingerprints them before a run and again after it:

- **pytest** reads the first of ``pytest.ini``, ``.pytest.ini``, ``pyproject.toml`` (with
  ``[tool.pytest.ini_options]``), ``tox.ini`` (``[pytest]``), ``setup.cfg`` (``[tool:pytest]``)
  in the directory of its arguments and each of its ancestors (pytest docs, "Configuration:
  Finding the rootdir"; ``_pytest/config/findpaths.py``, ``locate_config``). Any of them can
  turn the isolation off for the next session: ``addopts = -p no:no_docker``,
  ``no_docker = false``, a ``required_plugins`` removed. So every one of these files in every
  directory of a writable root is a source, and a pytest started from a subdirectory is
  covered too. ``conftest.py`` is not: it is the project's own test code, imported only after
  the plugin has put the session inside a run.
- **no-docker** itself reads ``[tool.no-docker]`` from the ``pyproject.toml`` of the
  directory it is started in: the same files.
- **Python's import path**: ``python -m MOD`` puts the current directory first on
  ``sys.path`` (Python docs, "The initialization of the sys.path module search path"), so a
  ``pytest.py`` (or ``pytest/__init__.py``, ``pytest.pyc``, an extension module) left in the
  work dir runs, outside, before any plugin can. A module there counts when its name is one
  Python finds elsewhere too (the standard library, the environments that run no-docker and
  the project, ``KNOWN_TOOL_MODULES``): only such a name is imported by a tool's start-up. The project's own
  modules, mutated in place by mutation tools, are not sources.
- **pip** reads ``pip.conf`` in a virtual environment's root (``sys.prefix``; pip docs,
  "Configuration: Location"), and installs from its caches: a whole venv is read-only inside
  a run, and a code cache may not be writable (``CODE_CACHES``).
- **the stanza line** (``no-docker stanza``) at the top of a bash suite: a run that deletes
  it makes the next ``bash t.sh`` run outside. Every shell script that carries it is a source.
"""

from __future__ import annotations

import os
import sys

#: pytest's config files, in the order ``locate_config`` tries them in each directory.
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

#: In a virtual environment's root, beside pyvenv.cfg: pip's site configuration.
VENV_CONFIGS = ("pip.conf",)

#: Shell scripts read for the stanza line (its tag must be in the first STANZA_HEAD bytes:
#: the guard accepts it only as the first command, after a shebang and comments).
STANZA_SUFFIXES = (".sh", ".bash", ".bats")
STANZA_HEAD = 8192
STANZA_TAG = b"# no-docker: re-exec stanza v"

#: Caches whose content a tool installs or runs later, outside, relative to $HOME (each tool's
#: documented default): a run that may write one can plant a wheel or a package that the next
#: install outside takes without a word (pip's wheel cache: measured, a planted wheel's .pth ran).
CODE_CACHES = {
    ".cache/pip": "pip", ".cache/uv": "uv", ".cache/pypoetry": "poetry", ".cache/pdm": "pdm",
    ".cache/pre-commit": "pre-commit", ".cache/go-build": "go", "go": "go (GOPATH, module cache)",
    ".cache/yarn": "yarn", ".yarn": "yarn", ".npm": "npm", ".pnpm-store": "pnpm",
    ".local/share/pnpm": "pnpm", ".cargo": "cargo", ".rustup": "rustup", ".m2": "maven",
    ".gradle": "gradle", ".ivy2": "ivy", ".sbt": "sbt", ".nuget": "nuget", ".bun": "bun",
    ".cache/deno": "deno", ".conda": "conda", ".cache/ccache": "ccache", ".ccache": "ccache",
    ".cache/bazel": "bazel", ".local/share/virtualenv": "virtualenv (seed wheels)",
    ".local/pipx": "pipx", ".local/share/pipx": "pipx", ".cache/pipx": "pipx",
}
#: The same caches where a variable moves them.
CACHE_VARIABLES = {"PIP_CACHE_DIR": "pip", "UV_CACHE_DIR": "uv", "POETRY_CACHE_DIR": "poetry",
                   "GOMODCACHE": "go", "GOCACHE": "go", "GOPATH": "go", "CARGO_HOME": "cargo",
                   "RUSTUP_HOME": "rustup", "npm_config_cache": "npm", "YARN_CACHE_FOLDER": "yarn",
                   "PRE_COMMIT_HOME": "pre-commit", "CCACHE_DIR": "ccache",
                   "PIPX_HOME": "pipx", "GRADLE_USER_HOME": "gradle"}

_MODULE_SUFFIXES = (".py", ".pyc", ".pyw")

#: Modules the tools of a test or mutation session import at their start-up, named whether or
#: not the Python that runs no-docker has them: no-docker installed with pipx, or run by the
#: system's python3, does not see the project's venv, whose `python -m pytest` imports these.
KNOWN_TOOL_MODULES = frozenset({
    "pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "tomli", "exceptiongroup",
    "colorama", "pygments", "pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel",
    "mutmut", "cosmic_ray", "hypothesis", "_hypothesis_pytestplugin", "coverage", "pytest_cov",
    "xdist", "pytest_xdist", "tox", "nox", "virtualenv", "pipx", "poetry", "hatch", "hatchling",
    "pdm", "flit", "flit_core", "build", "twine", "no_docker", "docker", "ruff", "black", "mypy",
    "pylint", "flake8", "isort", "pre_commit", "sitecustomize", "usercustomize", "typing_extensions",
})


def module_name(filename: str) -> str | None:
    """The module NAME a file in a ``sys.path`` directory is imported as, or None (pure):
    ``x.py``, ``x.pyc`` (sourceless), ``x.so`` / ``x.cpython-311-x86_64-linux-gnu.so`` /
    ``x.abi3.so`` (extension modules, importlib.machinery.EXTENSION_SUFFIXES)."""
    for suffix in _MODULE_SUFFIXES:
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            return stem if stem.isidentifier() else None
    if filename.endswith(".so"):
        stem = filename.split(".", 1)[0]
        return stem if stem.isidentifier() else None
    return None


def has_stanza(head: bytes) -> bool:
    """Does this start of a shell script carry the stanza line (pure)?"""
    return STANZA_TAG in head[:STANZA_HEAD]


def is_stanza_candidate(filename: str) -> bool:
    return filename.endswith(STANZA_SUFFIXES)


def shadows(name: str, search_path: list[str]) -> bool:
    """Would a module NAME in the work dir hide one Python finds elsewhere (the standard
    library, or SEARCH_PATH: site-packages of the environments involved)? Only such a name is
    imported by a tool's own start-up, before any plugin of ours runs."""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names or name in KNOWN_TOOL_MODULES:
        return True
    from importlib.machinery import PathFinder

    try:
        return PathFinder.find_spec(name, search_path) is not None
    except (ImportError, ValueError, OSError):
        return True  # cannot tell: fail closed


def cache_refusal(path: str, home: str, environ: dict[str, str]) -> str | None:
    """Why the resolved PATH must not be writable inside a run: it is, holds, or is inside a
    cache whose content runs later, outside; or None (pure but for ``environ``)."""
    caches: dict[str, str] = {}
    if home and home != "/":
        for rel, tool in CODE_CACHES.items():
            caches[os.path.join(home, rel)] = tool
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        for rel, tool in CODE_CACHES.items():
            if rel.startswith(".cache/"):
                caches[os.path.join(xdg, rel[len(".cache/"):])] = tool
    for variable, tool in CACHE_VARIABLES.items():
        value = environ.get(variable, "")
        if value.startswith("/"):
            caches[os.path.normpath(value)] = tool
    for cache, tool in caches.items():
        inside = path == cache or path.startswith(cache.rstrip("/") + "/")
        holds = cache.startswith(path.rstrip("/") + "/")
        if inside or holds:
            where = cache.replace(home, "~", 1) if home and cache.startswith(home + "/") else cache
            return (f"{'it holds ' if holds and not inside else ''}{where}, {tool}'s cache, whose content "
                    f"{tool.split(' ')[0]} installs and runs later, outside; give it as --ro {where} (read, "
                    "never written), or let the run use its own throwaway cache (the default)")
    return None
