"""Defaults for ``no-docker run`` from ``[tool.no-docker]`` in the work dir's ``pyproject.toml``.

DESIGN §3: keys are the long option names (``rw``, ``ro``, ``keep-env``, ``publish``: lists;
``max-pids``, ``end-timeout``: numbers; ``tmp-size``, ``memory-max``: a size, "4G" or a number
of bytes; ``quiet``: a boolean). The command line adds to the
lists and overrides the scalars. An unknown key, a wrong type or a file that cannot be read or
parsed is a usage error (2) naming the key and the file.

A config can never widen what the command line could not: every value is turned into the
command-line option it stands for and goes through the same checks (an engine port, a system
directory as ``--rw``, ``--keep-env DOCKER_HOST`` are refused here as there, naming the key).

Cost: ``run`` looks for the file with one ``stat``; ``tomllib`` is imported only when a
``pyproject.toml`` mentions ``no-docker`` at all (``no-docker run -- true`` without a config
pays nothing; DESIGN §10).
"""

from __future__ import annotations

import os

from ..errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

FILE = "pyproject.toml"
LISTS = {"rw": "--rw", "ro": "--ro", "keep-env": "--keep-env", "publish": "--publish"}
SCALARS = {"max-pids": "--max-pids", "end-timeout": "--end-timeout", "tmp-size": "--tmp-size",
           "memory-max": "--memory-max"}
FLAGS = {"quiet": "--quiet"}
KEYS = (*LISTS, *SCALARS, *FLAGS)


class Config:
    """The ``[tool.no-docker]`` table of one file, as option arguments, checked for type."""

    def __init__(self, path: str, table: dict[str, object]) -> None:
        self.path = path
        self.table = table
        self.options: list[tuple[str, list[str]]] = []  # (key, its argv words)
        for key, value in table.items():
            self.options.append((key, self._argv_of(key, value)))

    def _argv_of(self, key: str, value: object) -> list[str]:
        where = f"{self.path}: [tool.no-docker] {key}"
        if key in LISTS:
            if not isinstance(value, list):
                raise UsageError(f"{where}: a list of strings, not {_kind(value)}")
            words: list[str] = []
            for item in value:
                if key == "publish" and isinstance(item, int) and not isinstance(item, bool):
                    item = str(item)
                if not isinstance(item, str) or not item:
                    raise UsageError(f"{where}: a list of non-empty strings; {item!r} is {_kind(item)}")
                if key in ("rw", "ro"):
                    item = self._path(item)
                words += [LISTS[key], item]
            return words
        if key in SCALARS:
            if key == "max-pids" and not (isinstance(value, int) and not isinstance(value, bool)):
                raise UsageError(f"{where}: a whole number, not {_kind(value)}")
            if key == "end-timeout" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise UsageError(f"{where}: a number of seconds, not {_kind(value)}")
            if key in ("tmp-size", "memory-max") and (isinstance(value, bool)
                                                      or not isinstance(value, (int, str))):
                raise UsageError(f'{where}: a size such as "4G", or a number of bytes, not {_kind(value)}')
            return [SCALARS[key], str(value)]
        if key in FLAGS:
            if not isinstance(value, bool):
                raise UsageError(f"{where}: true or false, not {_kind(value)}")
            return [FLAGS[key]] if value else []
        raise UsageError(f"{where}: unknown key (known: {', '.join(KEYS)})")

    def _path(self, text: str) -> str:
        """A path of the config: ``~/`` is the user's home, a relative one is the file's dir's."""
        if text == "~" or text.startswith("~/"):
            return os.path.expanduser(text)
        return os.path.join(os.path.dirname(self.path), text)

    def source(self, key: str) -> str:
        return f"{self.path} [tool.no-docker] {key}"


def _kind(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def load(work: str) -> Config | None:
    """The config of work dir WORK, or None when it has none (the common, free case)."""
    from .later_code import read_regular, realpath

    # The directory as the kernel resolves it (a user's path may pass through a link); the
    # file itself must not be one.
    path = os.path.join(realpath(work), FILE)
    # The work dir is the previous run's to write: pyproject.toml may be a link to a FIFO or a
    # device outside (measured: a writer outside was woken at the end of a run and at the next
    # start). So no link is followed in any component and only a regular file is read, bounded.
    try:
        data = read_regular(path, (1 << 22) + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        if os.path.islink(path):
            raise UsageError(f"{path}: a symbolic link; no-docker reads its settings only from a regular "
                             "file (a run could have planted the link): replace it with the file") from err
        raise UsageError(f"{path}: cannot read it: {err.strerror or err}") from err
    if len(data) > 1 << 22:
        raise UsageError(f"{path}: larger than 4 MiB, not a pyproject.toml")
    if b"no-docker" not in data:
        return None  # no [tool.no-docker] table can be in it: skip the parser
    import tomllib

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"{path}: not valid TOML: {err}") from err
    except RecursionError:  # tomllib recurses per nested array (`x = [[[...]]]`, 2000 deep)
        raise UsageError(f"{path}: nested too deeply to read as TOML") from None
    tool = doc.get("tool", {})
    table = tool.get("no-docker") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.no-docker] must be a table, not {_kind(table)}")
    return Config(path, table)


def check(config: Config, work: str, parse: Callable[[list[str]], object],
          parse_ending: Callable[[list[str]], object],
          check_paths: Callable[[object], None] | None = None) -> None:
    """Every value through the command line's own checks, one key at a time, so that a refusal
    names the key and the file (``run``'s ``parse_args``/``ending_options``/``check_paths`` as
    PARSE, PARSE_ENDING and CHECK_PATHS, then what ``build_policy`` refuses of
    ``--rw``/``--ro``/``--keep-env``)."""
    from .plan import Request, writable_roots
    from .policy import env_name_denied

    for key, words in config.options:
        try:
            probe = [*words, "--", "true"]
            request = parse(probe)
            parse_ending(probe)
            if check_paths is not None and key in ("rw", "ro"):
                check_paths(Request(command=("true",), work=work, rw=tuple(request.rw),  # type: ignore[attr-defined]
                                    ro=tuple(request.ro)))  # type: ignore[attr-defined]
            if key == "rw":
                writable_roots(Request(command=("true",), work=work, rw=tuple(request.rw)))  # type: ignore[attr-defined]
            elif key == "ro":
                for path in request.ro:  # type: ignore[attr-defined]
                    if not os.path.exists(path):
                        raise UsageError(f"--ro {path}: no such file or directory")
            elif key == "keep-env":
                for name in request.keep_env:  # type: ignore[attr-defined]
                    if env_name_denied(name):
                        raise UsageError(f"--keep-env {name}: refused, it can route to an engine or "
                                         "run code at shell start-up (P6)")
        except UsageError as err:
            raise UsageError(f"{config.source(key)}: {err}") from None


def merge(config: Config, argv: list[str], given: set[str]) -> list[str]:
    """ARGV (run's own, before ``--``) with the config's options in front: a list option of the
    config adds to the command line's; a scalar the command line gives wins. GIVEN: the long
    options the command line itself used."""
    words: list[str] = []
    for key, option_words in config.options:
        if option_words and option_words[0] in given and key not in LISTS:
            continue
        words += option_words
    return words + argv


def sources(config: Config | None, given: set[str]) -> dict[str, str]:
    """For ``--report``: where each setting came from ("command line", or the file and key)."""
    out = {}
    for key in KEYS:
        option = {**LISTS, **SCALARS, **FLAGS}[key]
        from_config = config is not None and key in config.table
        if option in given and from_config and key in LISTS:
            out[key] = f"command line + {config.source(key)}"  # type: ignore[union-attr]
        elif option in given:
            out[key] = "command line"
        elif from_config:
            out[key] = config.source(key)  # type: ignore[union-attr]
    return out
