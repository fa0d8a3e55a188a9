"""The repository the guard checks: the files git would commit, shell scripts, workflows,
pytest settings.

The only module of the guard that runs git or reads files; everything it answers is a plain
value, so the checks stay pure.
"""

from __future__ import annotations

import configparser
import re
import subprocess
import tomllib
from functools import cached_property
from pathlib import Path

from no_docker.supervisor.errors import UsageError

from .shell_commands import has_stanza_first
from .stanza import STANZA

SHELL_SUFFIXES = (".sh", ".bash")
# `#!/bin/sh`, `#!/usr/bin/bash -e`, `#!/usr/bin/env bash`, `#!/usr/bin/env -S bash -eu`
SHEBANG = re.compile(rb"#!\s*(?:\S*/)?(?:env\s+(?:-\S+\s+)*)?(?:ba|da|k)?sh(?:\s|\Z)")
WORKFLOW_DIR = ".github/workflows"
WORKFLOW_SUFFIXES = (".yml", ".yaml")
ACTION_NAME = "no-docker run"  # the `name:` of ci/action.yml (never how the guard recognises it)
MAX_TEXT = 1 << 20  # a script or config larger than this is not read (and never counts as isolated)


def is_shell_script(name: str, head: bytes) -> bool:
    """A file is a shell script by its suffix or by a sh/bash/dash/ksh shebang."""
    return name.endswith(SHELL_SUFFIXES) or SHEBANG.match(head.split(b"\n", 1)[0]) is not None


def _truthy(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"))


def _requires_plugin(value: object) -> bool:
    items = value.split() if isinstance(value, str) else value if isinstance(value, list) else []
    return any(isinstance(i, str) and re.match(r"no[-_]docker(?:[<>=!~ ]|\Z)", i) for i in items)


def pytest_config_isolates(files: dict[str, str]) -> bool:
    """Does the pytest configuration (pytest's own search order, first file that configures
    pytest wins) set ``no_docker = true`` *and* require the plugin? Without
    ``required_plugins = no-docker`` a missing plugin would make pytest ignore the setting and
    run the tests unisolated, so the guard does not count such a configuration."""
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        text = files.get(name)
        if text is None:
            continue
        section: dict[str, object] | None = None
        if name == "pyproject.toml":
            try:
                tool = tomllib.loads(text).get("tool", {})
            except tomllib.TOMLDecodeError:
                continue
            pytest_table = tool.get("pytest", {}) if isinstance(tool, dict) else {}
            if not isinstance(pytest_table, dict) or not pytest_table:
                continue
            ini = pytest_table.get("ini_options")
            section = ini if isinstance(ini, dict) else pytest_table
        else:
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read_string(text)
            except configparser.Error:
                continue
            wanted = "tool:pytest" if name == "setup.cfg" else "pytest"
            if not parser.has_section(wanted):
                continue
            section = dict(parser.items(wanted))
        return _truthy(section.get("no_docker")) and _requires_plugin(section.get("required_plugins"))
    return False


class Repository:
    """A git working tree; answers the questions of ``shell_commands.RepoView``."""

    def __init__(self, root: Path, tracked: list[str], untracked: list[str] | None = None) -> None:
        self.root = root
        self.tracked = tracked
        self._tracked_set = frozenset(tracked)
        # Untracked and not ignored: what `git add -A` would add. Checked like tracked files (a
        # user runs the guard before committing), but they never count as isolation (below).
        self.untracked = sorted(set(untracked or ()) - self._tracked_set)

    @property
    def files(self) -> list[str]:
        """Every file git would commit: tracked, and untracked but not ignored."""
        return sorted(set(self.tracked) | set(self.untracked))

    @classmethod
    def open(cls, path: Path) -> Repository:
        if not path.is_dir():
            raise UsageError(f"guard: REPO {str(path)!r} is not a directory")
        try:
            top = subprocess.run(
                ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
                capture_output=True,
                text=True,
                check=False,
            )
        except FileNotFoundError:
            raise UsageError("guard: git is not installed (it lists the tracked files)") from None
        if top.returncode != 0:
            raise UsageError(f"guard: {str(path)!r} is not inside a git repository (git rev-parse failed)")
        root = Path(top.stdout.strip())
        tracked = _ls_files(root)
        # .gitignore, .git/info/exclude and core.excludesFile: an ignored file (a venv's activate
        # script, build output) never reaches the runner. A nested repository is listed as
        # `dir/`: its files are its own repository's.
        untracked = [p for p in _ls_files(root, "--others", "--exclude-standard") if not p.endswith("/")]
        return cls(root, tracked, untracked)

    def read_text(self, rel: str) -> str | None:
        """A file's text, or None when it is absent, not a regular file, too large or not UTF-8."""
        path = self.root / rel
        try:
            if not path.is_file() or path.stat().st_size > MAX_TEXT:
                return None
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _head(self, rel: str) -> bytes:
        try:
            with (self.root / rel).open("rb") as f:
                return f.read(256)
        except OSError:
            return b""

    def shell_scripts(self) -> list[str]:
        """Regular files git would commit that are shell scripts. A symlink is skipped: git holds
        the link, not what it points at (which may lie outside the repository)."""
        return [
            p
            for p in self.files
            if (self.root / p).is_file()
            and not (self.root / p).is_symlink()
            and is_shell_script(p, self._head(p))
        ]

    def workflows(self) -> list[str]:
        """Every ``.github/workflows/*.yml|yaml`` git would commit (tracked or not: a new workflow
        is checked before it is committed; an ignored one never reaches GitHub). GitHub reads
        only that directory's top level."""
        prefix = WORKFLOW_DIR + "/"
        return [
            p
            for p in self.files
            if p.startswith(prefix) and "/" not in p[len(prefix):] and p.endswith(WORKFLOW_SUFFIXES)
            and (self.root / p).is_file()
        ]

    # -- RepoView --------------------------------------------------------------------------

    def script_has_stanza(self, path: str) -> bool:
        if path not in self._tracked_set:
            return False  # an untracked script may differ on the runner: it does not count
        text = self.read_text(path)
        return text is not None and has_stanza_first(text, STANZA)

    @cached_property
    def _pytest_isolates(self) -> bool:
        files = {
            n: t
            for n in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
            if (t := self.read_text(n)) is not None
        }
        return pytest_config_isolates(files)

    def pytest_config_isolates(self) -> bool:
        return self._pytest_isolates

    def is_no_docker_action(self, path: str) -> bool:
        """True when the local action at ``path`` is no-docker's own ``ci/action.yml``, byte for
        byte (what it *is*, not what it is named: a composite action named ``no-docker run`` can
        run anything). The file must be tracked: an untracked one may differ on the runner."""
        ours = own_action_bytes()
        for name in ("action.yml", "action.yaml"):
            rel = f"{path.strip('/')}/{name}"
            if rel not in self._tracked_set:
                continue
            try:
                return (self.root / rel).read_bytes() == ours
            except OSError:
                return False
        return False


    def has_link(self, path: str) -> bool:
        """True when ``path`` (relative to the root) is a symbolic link git would commit or one on
        disk: the runner's checkout holds the link, which may lead anywhere (``sub -> /home/runner``)."""
        rel = path.strip("/")
        if not rel or rel == ".":
            return False
        if rel in self._links:
            return True
        try:
            return (self.root / rel).is_symlink()
        except OSError:
            return True  # cannot tell: count it as a link (default-deny)

    @cached_property
    def _links(self) -> frozenset[str]:
        staged = _ls_files(self.root, "-s")  # `MODE SHA STAGE\tPATH`; 120000 is a link
        return frozenset(line.split("\t", 1)[1] for line in staged
                         if line.startswith("120000 ") and "\t" in line)

    def run_config(self, directory: str) -> list[tuple[str, str]] | None:
        """``rw``/``ro`` of ``[tool.no-docker]`` in ``directory/pyproject.toml`` (no-docker run's
        defaults, supervisor/isolation/config.py): ``[("--rw", path), ...]``; [] without a table;
        None when the file is there but cannot be read as TOML (the run would refuse it too)."""
        rel = "pyproject.toml" if directory in ("", ".") else f"{directory.strip('/')}/pyproject.toml"
        if not (self.root / rel).exists():
            return []
        text = self.read_text(rel)
        if text is None:
            return None
        if "no-docker" not in text:
            return []
        try:
            table = tomllib.loads(text).get("tool", {}).get("no-docker")
        except (tomllib.TOMLDecodeError, AttributeError):
            return None
        if table is None:
            return []
        if not isinstance(table, dict):
            return None
        out: list[tuple[str, str]] = []
        for key, flag in (("rw", "--rw"), ("ro", "--ro")):
            values = table.get(key, [])
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                return None
            out += [(flag, v) for v in values]
        return out


def _ls_files(root: Path, *options: str) -> list[str]:
    listing = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *options], capture_output=True,
                             check=False)
    if listing.returncode != 0:
        detail = listing.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"guard: git ls-files failed in {str(root)!r}: {detail[-1] if detail else '?'}")
    return sorted(p for p in listing.stdout.decode("utf-8", "surrogateescape").split("\0") if p)


def own_action_bytes() -> bytes:
    """The composite action this package ships (``ci/action.yml`` next to this module)."""
    return (Path(__file__).resolve().parent / "action.yml").read_bytes()
