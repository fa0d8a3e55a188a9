"""Run markers: one directory per run under the state dir, holding ``run.json``.

The marker directory is what lets ``no-docker end`` (or the next ``run``) finish a run whose
supervisor was SIGKILLed: it records who owned the run (pid + start time + boot id), the run's
pid namespace (NS_GET_ID where the kernel has it, else inode + the init's start time: inodes
are reused), the outside pid + start time of the namespace's init, the cgroups, the command and
the state. ``run.json`` is replaced atomically (write a temporary file, rename) so a
reader never sees half a record.

The state dir must be outside every path a run can write (DESIGN §5); it is 0700 and ours.
"""

from __future__ import annotations

import os
import time

from ..errors import NotProven
from ..record import Factory, record
from .procfs import ProcessGone, ProcFS, ProcfsError
from .snapshot import Identity

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

# Paths are plain str here, not pathlib.Path: importing pathlib (and with it re, fnmatch,
# urllib.parse, enum) costs 10-14 ms of every `no-docker run -- true` (DESIGN §10, 30 ms).

RECORD = "run.json"
VERSION = 1

# states a record moves through
CREATED = "created"  # marker written, nothing started yet
SPAWNING = "spawning"  # bwrap may exist; its init is not known yet
RUNNING = "running"  # the namespace init is known
ENDING = "ending"
NOT_PROVEN = "not-proven"  # ending finished without proof: `no-docker end` must finish it


def state_dir(env: Mapping[str, str] | None = None) -> str:
    """``NO_DOCKER_STATE_DIR``, else ``$XDG_RUNTIME_DIR/no-docker``, else ``/run/no-docker`` (root)."""
    env = os.environ if env is None else env
    if env.get("NO_DOCKER_STATE_DIR"):
        return os.fspath(env["NO_DOCKER_STATE_DIR"])
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "no-docker")
    if os.geteuid() == 0:
        return "/run/no-docker"
    raise NotProven("state dir", "neither NO_DOCKER_STATE_DIR nor XDG_RUNTIME_DIR is set",
                    "set NO_DOCKER_STATE_DIR to a private directory outside the work dir")


def ensure_state_dir(path: str | os.PathLike[str]) -> str:
    """Create the state dir 0700, or check that an existing one is ours and private."""
    path = os.fspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as err:
        raise NotProven("state dir", f"cannot create {path}: {err.strerror}",
                        "set NO_DOCKER_STATE_DIR to a writable private directory") from err
    if not os.path.isdir(path) or os.path.islink(path):
        raise NotProven("state dir", f"{path} is not a directory", "remove it or set NO_DOCKER_STATE_DIR")
    if st.st_uid != os.geteuid():
        raise NotProven("state dir", f"{path} belongs to uid {st.st_uid}, not to us",
                        "set NO_DOCKER_STATE_DIR to a directory of your own")
    if st.st_mode & 0o077:
        raise NotProven("state dir", f"{path} is mode {st.st_mode & 0o777:o}, others can write or read it",
                        f"chmod 700 {path}")
    return path


def new_run_id() -> str:
    """Sortable by start, unique: ``YYYYmmddTHHMMSS-<8 hex>``."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + os.urandom(4).hex()


def valid_run_id(text: str) -> bool:
    return bool(text) and len(text) <= 64 and all(c.isalnum() or c in "-_T" for c in text) \
        and not text.startswith("-")


@record(mutable=True)
class RunRecord:
    run_id: str
    owner: Identity
    boot_id: str
    command: list[str]
    state: str = CREATED
    created: float = Factory(time.time)  # type: ignore[assignment]
    ns_id: int | None = None  # NS_GET_ID of the run's pid namespace
    ns_inode: int | None = None
    ns_depth: int | None = None  # below the owner's procfs namespace
    init: Identity | None = None  # outside pid + start time of the namespace's init
    launcher: Identity | None = None  # the outer bwrap process (our child)
    cgroup: dict[str, str | None] | None = None
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        """The run.json object: every field in declaration order, then ``version``."""
        return {
            "run_id": self.run_id,
            "owner": _identity_json(self.owner),
            "boot_id": self.boot_id,
            "command": list(self.command),
            "state": self.state,
            "created": self.created,
            "ns_id": self.ns_id,
            "ns_inode": self.ns_inode,
            "ns_depth": self.ns_depth,
            "init": _identity_json(self.init),
            "launcher": _identity_json(self.launcher),
            "cgroup": None if self.cgroup is None else dict(self.cgroup),
            "detail": self.detail,
            "version": VERSION,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RunRecord:
        def ident(value: object) -> Identity | None:
            if value is None:
                return None
            return Identity(int(value["pid"]), int(value["start_time"]))

        owner = ident(data["owner"])
        if owner is None:
            raise ValueError("record has no owner")
        return cls(
            run_id=str(data["run_id"]), owner=owner, boot_id=str(data["boot_id"]),
            command=[str(a) for a in data.get("command", [])], state=str(data.get("state", CREATED)),
            created=float(data.get("created", 0.0)), ns_id=data.get("ns_id"),
            ns_inode=data.get("ns_inode"), ns_depth=data.get("ns_depth"), init=ident(data.get("init")),
            launcher=ident(data.get("launcher")), cgroup=data.get("cgroup"),
            detail=str(data.get("detail", "")),
        )


def _identity_json(identity: Identity | None) -> dict[str, int] | None:
    return None if identity is None else {"pid": identity.pid, "start_time": identity.start_time}


class CorruptMarker(Exception):
    """A marker directory whose run.json is missing or unreadable."""


def marker_dir(state: str | os.PathLike[str], run_id: str) -> str:
    return os.path.join(state, run_id)


def to_json_text(value: object) -> str:
    """JSON for the record's plain values (dict/list/str/int/float/bool/None).

    Hand-written because ``import json`` is a measurable part of every ``no-docker run``, which
    writes run.json before CMD starts. Strings are escaped as ``json.dumps`` does by default
    (ASCII only; the surrogates of undecodable argv bytes become \\udcXX).
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not representable in JSON: {value}")
        return repr(value)
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return '"' + value + '"'  # nothing to escape: the common case, paths and argv
        return '"' + "".join(_escape(c) for c in value) + '"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{to_json_text(str(k))}: {to_json_text(v)}"
                               for k, v in sorted(value.items())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(to_json_text(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to run.json")


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\b": "\\b", "\f": "\\f"}


def _escape(c: str) -> str:
    if c in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[c]
    code = ord(c)
    if 0x20 <= code < 0x7F:  # json.dumps escapes DEL too
        return c
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a UTF-16 surrogate pair, as JSON wants
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def write_record(directory: str | os.PathLike[str], record: RunRecord) -> None:
    """Atomic replace: a reader sees the old record or the new one, never a mix.

    No fsync: the rename is what readers need; durability across a power loss is worthless here,
    since after a reboot every process of the run is gone and the marker is removed as stale.
    """
    tmp = os.path.join(directory, f".{RECORD}.{os.getpid()}.tmp")
    data = to_json_text(record.to_json()).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, RECORD))


def create_marker(state: str | os.PathLike[str], record: RunRecord) -> str:
    """Make the marker directory with its run.json in one step: it is filled under a name no
    reader lists (a leading dot), then renamed, so a concurrent run's stale check never sees a
    marker without a record."""
    directory = marker_dir(state, record.run_id)
    staging = os.path.join(state, f".{record.run_id}.new")
    os.mkdir(staging, 0o700)
    try:
        write_record(staging, record)
        os.rename(staging, directory)
    except BaseException:
        remove_marker(staging)
        raise
    return directory


def read_record(directory: str | os.PathLike[str]) -> RunRecord:
    import json  # only `end`, `runs` and the stale check read records

    try:
        with open(os.path.join(directory, RECORD), "rb") as f:
            return RunRecord.from_json(json.loads(f.read()))
    except FileNotFoundError as err:
        raise CorruptMarker(f"{directory}: no {RECORD}") from err
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CorruptMarker(f"{directory}/{RECORD}: {err}") from err


def list_markers(state: str | os.PathLike[str]) -> list[str]:
    try:
        with os.scandir(state) as entries:
            return sorted(entry.path for entry in entries
                          if valid_run_id(entry.name) and entry.is_dir())
    except FileNotFoundError:
        return []


def remove_marker(directory: str | os.PathLike[str]) -> None:
    """Remove a marker directory (flat: run.json and perhaps a temporary file).

    It is first renamed to a dot name, which ``list_markers`` never lists: a concurrent run's
    stale check would otherwise see, between the unlink and the rmdir, a marker without its
    record and refuse to start ("no run.json")."""
    directory = os.fspath(directory)
    parent, name = os.path.split(directory)
    if not name.startswith("."):
        doomed = os.path.join(parent, f".{name}.gone{os.getpid()}")
        try:
            os.rename(directory, doomed)
        except FileNotFoundError:
            return
        directory = doomed
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        pass


def lock_marker(directory: str | os.PathLike[str], *, wait: bool) -> int | None:
    """Take the marker directory's lock (``flock`` on the directory itself): the fd that holds
    it, or None when the directory is gone (or, with ``wait`` False, another process holds it:
    then ``BlockingIOError`` is raised).

    Only one ``no-docker end`` works on a run at a time; whoever waited finds, once it holds the
    lock, the run either removed (None: ended by the other) or still there (not proven: it may
    try again). The lock lives on the directory's inode, so it survives ``remove_marker``'s
    rename; the path is re-checked against it after locking."""
    import fcntl  # only `end` locks; the run path never imports it

    directory = os.fspath(directory)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        held, now = os.fstat(fd), os.stat(directory)
    except FileNotFoundError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
        os.close(fd)
        return None
    return fd


def own_identity(procfs: ProcFS | None = None) -> Identity:
    procfs = procfs or ProcFS()
    pid = os.getpid()
    return Identity(pid, procfs.stat(pid).start_time)


def identity_alive(ident: Identity, procfs: ProcFS) -> bool:
    """True while the process ``ident`` exists and has not exited (zombies are dead)."""
    try:
        st = procfs.stat(ident.pid)
    except ProcessGone:
        return False
    except ProcfsError:
        return True  # cannot tell: assume alive (the safe side for "refuse")
    return st.start_time == ident.start_time and not st.is_dead


def owner_alive(record: RunRecord, procfs: ProcFS, boot_id: str | None = None) -> bool:
    """Is the supervisor that owns this run still running? A reboot ends every process."""
    try:
        current = boot_id if boot_id is not None else procfs.boot_id()
    except ProcfsError:
        current = record.boot_id
    if current != record.boot_id:
        return False
    return identity_alive(record.owner, procfs)
