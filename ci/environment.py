"""Which environment variables a workflow may set, default-deny (issue 27, guard part).

A step that is not isolated runs programs outside any run: the runner's bash, actions (node),
git, pip, apt, sudo, compilers that pip calls for an sdist. Each reads variables that name a
config file, a search path or code, and the list of such variables has no end (issue 27 found
``XDG_CONFIG_DIRS`` making pip read the repository's ``pip.conf``, and ``APT_CONFIG`` making apt
run the repository's ``Pre-Invoke`` hook, both missing from the old deny-list). So:

* **outside** (workflow and job ``env:``, which reach every step and action; a step's ``env:``,
  ``export``, ``NAME=VALUE cmd`` and ``env NAME=VALUE`` where a program other than no-docker
  runs outside; every line written to ``$GITHUB_ENV``, which reaches every later step,
  post steps of actions included): only the names of ``ALLOWED``, each with a value of its
  pattern. Everything else is refused.
* **before no-docker only** (a step whose only programs outside are ``no-docker`` itself and
  shell builtins): any name but those of ``REFUSED``/``REFUSED_PREFIXES``, which bash, python,
  glibc's loader and no-docker read outside. The run itself passes none of them inside unless
  ``--keep-env`` names them (T-09).

Pure functions; docs/ci-guard.md lists both tables with these sources.
"""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FLAG = re.compile(r"(0|1|true|false|yes|no)?\Z", re.IGNORECASE)
# A locale name as glibc reads it when it holds no `/` (a `/` makes it a path: setlocale(3)).
_LOCALE = re.compile(r"(C|POSIX|[a-z]{2,3}(_[A-Z]{2})?)(\.[A-Za-z0-9-]+)?(@[a-z]+)?\Z")

# Names a step that runs programs outside may set, with the values accepted. Each is read only as
# a switch or a word, never as a path, a search list or code (the sources say so):
ALLOWED: dict[str, re.Pattern[str]] = {
    "CI": _FLAG,  # a marker tools read as a switch (GitHub sets CI=true itself)
    "FORCE_COLOR": re.compile(r"[0-3]?\Z|true\Z|false\Z"),  # colour switch (force-color.org)
    "NO_COLOR": re.compile(r"[A-Za-z0-9]*\Z"),  # no-color.org: "when present and not empty"
    "CLICOLOR": _FLAG,  # bixense.com/clicolors
    "CLICOLOR_FORCE": _FLAG,
    "PY_COLORS": _FLAG,  # pytest/tox colour switch
    "TERM": re.compile(r"[a-z0-9][a-z0-9+.-]*\Z"),  # a terminfo *name* (TERMINFO, a dir, is refused)
    "COLUMNS": re.compile(r"[1-9][0-9]{0,3}\Z"),  # a width; 0 makes pip print nothing (T-88 found it)
    "LANG": _LOCALE,  # locale(7): a name; with a `/` glibc reads a path, refused by the pattern
    "LC_ALL": _LOCALE,
    "DEBIAN_FRONTEND": re.compile(r"(noninteractive|readline|teletype|dialog)\Z"),  # debconf(7)
}

# Read by what runs before and around no-docker outside: the runner's bash, no-docker's python,
# glibc's loader, no-docker itself (its state dir, its config).
REFUSED = frozenset({
    # bash(1), INVOCATION and "Shell Variables": files sourced, code run, how words are read
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "PATH", "IFS", "CDPATH",
    "GLOBIGNORE", "EXECIGNORE", "POSIXLY_CORRECT", "INPUTRC", "HISTFILE", "BASH_XTRACEFD", "HOME",
    "SHELL", "ZDOTDIR", "TMPDIR", "FUNCNEST",
    # glibc: ld.so(8) is LD_* below; iconv modules, locale and message files, resolver, malloc
    "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "RESOLV_HOST_CONF",
    "GLIBC_TUNABLES", "TZ", "TZDIR", "LANGUAGE", "TERMINFO", "TERMINFO_DIRS",
    # apt.conf(5): APT_CONFIG names a config file, whose hooks (DPkg::Pre-Invoke) are commands
    "APT_CONFIG",
    # node(1) for JavaScript actions; perl, ruby, java launchers; OpenSSL loads engines (code)
    "NODE_OPTIONS", "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "OPENSSL_CONF", "OPENSSL_ENGINES",
    # sudo(8), editors and pagers that tools start; compilers pip starts for an sdist
    "SUDO_ASKPASS", "SUDO_EDITOR", "EDITOR", "VISUAL", "PAGER", "CC", "CXX", "CPP", "LDSHARED",
    "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS", "CONFIG_SITE", "VIRTUAL_ENV",
    # Python's site module reads the venv of VIRTUAL_ENV only via PATH; PYTHON* below
})
REFUSED_PREFIXES = (
    "BASH_FUNC_",  # bash imports functions from the environment (bash(1), "Functions")
    "LD_",  # ld.so(8): LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT...
    "DYLD_",
    "PYTHON",  # python(1) ENVIRONMENT: PYTHONPATH, PYTHONSTARTUP, PYTHONUSERBASE, PYTHONHOME...
    "_PYTHON",  # _PYTHON_SYSCONFIGDATA_NAME, _PYTHON_HOST_PLATFORM: imported by sysconfig
    "PIP_",  # pip's configuration: every option as PIP_<OPTION> (PIP_FIND_LINKS, PIP_CONFIG_FILE)
    "XDG_",  # XDG Base Directory spec: XDG_CONFIG_DIRS/_HOME, XDG_DATA_*: where pip, git... read config
    "GIT_",  # git(1) ENVIRONMENT VARIABLES: GIT_CONFIG_*, GIT_EXEC_PATH, GIT_SSH_COMMAND...
    "NPM_CONFIG_", "YARN_",  # npm-config(7): npm_config_* (compared case-insensitively)
    "NO_DOCKER_", "DOCKER_", "CONTAINER_", "PODMAN_",  # no-docker's own switches; engine clients
    "SETUPTOOLS_", "DISTUTILS_", "UV_", "PDM_", "POETRY_", "HATCH_", "TOX_", "CONDA", "PKG_CONFIG",
    "DEBCONF_", "DPKG_", "APT_",
)


def refused_before_no_docker(name: str) -> bool:
    """True when bash, python, glibc or no-docker read ``name`` outside (or it is not a name)."""
    upper = name.upper()
    return (not NAME.match(name) or name in REFUSED or upper in REFUSED
            or upper.startswith(REFUSED_PREFIXES))


def outside_problem(name: str, value: str | None) -> str | None:
    """Why ``name=value`` may not be set where programs other than no-docker run outside, or None.

    ``value`` None: not a literal the guard can read."""
    pattern = ALLOWED.get(name)
    if pattern is None:
        return (f"{name} is not on the guard's short list of variables a step outside a run may set "
                "(a tool may read config or code from it)")
    if value is None or not pattern.match(value):
        return f"{name}={value if value is not None else '<not a literal>'}: not a value the guard accepts"
    return None


def before_no_docker_problem(name: str) -> str | None:
    """Why ``name`` may not be set where only no-docker runs outside, or None."""
    if refused_before_no_docker(name):
        return f"{name} makes the shell, python or no-docker load other code or config"
    return None
