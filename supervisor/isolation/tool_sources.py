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
  a run, and a code cache may not be writable (``CODE_CACHES``). What pip's and uv's own
  configuration names (``configured_caches``: caches, find-links, local indexes, constraints
  files and what their lines name) is read as the tools read it (``path_settings``, compared
  with pip's own parser in tests/unit/test_tool_sources.py) and may not be writable either; a
  configuration no-docker cannot read so is "cannot tell": refused (T-80).
- **the stanza line** (``no-docker stanza``) at the top of a bash suite: a run that deletes
  it makes the next ``bash t.sh`` run outside. Every shell script that carries it is a source.
"""

from __future__ import annotations

import os
import sys

#: pytest's config files, in the order ``locate_config`` tries them in each directory.
PYTEST_CONFIGS = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
                  "setup.cfg")
#: Files that choose the interpreter the next `python` runs (pyenv's shims, asdf, mise read
#: them in the current directory and each parent): a Python without the plugin makes the next
#: `python -m pytest --no-docker` import the conftest.py outside (measured).
VERSION_FILES = (".python-version", ".tool-versions")
#: What mutmut copies into mutants/ (see later_code._is_config_copy).
MUTMUT_COPIES = ("pyproject.toml", "setup.cfg")
#: Distribution metadata importlib.metadata finds in a sys.path directory: entry points load
#: plugins (pytest's ``pytest11``), so their files are sources where Python imports from.
DIST_SUFFIXES = (".dist-info", ".egg-info")
DIST_FILES = ("entry_points.txt", "METADATA", "PKG-INFO", "top_level.txt")

#: In a virtual environment's root, beside pyvenv.cfg: pip's site configuration.
VENV_CONFIGS = ("pip.conf",)

#: Shell scripts read for the stanza line (its tag must be in the first STANZA_HEAD bytes:
#: the guard accepts it only as the first command, after a shebang and comments).
STANZA_SUFFIXES = (".sh", ".bash", ".bats", ".ksh", ".test", ".t")
STANZA_MARKS = (".sh.", ".bash.", ".bats.")  # t.sh.in, run.bash.tmpl
STANZA_HEAD = 1 << 16  # a licence header of comments may come before it
#: Tools' caches, where no one keeps a script to run (and .hypothesis keeps thousands of files
#: without a suffix): not read for the stanza line.
STANZA_SKIP_DIRS = frozenset({".hypothesis", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                              "node_modules", ".cache", ".eggs"})
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
    ".cache/pipenv": "pipenv", ".cache/hatch": "hatch", ".local/share/hatch": "hatch",
    ".cache/pip-tools": "pip-tools", ".cache/nox": "nox",
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


#: Names tried at a tool's start-up although nothing provides them (optional imports): a
#: package of that name in the current directory would be imported. ``org``: pickle tries
#: ``org.python.core`` (Jython). Measured with a recording meta-path finder over
#: ``python -m pytest --co`` (tests/unit/test_tool_sources.py keeps the list current).
OPTIONAL_IMPORTS = frozenset({"org"})

_NAMED: set[str] = set()


def _named() -> set[str]:
    """The standard library's names, the tools', and every top-level name installed in the
    environment that runs no-docker (its site-packages: pytest's plugins import them at the
    start, platformdirs, _hypothesis_globals...), listed once."""
    if not _NAMED:
        _NAMED.update(sys.stdlib_module_names, sys.builtin_module_names, KNOWN_TOOL_MODULES,
                      OPTIONAL_IMPORTS)
        for entry in sys.path:
            if not entry.endswith(("site-packages", "dist-packages")):
                continue
            try:
                names = os.listdir(entry)
            except OSError:
                continue
            for name in names:
                if name.endswith(DIST_SUFFIXES) or name.startswith("__editable__"):
                    continue
                module = module_name(name) if "." in name else name
                if module:
                    _NAMED.add(module)
    return _NAMED


def named_module(filename: str) -> bool:
    """Is FILENAME (a file or a directory name) a module or package with a name that a tool's
    start-up imports wherever it is found?"""
    name = module_name(filename) if "." in filename else filename
    return name is not None and name in _named()


def has_stanza(head: bytes) -> bool:
    """Does this start of a shell script carry the stanza line (pure)?"""
    return STANZA_TAG in head[:STANZA_HEAD]


def is_stanza_candidate(filename: str) -> bool:
    """Could FILENAME be a shell script a user starts with ``bash FILE`` (pure)? A name
    without a suffix (``tests/run-e2e``), or one that says shell."""
    return ("." not in filename.lstrip(".") or filename.endswith(STANZA_SUFFIXES)
            or any(mark in filename for mark in STANZA_MARKS))


# Where pip and uv read a `cache-dir` of their own (pip docs "Configuration: Location"; uv docs
# "Configuration files"): a cache moved there is the same code cache.
PIP_CONFIGS = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", "~/.config/pip/pip.conf", "~/.pip/pip.conf")
UV_CONFIGS = ("/etc/uv/uv.toml", "~/.config/uv/uv.toml")


#: pip's options whose values name what the next ``pip install`` outside installs or runs (pip
#: 26.3 ``cli/cmdoptions.py``, every long name of each: pip looks a config key up as ``"--" +
#: key``; tests/unit/test_tool_sources.py compares this table with pip's own parser): its
#: caches, the local directories and indexes it installs from (a planted wheel there is installed
#: by the next ``pip install`` outside, measured), the files whose lines add more of them
#: (``-c``/``-r`` files: ``--find-links``, ``-e``, a local path), the interpreter it re-runs
#: itself with. Values are (what it is, split on whitespace: pip's ``append`` options).
PIP_PATH_OPTIONS: dict[str, tuple[str, bool]] = {
    "cache-dir": ("cache", False), "find-links": ("find-links directory", True),
    "index-url": ("local index", False), "pypi-url": ("local index", False),
    "extra-index-url": ("local index", True), "constraint": ("constraints file", True),
    "build-constraint": ("constraints file", True), "requirement": ("requirements file", True),
    "requirements-from-script": ("requirements script", True), "editable": ("editable project", True),
    "src": ("source directory", False), "source": ("source directory", False),
    "source-dir": ("source directory", False), "source-directory": ("source directory", False),
    "python": ("interpreter", False),
}
#: uv's settings (uv.toml keys, uv docs "Settings"; ``url`` of an ``[[index]]`` table) and
#: variables (uv docs "Environment variables": lists split on whitespace, UV_FIND_LINKS on commas).
UV_PATH_SETTINGS = {"cache-dir": "cache", "find-links": "find-links directory", "index-url": "local index",
                    "extra-index-url": "local index", "url": "local index",
                    "python-install-dir": "managed Pythons", "tool-dir": "tools"}
UV_VARIABLES = {"UV_FIND_LINKS": "find-links directory", "UV_INDEX": "local index",
                "UV_DEFAULT_INDEX": "local index", "UV_INDEX_URL": "local index",
                "UV_EXTRA_INDEX_URL": "local index", "UV_CONSTRAINT": "constraints file",
                "UV_BUILD_CONSTRAINT": "constraints file", "UV_OVERRIDE": "constraints file",
                "UV_PYTHON_INSTALL_DIR": "managed Pythons", "UV_TOOL_DIR": "tools"}
#: Kept for callers that ask which settings name a directory (pip's names).
PATH_SETTINGS = {name: what for name, (what, _) in PIP_PATH_OPTIONS.items()}
#: A config or requirements file larger than this is not read: "cannot tell" (pip has no limit).
CONFIG_LIMIT = 1 << 22
#: pip reads ``-r``/``-c`` files named in ``-r``/``-c`` files: how many no-docker follows.
REQUIREMENT_FILES_LIMIT = 64
#: Options of a requirements file line whose value names a file or a directory (pip's
#: ``req/req_file.py`` SUPPORTED_OPTIONS): what the value is.
_REQ_FILE_OPTIONS = {"-r": "requirements file", "--requirement": "requirements file",
                     "-c": "constraints file", "--constraint": "constraints file",
                     "-e": "editable project", "--editable": "editable project",
                     "-f": "find-links directory", "--find-links": "find-links directory",
                     "-i": "local index", "--index-url": "local index", "--extra-index-url": "local index"}


class CannotTell(Exception):
    """A pip or uv configuration no-docker cannot read as the tool reads it."""


def pip_key(name: str) -> str:
    """A config key or a PIP_ variable's name as pip normalises it (pip ``configuration.py``
    ``_normalize_name``: lower case, ``_`` as ``-``, one leading ``--`` dropped) (pure)."""
    name = name.lower().replace("_", "-")
    return name[2:] if name.startswith("--") else name


def local_location(word: str) -> str | None:
    """The local path a find-links/index/requirement word names, as pip takes it (pure):
    a ``file:`` URL in any spelling pip accepts (``file:/P``, ``file:///P``,
    ``file://localhost/P``, ``%``-escapes: ``utils/urls.py`` ``url_to_path``; any case of the
    scheme and a VCS ``git+file:``, which requests and pip's VCS support also serve), a plain
    path (maybe relative or ``~``); None for a remote URL."""
    scheme, colon, rest = word.partition(":")
    if colon and len(scheme) > 1 and scheme[0].isalpha() and all(c.isalnum() or c in "+-." for c in scheme):
        if not scheme.lower().endswith("file"):
            return None  # http(s), ftp, a VCS over the network: nothing of this machine's
        if rest.startswith("//"):
            # any host: pip refuses a non-local one on Linux, no-docker takes its path anyway
            slash = rest.find("/", 2)
            rest = rest[slash:] if slash >= 0 else "/"
        rest = rest.split("#", 1)[0].split("?", 1)[0]
        if "%" in rest:
            from urllib.parse import unquote

            rest = unquote(rest)
        return rest or None
    return word or None


#: pip's options of ``type="path"``: the value is a path as written (``~`` expanded), never a URL.
_PATH_TYPED = frozenset({"cache-dir", "src", "source", "source-dir", "source-directory", "python"})


def _words(value: object, split: bool, literal: bool = False) -> list[str]:
    values = value if isinstance(value, list) else [value]
    words: list[str] = []
    for item in values:
        text = str(item)
        for word in (text.split() if split else [text.strip()]):
            for form in dict.fromkeys((word, word.strip("'\""))):  # pip keeps quotes: both
                where = form if literal else local_location(form)
                if where:
                    words.append(where)
    return words


def _setting_words(value: object) -> list[str]:
    return _words(value, True)


def _toml_settings(doc: object, found: list[tuple[str, str]]) -> None:
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        name = str(key).replace("_", "-")
        if isinstance(value, dict | list) and not (name in UV_PATH_SETTINGS and isinstance(value, list)
                                                   and all(isinstance(v, str) for v in value)):
            _toml_settings(value, found)  # [pip], [[index]], [tool.uv]: every table, at any depth
        elif isinstance(key, str) and name in UV_PATH_SETTINGS:
            found += [(name, w) for w in _words(value, False)]  # TOML strings: never split


def path_settings(text: str, toml: bool = False) -> list[tuple[str, str]]:
    """(setting, location) for each value of a pip.conf (ini, read as pip reads it: line ends
    as ``open()`` takes them, keys normalised by ``pip_key``, configparser's rules, so ``:`` and
    continuation lines too, ``append`` options split on whitespace) or a uv.toml (TOML, every
    table: ``[pip]``, ``[[index]]``) that names something pip or uv installs from; a location
    is a path (absolute, relative or ``~``), never a remote URL. A file pip or uv cannot parse
    gives nothing: the tool refuses to start with it (pure)."""
    found: list[tuple[str, str]] = []
    if toml:
        import tomllib

        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return found
        _toml_settings(doc, found)
        return found
    # configparser.read() opens the file in text mode: "\r\n" and a lone "\r" end lines too
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    sections = plain_ini(text)
    if sections is None:  # anything plain_ini does not read exactly as configparser: configparser
        import configparser

        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            return found
        sections = [parser.items(section) for section in parser.sections()]
    for items in sections:
        for key, value in items:
            name = pip_key(key)
            if name in PIP_PATH_OPTIONS:
                found += [(name, w) for w in _words(value, PIP_PATH_OPTIONS[name][1], name in _PATH_TYPED)]
    return found


def plain_ini(text: str) -> list[list[tuple[str, str]]] | None:
    """Each section's (key, value) items of a pip.conf made only of plain lines, exactly as
    ``configparser.RawConfigParser(strict=False, interpolation=None)`` reads them (Lib/configparser.py
    ``_read``: full-line ``#``/``;`` comments, ``[header]``, ``key = value`` or ``key: value`` split
    at the first ``=`` or ``:``, keys lower-cased, a later key or section wins/merges); None for
    anything else (an indented line, a line before any header, a ``DEFAULT`` section, a line
    without a delimiter, a character outside printable ASCII), which configparser then reads
    (pure). Why: importing configparser (re, enum, collections) is ~4 ms of CPU in every run
    whose machine has a pip.conf; tests/unit/test_tool_sources.py compares both on generated text."""
    if not text.isascii() or not text.replace("\t", "").replace("\n", "").replace("\r", "").isprintable():
        return None
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.split("\n"):  # as io.StringIO splits it: at "\n" only
        value = line.strip()
        if not value or value.startswith(("#", ";")):
            continue
        if line[0].isspace():
            return None  # a continuation line, or an indented header or key
        if value.startswith("["):
            if len(value) < 3 or not value.endswith("]") or value == "[DEFAULT]":
                return None
            current = sections.setdefault(value[1:-1], {})
            continue
        cut = min((i for i in (value.find("="), value.find(":")) if i >= 0), default=-1)
        if current is None or cut <= 0:
            return None
        current[value[:cut].rstrip().lower()] = value[cut + 1:].strip()
    return [list(items.items()) for items in sections.values()]


def url_named(name: str) -> bool:
    """Is NAME (a directory entry) the first part of a URL taken as a relative path (pure)?
    pip's ``build_source`` tries ``os.path.exists(location)`` before it treats a location as a
    URL, so ``https://pypi.org/simple/PKG/`` (its default index) is the relative path
    ``https:/pypi.org/simple/PKG/`` under pip's current directory: a run that makes
    ``W/https:/pypi.org/simple/PKG/index.html`` there has the next ``pip install PKG`` started in
    W install its wheel (measured, pip 26.3: the planted ``.pth`` ran)."""
    scheme = name[:-1]
    return (name.endswith(":") and len(scheme) > 1 and scheme[0].isalpha()
            and all(c.isalnum() or c in "+-." for c in scheme))


def requirement_references(text: str, environ: dict[str, str]) -> list[tuple[str, str]]:
    """(what, location) for each file or directory a requirements or constraints file's lines
    name, as pip's ``req/req_file.py`` reads them (``\\`` continuations, `` #`` comments,
    ``${VAR}`` expanded from ENVIRON): ``-r``/``-c`` files, ``-e`` projects, ``-f``/``-i``
    locations (``--opt=V`` and ``-fV`` too), and every other word that is a local path or a
    ``file:`` URL (``./pkg``, ``name @ file:///P``: pip installs it); remote URLs are dropped
    (pure)."""
    found: list[tuple[str, str]] = []
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\\\n", " ")
    if "${" in text:
        for name, value in environ.items():
            text = text.replace("${" + name + "}", value)
    for line in text.split("\n"):
        words = line.split()
        words = words[:next((i for i, w in enumerate(words) if w.startswith("#")), len(words))]
        what = ""
        for word in words:
            if what:
                found += [(what, w) for w in _words(word, False)]
                what = ""
                continue
            option, equals, value = word.partition("=")
            if word in _REQ_FILE_OPTIONS:
                what = _REQ_FILE_OPTIONS[word]
            elif equals and option in _REQ_FILE_OPTIONS and option.startswith("--"):
                found += [(_REQ_FILE_OPTIONS[option], w) for w in _words(value, False)]
            elif word[:2] in _REQ_FILE_OPTIONS and not word.startswith("--"):
                found += [(_REQ_FILE_OPTIONS[word[:2]], w) for w in _words(word[2:], False)]
            elif "/" in word or word.startswith((".", "~")):
                found += [("requirement", w) for w in _words(word, False)]
    return found


def read_config(path: str, strict: bool = True) -> bytes | None:
    """PATH's bytes as pip and uv read it: through symlinks (a stow-style ``pip.conf``, a linked
    directory: resolved first, then opened through no link, non-blocking, checked regular, so a
    link a run left to a FIFO or a device is never opened), all of it; None where the tool reads
    nothing either (absent, unreadable, a directory: configparser skips what it cannot open).
    Raises CannotTell for a file larger than CONFIG_LIMIT, and (STRICT) for one that is not
    regular: the tool would block on a FIFO or read a device. Not STRICT: a venv's own
    ``pip.conf``, read-only inside every run (a link there to a FIFO blocks pip: nothing read)."""
    import errno
    import stat

    from .later_code import read_regular

    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    if not stat.S_ISREG(mode):
        if strict:
            raise CannotTell(f"{path} is not a regular file")
        return None
    try:
        data = read_regular(real, CONFIG_LIMIT + 1)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.ENOENT):
            return None  # the tool cannot read it either
        raise CannotTell(f"{path}: {error.strerror or error}") from None
    if len(data) > CONFIG_LIMIT:
        raise CannotTell(f"{path} is over {CONFIG_LIMIT >> 20} MiB")
    return data


_CONFIGURED: dict[tuple, dict[str, str]] = {}
_READ_FILES = ("constraints file", "requirements file")
_CONFIG_PREFIXES = ("PIP_", "UV_", "XDG_CONFIG_")


def configured_caches(home: str, environ: dict[str, str],
                      prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """{location: what it is} for what pip's and uv's config files (global, user, XDG, each
    venv's own: PREFIXES, PIP_CONFIG_FILE's) and variables (every ``PIP_*`` pip reads, uv's)
    name: caches, find-links directories, local indexes, the constraints and requirements files
    named there and what their lines name, and the config files themselves that a variable
    names or that exist outside a venv. The key ``""`` says no-docker cannot tell (why). Read
    once per process for the same inputs: ``cache_refusal`` asks for every writable root."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    key = (home, prefixes, cwd, *sorted((k, v) for k, v in environ.items()
                                        if k.startswith(_CONFIG_PREFIXES) or k == "VIRTUAL_ENV"))
    if key not in _CONFIGURED:
        try:
            _CONFIGURED[key] = _configured_caches(home, environ, prefixes, cwd)
        except CannotTell as why:
            _CONFIGURED[key] = {"": str(why)}
    return _CONFIGURED[key]


def _configured_caches(home: str, environ: dict[str, str], prefixes: tuple[str, ...],
                       cwd: str) -> dict[str, str]:
    def absolute(where: str, *bases: str) -> list[str]:
        if where == "~" or where.startswith("~/"):
            if not home or home == "/":
                return []
            where = home + where[1:]
        elif where.startswith("~"):
            where = os.path.expanduser(where)  # ~user/...
        if where.startswith("/"):
            return [where]
        return [os.path.join(base, where) for base in (bases or (cwd,))]

    files: list[tuple[str, str, bool]] = [(p, "pip", True) for p in PIP_CONFIGS]
    files += [(p, "uv", True) for p in UV_CONFIGS]
    xdg_home = environ.get("XDG_CONFIG_HOME", "")
    if xdg_home.startswith("/"):
        files += [(f"{xdg_home}/pip/pip.conf", "pip", True), (f"{xdg_home}/uv/uv.toml", "uv", True)]
    for xdg in environ.get("XDG_CONFIG_DIRS", "").split(":"):
        if xdg.startswith("/"):
            files += [(f"{xdg}/pip/pip.conf", "pip", True), (f"{xdg}/uv/uv.toml", "uv", True)]
    for prefix in (*prefixes, environ.get("VIRTUAL_ENV", ""), sys.prefix):
        if prefix.startswith("/"):  # a venv of a writable root is read-only as a whole already
            files.append((os.path.join(prefix, "pip.conf"), "pip", False))
    found: dict[str, str] = {}
    settings: list[tuple[str, str, list[str]]] = []  # (tool, what, absolute locations)
    for variable, tool in (("PIP_CONFIG_FILE", "pip"), ("UV_CONFIG_FILE", "uv")):
        named = environ.get(variable, "")
        if named and named != os.devnull:
            for path in absolute(named):
                files.append((path, tool, True))
                settings.append((tool, "config file", [path]))  # read at the tool's start-up
    for path, tool, own in dict.fromkeys(files):
        if path.startswith("~/"):
            if not home or home == "/":
                continue
            path = os.path.join(home, path[2:])
        data = read_config(path, strict=own)
        if data is None:
            continue
        if own:
            settings.append((tool, "config file", [path]))
        text = data.decode("utf-8", "surrogateescape")
        for name, value in path_settings(text, toml=tool == "uv"):
            what = PATH_SETTINGS.get(name) or UV_PATH_SETTINGS[name]
            settings.append((tool, what, absolute(value)))
    for variable, value in environ.items():
        if variable.startswith("PIP_"):  # pip's get_environ_vars: every PIP_ variable is an option
            name = pip_key(variable[4:])
            if name in PIP_PATH_OPTIONS:
                what, split = PIP_PATH_OPTIONS[name]
                settings += [("pip", what, absolute(w)) for w in _words(value, split, name in _PATH_TYPED)]
        elif variable in UV_VARIABLES:
            words = value.replace(",", " ").split()
            # UV_INDEX, UV_DEFAULT_INDEX: [NAME=]URL (a name has no ":" or "/")
            words = [w.split("=", 1)[1] if "=" in w.split(":", 1)[0].split("/", 1)[0] else w for w in words]
            settings += [("uv", UV_VARIABLES[variable], absolute(w)) for w in _words(words, False)]
    requirement_files = 0
    while settings:
        tool, what, locations = settings.pop()
        for location in locations:
            for form in dict.fromkeys((os.path.normpath(location), os.path.realpath(location))):
                if form in found:
                    continue
                found[form] = f"{tool} ({what})"
                if what not in _READ_FILES or form != os.path.realpath(location):
                    continue
                requirement_files += 1
                if requirement_files > REQUIREMENT_FILES_LIMIT:
                    raise CannotTell(f"over {REQUIREMENT_FILES_LIMIT} requirements files: {location}")
                data = read_config(form)
                if data is None:
                    continue
                base = os.path.dirname(form)
                for kind, value in requirement_references(data.decode("utf-8", "surrogateescape"), environ):
                    # relative: to the file's directory (-r, -c, -f when it exists there), else the cwd
                    settings.append((tool, kind, absolute(value, base, cwd)))
    return found


#: Variables of the caller's environment that name code or a config the *next* command outside
#: reads (it inherits the same environment), each from the tool's own docs: name -> (kind, what).
#: KIND: "file" (the named file; a root holding it could create or rewrite it), "dir" (a
#: directory: a root that is, holds or lies inside it), "dirs" (a ``:`` list of directories),
#: "files" (a list of files, ``:`` or blank separated), "program" (a command line: its first
#: word when absolute). Found by the red-team review: ``--rw`` of a ``PYTHONUSERBASE`` (its
#: site-packages' .pth ran at the next ``python3``), of ``GIT_CONFIG_GLOBAL``'s and
#: ``BASH_ENV``'s directory, of a ``PYTHONPYCACHEPREFIX`` (a forged stdlib .pyc ran).
STARTUP_VARIABLES: dict[str, tuple[str, str]] = {
    # python(1) "Environment variables"; site.py (the user site's .pth files run at start-up)
    "PYTHONUSERBASE": ("dir", "Python's user site (its .pth files run at every start)"),
    "PYTHONPYCACHEPREFIX": ("dir", "Python's bytecode cache (its .pyc files run as the modules)"),
    "PYTHONSTARTUP": ("file", "Python's interactive start-up file"),
    "PYTHONHOME": ("dir", "Python's standard library"),
    # git-config(1) "ENVIRONMENT", "Configuration from environment"; git(1) "ENVIRONMENT VARIABLES"
    "GIT_CONFIG_GLOBAL": ("file", "git's global config"),
    "GIT_CONFIG_SYSTEM": ("file", "git's system config"),
    "GIT_CONFIG": ("file", "git config's file"),
    "GIT_EXEC_PATH": ("dir", "git's own commands"),
    "GIT_TEMPLATE_DIR": ("dir", "git's templates (hooks copied by git init and clone)"),
    "GIT_SSH": ("program", "git's ssh"), "GIT_SSH_COMMAND": ("program", "git's ssh"),
    "GIT_ASKPASS": ("program", "git's askpass"), "SSH_ASKPASS": ("program", "ssh's askpass"),
    "GIT_EDITOR": ("program", "git's editor"), "GIT_SEQUENCE_EDITOR": ("program", "git's editor"),
    "GIT_PAGER": ("program", "git's pager"), "GIT_EXTERNAL_DIFF": ("program", "git's diff"),
    "EDITOR": ("program", "the editor"), "VISUAL": ("program", "the editor"),
    "PAGER": ("program", "the pager"), "SHELL": ("program", "the shell"),
    # bash(1) "INVOCATION" (BASH_ENV: every non-interactive bash; ENV: sh, bash --posix);
    # zsh(1) "STARTUP/SHUTDOWN FILES" (ZDOTDIR holds .zshenv, read by every zsh)
    "BASH_ENV": ("file", "bash's start-up file"), "ENV": ("file", "sh's start-up file"),
    "ZDOTDIR": ("dir", "zsh's start-up files"),
    # XDG Base Directory Specification: git's config, fish, systemd user units, autostart...
    "XDG_CONFIG_HOME": ("dir", "the user's configs (git's, fish's, systemd's, pip's...)"),
    "XDG_CONFIG_DIRS": ("dirs", "the system's configs (autostart, pip's...)"),
    "XDG_DATA_HOME": ("dir", "the user's data (pipx, virtualenv's seed wheels, pnpm...)"),
    "XDG_DATA_DIRS": ("dirs", "the system's data"),
    # pip's and uv's own config files (pip docs "Configuration"; uv docs "Configuration files")
    "PIP_CONFIG_FILE": ("file", "pip's config"), "UV_CONFIG_FILE": ("file", "uv's config"),
    # npm-config(7): userconfig/globalconfig (node-options, script-shell), prefix (global bin)
    "NPM_CONFIG_USERCONFIG": ("file", "npm's config"), "npm_config_userconfig": ("file", "npm's config"),
    "NPM_CONFIG_GLOBALCONFIG": ("file", "npm's config"), "npm_config_globalconfig": ("file", "npm's config"),
    "NPM_CONFIG_PREFIX": ("dir", "npm's global packages"),
    "npm_config_prefix": ("dir", "npm's global packages"),
    # ld.so(8): loaded into every dynamically linked program
    "LD_PRELOAD": ("files", "the dynamic loader's preloaded libraries"),
    # lefthook.dev "LEFTHOOK_CONFIG": the main config, read at every hook
    "LEFTHOOK_CONFIG": ("file", "lefthook's config"),
    # curl(1) --config's default place; wget(1) "Startup File"
    "CURL_HOME": ("dir", "curl's .curlrc"), "WGETRC": ("file", "wget's start-up file"),
}
#: git's configuration from the environment (git-config(1) "GIT_CONFIG_COUNT"): a value that
#: is an absolute path (``include.path``, ``core.hooksPath``, ``core.fsmonitor``) is code too.
GIT_CONFIG_COUNT_LIMIT = 1000


def startup_paths(home: str, environ: dict[str, str]) -> list[tuple[str, str, bool, str]]:
    """(variable, path, is a directory, what it is) for every absolute path ENVIRON's start-up
    variables (``STARTUP_VARIABLES``, ``GIT_CONFIG_VALUE_<n>``) name; ``~/`` is HOME's (pure)."""
    named: list[tuple[str, str, str, str]] = []
    for variable, (kind, what) in STARTUP_VARIABLES.items():
        value = environ.get(variable, "")
        if not value:
            continue
        if kind == "program":
            words = value.split()[:1]
        elif kind in ("dirs", "files"):
            words = value.replace(" ", ":").split(":") if kind == "files" else value.split(":")
        else:
            words = [value]
        named += [(variable, w, kind, what) for w in words]
    try:
        count = min(int(environ.get("GIT_CONFIG_COUNT", "0") or "0"), GIT_CONFIG_COUNT_LIMIT)
    except ValueError:
        count = 0  # git refuses it too ("bogus count in GIT_CONFIG_COUNT")
    for i in range(max(count, 0)):
        key = environ.get(f"GIT_CONFIG_KEY_{i}", "")
        value = environ.get(f"GIT_CONFIG_VALUE_{i}", "").strip().strip("'\"")
        named += [(f"GIT_CONFIG_VALUE_{i}", w, "dir", f"git's {key or 'config'}") for w in value.split()[:1]]
    # GIT_CONFIG_PARAMETERS: what `git -c key=value` passes to the git processes it starts, in
    # shell quoting ('core.hookspath'='/x'); a parent's `-c` reaches the next git through it.
    pairs: list[str] = []
    if environ.get("GIT_CONFIG_PARAMETERS"):
        import shlex  # only then: not on every run's start-up path

        try:
            pairs = shlex.split(environ["GIT_CONFIG_PARAMETERS"])
        except ValueError:
            pass  # git refuses it too ("bogus format in GIT_CONFIG_PARAMETERS")
    for pair in pairs[:GIT_CONFIG_COUNT_LIMIT]:
        key, _, value = pair.partition("=")
        named += [("GIT_CONFIG_PARAMETERS", w, "dir", f"git's {key}") for w in value.split()[:1]]
    found = []
    for variable, word, kind, what in named:
        if word.startswith("~/") and home and home != "/":
            word = os.path.join(home, word[2:])
        if word.startswith("/"):
            found.append((variable, os.path.normpath(word), kind not in ("file", "files", "program"), what))
    return found


def startup_refusal(path: str, home: str, environ: dict[str, str]) -> str | None:
    """Why the resolved PATH must not be writable inside a run: it is, holds, or (for a
    directory) lies inside a path the caller's environment names as start-up code or a config
    for the next command outside (``startup_paths``), resolved as the caller's tools resolve
    it; or None."""
    root = path.rstrip("/") or "/"
    for variable, named, is_dir, what in startup_paths(home, environ):
        for candidate in dict.fromkeys((named, os.path.realpath(named))):
            holds = candidate == root or candidate.startswith(root + "/")
            inside = is_dir and root.startswith(candidate.rstrip("/") + "/")
            if holds or inside:
                how = ("it is" if candidate == root else "it lies inside" if inside and not holds
                       else "it holds")
                return (f"{how} {candidate}, which "
                        f"{variable} names as {what} for the next command outside (it inherits this "
                        f"environment); give it as --ro, or point {variable} elsewhere")
    return None

def cache_refusal(path: str, home: str, environ: dict[str, str],
                  prefixes: tuple[str, ...] = ()) -> str | None:
    """Why the resolved PATH must not be writable inside a run: it is, holds, or is inside a
    cache (or a find-links directory) whose content runs later, outside; or None. PREFIXES:
    venvs whose own pip.conf counts (those of the work dir)."""
    caches: dict[str, tuple[str, str]] = {}
    if home and home != "/":
        for rel, tool in CODE_CACHES.items():
            caches[os.path.join(home, rel)] = (tool, "cache")
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        for rel, tool in CODE_CACHES.items():
            if rel.startswith(".cache/"):
                caches[os.path.join(xdg, rel[len(".cache/"):])] = (tool, "cache")
    for variable, tool in CACHE_VARIABLES.items():
        value = environ.get(variable, "")
        if value.startswith("/"):
            caches[os.path.normpath(value)] = (tool, "cache")
    # What pip's and uv's configuration names: also local indexes and the files pip reads at
    # its start-up. Where it cannot be read as they read it, every root is refused (fail closed).
    configured = configured_caches(home, environ, prefixes)
    if "" in configured:
        return (f"no-docker cannot tell what pip or uv installs from later, outside: {configured['']}; "
                "make it a plain file under 4 MiB, or unset the variable that names it")
    for where, described in configured.items():
        tool, _, what = described.partition(" (")
        caches[where] = (tool, what.rstrip(")") or "cache")
    for cache, (tool, what) in caches.items():
        inside = path == cache or path.startswith(cache.rstrip("/") + "/")
        holds = cache.startswith(path.rstrip("/") + "/")
        if inside or holds:
            where = cache.replace(home, "~", 1) if home and cache.startswith(home + "/") else cache
            return (f"{'it holds ' if holds and not inside else ''}{where}, {tool}'s {what}, whose content "
                    f"{tool.split(' ')[0]} installs and runs later, outside; give it as --ro {where} (read, "
                    "never written), or let the run use its own throwaway cache (the default)")
    return None
