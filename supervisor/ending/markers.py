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
import stat  # os imports it anyway: free
import time

from ..errors import NotProven
from ..record import Factory, record
from .procfs import ProcessGone, ProcFS, ProcfsError
from .snapshot import Identity

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

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


FALLBACK_BASE = "/tmp"  # sticky and world-writable: the per-user dir in it is verified before use


def state_dir(env: Mapping[str, str] | None = None) -> str:
    """Where run markers live (DESIGN §3): ``NO_DOCKER_STATE_DIR``, else
    ``$XDG_RUNTIME_DIR/no-docker``, else ``/run/no-docker`` as root, else a private per-user dir
    ``/tmp/no-docker-<uid>`` (as tmux and ssh-agent do without a login session).

    A relative ``NO_DOCKER_STATE_DIR`` is refused: it would be resolved against the work dir,
    which the run writes, and a run could then edit its own markers (and the next one's). A
    relative ``XDG_RUNTIME_DIR`` is ignored, as the XDG spec says, and so is one that is not a
    directory of ours closed to everyone else (the spec's "MUST"): ``XDG_RUNTIME_DIR=/tmp``
    would make ``/tmp/no-docker`` one name for every user, the first user's dir, and every
    other user's run refused on it (issue 24).

    Nobody else can lock a user out of the per-user default: any local user may create
    ``/tmp/no-docker-<uid>`` first (a directory, a link, a file: /tmp is writable by all), so
    that name is only the first of ``/tmp/no-docker-<uid>``, ``.1``, ``.2``... and the state
    dir is the first of them that is a directory of ours, else the first that does not exist
    (:func:`pick_fallback`). Only we can own a directory there (a hard link, the one thing
    another user can make that is ours, cannot be a directory), so the choice depends on our
    own directories alone: it stays put when a squatter's entry comes or goes, and every
    ``run``, ``runs`` and ``end`` finds the same markers.
    """
    env = os.environ if env is None else env
    configured = env.get("NO_DOCKER_STATE_DIR")
    if configured:
        if not configured.startswith("/"):
            raise NotProven("state dir", f"NO_DOCKER_STATE_DIR={configured} is a relative path",
                            "set it to an absolute path of a private directory outside the work dir")
        return os.path.normpath(configured)
    uid = os.geteuid()
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and runtime.startswith("/") and _private_dir_of(runtime, uid, follow=True):
        return os.path.join(os.path.normpath(runtime), "no-docker")
    if uid == 0:
        return "/run/no-docker"
    primary = f"no-docker-{uid}"
    if _private_dir_of(os.path.join(FALLBACK_BASE, primary), uid, mode=False):
        return os.path.join(FALLBACK_BASE, primary)  # the usual case: one lstat
    try:
        present = [n for n in os.listdir(FALLBACK_BASE) if n == primary or n.startswith(primary + ".")]
    except OSError:
        present = []  # ensure_state_dir says what is wrong with the base
    ours = {n for n in present if _private_dir_of(os.path.join(FALLBACK_BASE, n), uid, mode=False)}
    return os.path.join(FALLBACK_BASE, pick_fallback(primary, present, ours))


def pick_fallback(primary: str, present: Iterable[str], ours: Iterable[str]) -> str:
    """The per-user state dir's name among PRESENT (the names in the base that start with
    PRIMARY), of which OURS are directories of ours: the first of ``PRIMARY``, ``PRIMARY.1``,
    ``PRIMARY.2``... that is ours, else the first that is not present (pure)."""
    def index(name: str) -> int | None:
        if name == primary:
            return 0
        tail = name[len(primary) + 1:] if name.startswith(primary + ".") else ""
        # canonical decimals from 1 only: "x.01", "x.0" or "x.\u0661" stand for no index
        return int(tail) if tail.isascii() and tail.isdigit() and tail[0] != "0" else None

    mine = [i for i in (index(n) for n in ours) if i is not None]
    if mine:
        best = min(mine)
    else:
        taken = {i for i in (index(n) for n in present) if i is not None}
        best = 0
        while best in taken:
            best += 1
    return primary if best == 0 else f"{primary}.{best}"


def _private_dir_of(path: str, uid: int, *, follow: bool = False, mode: bool = True) -> bool:
    """PATH is a directory owned by UID (and, with MODE, closed to group and others); FOLLOW:
    through a symbolic link (an XDG_RUNTIME_DIR may be one), else the entry itself."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not (mode and st.st_mode & 0o077)


def ensure_state_dir(path: str | os.PathLike[str]) -> str:
    """Create the state dir 0700, or check that an existing one is ours and private.

    Checked on the directory itself (``lstat``, never following a link): a directory, owned by
    us, mode 0700 (nothing for group or others); and its parent is not writable by others
    unless sticky (``/tmp``), so nobody else can rename it away and put their own in its place.
    Anything else: 125 naming the directory and what to do.
    """
    path = os.fspath(path)
    if not os.path.isabs(path):
        raise NotProven("state dir", f"{path} is a relative path",
                        "set NO_DOCKER_STATE_DIR to an absolute path outside the work dir")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
        parent = os.stat(os.path.dirname(path))
    except OSError as err:
        raise NotProven("state dir", f"cannot create {path}: {err.strerror}",
                        "set NO_DOCKER_STATE_DIR to a writable private directory") from err
    if stat.S_ISLNK(st.st_mode):
        raise NotProven("state dir", f"{path} is a symbolic link",
                        "remove it, or set NO_DOCKER_STATE_DIR to a private directory")
    if not stat.S_ISDIR(st.st_mode):
        raise NotProven("state dir", f"{path} is not a directory",
                        "remove it, or set NO_DOCKER_STATE_DIR to a private directory")
    if st.st_uid != os.geteuid():
        raise NotProven("state dir", f"{path} belongs to uid {st.st_uid}, not to us",
                        "remove it, or set NO_DOCKER_STATE_DIR to a directory of your own")
    if st.st_mode & 0o077:
        raise NotProven("state dir", f"{path} is mode {st.st_mode & 0o777:o}, others can write or read it",
                        f"chmod 700 {path}")
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        raise NotProven("state dir", f"{os.path.dirname(path)} (the state dir's parent) is writable by "
                        "others and not sticky", "set NO_DOCKER_STATE_DIR to a private directory")
    return path


def overlap(state: str, roots: Iterable[str]) -> str | None:
    """The first root the state dir lies in (or that lies in the state dir), else None.

    Both sides are compared resolved (symlinks followed as far as they exist): a state dir a
    run can write lets it plant a run.json that the next ``run`` or ``end`` acts on as root.
    """
    real_state = os.path.realpath(state)
    for root in roots:
        real_root = os.path.realpath(root)
        if is_within(real_state, real_root) or is_within(real_root, real_state):
            return root
    return None


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def refuse_writable_state(state: str, roots: Iterable[str]) -> None:
    """125 when the run could write the state dir (DESIGN §5: outside everything it writes),
    or another state dir of ours that exists: a run that writes one plants markers that a later
    ``run`` or ``end`` with that state dir acts on (red-team review, issue 24: a copy of a live
    run's marker with a dead owner, which ``end`` then ended)."""
    roots = list(roots)
    for candidate in (state, *other_state_dirs(state)):
        root = overlap(candidate, roots)
        if root is not None:
            raise NotProven("state dir", f"{candidate} is inside {root}, which the run can write",
                            "set NO_DOCKER_STATE_DIR to a private directory outside the work dir and every "
                            "--rw" if candidate == state else
                            f"keep no-docker's state dirs out of the run's reach (move the work dir or the "
                            f"--rw, or remove {candidate} if no run uses it)")


def other_state_dirs(state: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Our well-known state dirs other than STATE that exist: the default without
    NO_DOCKER_STATE_DIR, ``$XDG_RUNTIME_DIR/no-docker``, ``/run/no-docker`` as root and the
    per-user ``/tmp/no-docker-<uid>`` (a few lstats, no listing)."""
    env = os.environ if env is None else env
    names = []
    try:
        names.append(state_dir({k: v for k, v in env.items() if k != "NO_DOCKER_STATE_DIR"}))
    except NotProven:
        pass
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and runtime.startswith("/"):
        names.append(os.path.join(os.path.normpath(runtime), "no-docker"))
    if os.geteuid() == 0:
        names.append("/run/no-docker")
    names.append(os.path.join(FALLBACK_BASE, f"no-docker-{os.geteuid()}"))
    found = []
    for name in dict.fromkeys(names):
        if name == state:
            continue
        try:
            if stat.S_ISDIR(os.lstat(name).st_mode):
                found.append(name)
        except OSError:
            continue
    return found


def live_twin(state: str, directory: str, record: RunRecord, procfs: ProcFS,
              boot_id: str | None = None) -> str | None:
    """The id of another run in STATE, whose supervisor is alive, that names the same sandbox
    (pid namespace, or its inode and init) as RECORD, else None. A record is data: a copy of a
    live run's marker with a dead owner would make the stale check refuse and ``end`` SIGKILL
    that live run's init (which *is* pid 1 of that namespace, so the init check passes)."""
    if record.ns_inode is None and record.init is None:
        return None
    for other_dir in list_markers(state):
        if os.path.basename(other_dir) == os.path.basename(directory):
            continue
        try:
            other = read_record(other_dir)
        except CorruptMarker:
            continue
        same_ns = (record.ns_id is not None and other.ns_id == record.ns_id) or (
            record.ns_id is None and record.ns_inode is not None and other.ns_inode == record.ns_inode
            and other.init == record.init)
        same_init = record.init is not None and other.init == record.init
        if (same_ns or same_init) and owner_alive(other, procfs, boot_id):
            return other.run_id
    return None


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
    work: str = ""  # the work dir (for `runs`; only ever shown)
    member_uid: int | None = None  # the one outside uid the run's user namespace maps
    # The owner's pid namespace (NS_GET_ID, else None; and its inode): a state dir may be
    # shared with another pid namespace (a CI container sharing /tmp or /run with the host),
    # where the owner's pid means nothing (owner_alive).
    owner_ns_id: int | None = None
    owner_ns_inode: int | None = None

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
            "work": self.work,
            "member_uid": self.member_uid,
            "owner_ns_id": self.owner_ns_id,
            "owner_ns_inode": self.owner_ns_inode,
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
            detail=str(data.get("detail", "")), work=str(data.get("work", "")),
            member_uid=_optional_int(data.get("member_uid")),
            owner_ns_id=_optional_int(data.get("owner_ns_id")),
            owner_ns_inode=_optional_int(data.get("owner_ns_inode")),
        )


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"not an integer: {value!r}")
    return value


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


def to_json_indented(value: object, level: int = 0) -> str:
    """``json.dumps(value, indent=2, sort_keys=True)`` by hand, as ``to_json_text`` (``--report``
    writes it after every run: the cosmic-ray distributor asks for one per mutant)."""
    if isinstance(value, dict) and value:
        inner = "\n" + "  " * (level + 1)
        return "{" + ",".join(f"{inner}{to_json_text(str(k))}: {to_json_indented(v, level + 1)}"
                              for k, v in sorted(value.items())) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)) and value:
        inner = "\n" + "  " * (level + 1)
        return ("[" + ",".join(inner + to_json_indented(v, level + 1) for v in value)
                + "\n" + "  " * level + "]")
    return to_json_text(value)


class _NotPlain(Exception):
    """What ``from_json_text`` leaves to ``json.loads``."""


_JSON_SPACE = " \t\n\r"
_JSON_DEPTH = 32  # run.json nests 2 deep; deeper is json.loads's to read (or to refuse)


def from_json_text(data: bytes) -> object:
    """``json.loads(DATA)``, by hand for what ``to_json_text`` writes (ASCII; strings without an
    escape; integers, floats, true, false, null; objects, arrays): the stale check reads every
    other run's run.json before each run, and ``import json`` (re with it) costs more than the
    rest of that check. Anything else (an escape, a control character, a byte outside ASCII,
    deep nesting, any syntax error) is read by ``json.loads``, which returns or raises what it
    always did: this never accepts what json.loads refuses, nor reads a value differently
    (tests/unit/test_markers.py compares both)."""
    try:
        text = data.decode("ascii")
        value, end = _json_value(text, _json_skip(text, 0), 0)
        if _json_skip(text, end) != len(text):
            raise _NotPlain
        return value
    except (_NotPlain, UnicodeDecodeError, IndexError):
        import json

        return json.loads(data)


def _json_skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _JSON_SPACE:
        i += 1
    return i


def _json_value(text: str, i: int, depth: int) -> tuple[object, int]:
    c = text[i]
    if c == '"':
        end = text.find('"', i + 1)
        word = text[i + 1:end]
        if end < 0 or "\\" in word or not word.isprintable():
            raise _NotPlain  # an escape or a control character: json.loads's rules
        return word, end + 1
    if c in "{[":
        if depth >= _JSON_DEPTH:
            raise _NotPlain
        close = "}" if c == "{" else "]"
        out: dict[str, object] | list[object] = {} if c == "{" else []
        i = _json_skip(text, i + 1)
        if text[i] == close:
            return out, i + 1
        while True:
            if isinstance(out, dict):
                if text[i] != '"':
                    raise _NotPlain
                key, i = _json_value(text, i, depth)
                i = _json_skip(text, i)
                if text[i] != ":":
                    raise _NotPlain
                item, i = _json_value(text, _json_skip(text, i + 1), depth + 1)
                out[key] = item  # type: ignore[index]  # a repeated key: the last wins, as in json.loads
            else:
                item, i = _json_value(text, i, depth + 1)
                out.append(item)
            i = _json_skip(text, i)
            if text[i] == close:
                return out, i + 1
            if text[i] != ",":
                raise _NotPlain
            i = _json_skip(text, i + 1)
    for word, meaning in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, i):
            return meaning, i + len(word)
    # A number as json's scanner matches it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
    start = i
    if c == "-":
        i += 1
    digits = _json_digits(text, i)
    if digits == i or (text[i] == "0" and digits > i + 1):
        raise _NotPlain
    i, is_float = digits, False
    if i < len(text) and text[i] == "." and _json_digits(text, i + 1) > i + 1:
        i, is_float = _json_digits(text, i + 1), True
    if i < len(text) and text[i] in "eE":
        sign = i + 2 if i + 1 < len(text) and text[i + 1] in "+-" else i + 1
        if _json_digits(text, sign) > sign:
            i, is_float = _json_digits(text, sign), True
    number = text[start:i]
    return (float(number) if is_float else int(number)), i


def _json_digits(text: str, i: int) -> int:
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    return i


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


def marker_error(what: str, path: str, err: OSError) -> NotProven:
    """The one line for a marker that cannot be written or removed (a full or read-only state
    dir: ENOSPC, EDQUOT, EROFS, EIO), never a traceback: 125, naming the path and what to do."""
    import errno  # only on this error path

    if err.errno == errno.EROFS:
        remedy = "remount it read-write"
    elif err.errno in (errno.ENOSPC, errno.EDQUOT):
        remedy = "free space (or inodes) there"
    else:
        remedy = "fix it"
    return NotProven("state dir", f"cannot {what} {path}: {err.strerror or err}",
                     f"{remedy}, or set NO_DOCKER_STATE_DIR to a writable private directory")


def write_record(directory: str | os.PathLike[str], record: RunRecord) -> None:
    """Atomic replace: a reader sees the old record or the new one, never a mix.

    No fsync: the rename is what readers need; durability across a power loss is worthless here,
    since after a reboot every process of the run is gone and the marker is removed as stale.
    FileNotFoundError when the marker directory is gone (``end --force`` removed it: callers
    expect that); NotProven for every other failure (the state dir is full or read-only), the
    old record left in place and the temporary file removed.
    """
    tmp = os.path.join(directory, f".{RECORD}.{os.getpid()}.tmp")
    data = to_json_text(record.to_json()).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise marker_error("write", os.path.join(os.fspath(directory), RECORD), err) from err
    try:
        try:
            view = memoryview(data)
            while view:  # a full file system may take part of it (write(2): "partial write")
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(directory, RECORD))
    except OSError as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, FileNotFoundError):
            raise
        raise marker_error("write", os.path.join(os.fspath(directory), RECORD), err) from err


def create_marker(state: str | os.PathLike[str], record: RunRecord) -> str:
    """Make the marker directory with its run.json in one step: it is filled under a name no
    reader lists (a leading dot), then renamed, so a concurrent run's stale check never sees a
    marker without a record. NotProven (nothing is started yet) when the state dir is full or
    read-only."""
    directory = marker_dir(state, record.run_id)
    staging = os.path.join(state, f".{record.run_id}.new")
    try:
        os.mkdir(staging, 0o700)
    except OSError as err:
        raise marker_error("create a run marker in", os.fspath(state), err) from err
    try:
        write_record(staging, record)
        os.rename(staging, directory)
    except BaseException as err:
        try:
            remove_marker(staging)
        except NotProven:
            pass  # the first failure is the one to report
        cause = err.__cause__ if isinstance(err, NotProven) else err  # write_record's own failure
        if isinstance(cause, OSError):
            raise marker_error("create a run marker in", os.fspath(state), cause) from cause
        raise
    return directory


def read_record(directory: str | os.PathLike[str]) -> RunRecord:
    """The record of a marker directory, checked before anything acts on it.

    Every field that drives an action (the cgroups ``cgroup.kill`` is written to and removed,
    the namespace whose members are killed, the init that is SIGKILLed) must be what no-docker
    itself writes for a run of that id (``check_record``); anything else is a ``CorruptMarker``,
    which ``end`` and the stale check refuse (125) without touching anything. run.json is
    opened without following a link, and must be a regular file of bounded size.
    """
    path = os.path.join(directory, RECORD)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as err:
        raise CorruptMarker(f"{directory}: no {RECORD}") from err
    except OSError as err:
        raise CorruptMarker(f"{path}: {err.strerror}") from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptMarker(f"{path}: not a regular file")
        data = os.read(fd, MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise CorruptMarker(f"{path}: larger than {MAX_RECORD_BYTES} bytes")
        record = RunRecord.from_json(from_json_text(data))  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise CorruptMarker(f"{path}: {err}") from err
    finally:
        os.close(fd)
    problem = check_record(record, os.path.basename(os.fspath(directory)))
    if problem:
        raise CorruptMarker(f"{path}: {problem}; not written by no-docker")
    return record


MAX_RECORD_BYTES = 1 << 20
KNOWN_STATES = (CREATED, SPAWNING, RUNNING, ENDING, NOT_PROVEN)


def check_record(record: RunRecord, dir_name: str, cgroup2_mounts: list[str] | None = None) -> str | None:
    """Why RECORD cannot be what no-docker wrote for the run in directory DIR_NAME, or None.

    The audit of run.json's fields (red-team round 2, A1):
    - ``run_id`` names the directory: a record cannot speak for another run;
    - ``cgroup``: only no-docker's own run cgroups, ``<cgroup2 mount>/.../no-docker/<run_id>``
      (v2) and ``/sys/fs/cgroup/pids/no-docker/<run_id>`` (v1 pids), normalized, not nested in
      another run's cgroup: ``cgroup.kill`` and ``rmdir`` go nowhere else;
    - ``ns_depth`` at least 1: the namespace whose members are killed lies below ours, never
      ours (depth 0 would make every process a member); ``ns_inode`` given with it;
    - ``init``/``launcher`` pids above 1, ``owner`` above 0 (nothing ever signals the owner,
      and a supervisor may be pid 1 of its pid namespace: a container's command, a CI job
      under ``unshare --pid``); ``end`` SIGKILLs the init only once it is
      shown to be pid 1 of the recorded namespace (``algorithm._init_check``);
    - ``state`` one we write, ``owner``/``boot_id``/``command``/``detail`` only decide "stale"
      or are shown (``runs`` shows them escaped).
    """
    from .cgroup import GROUP_DIR, V1_MEMORY_ROOT, V1_PIDS_ROOT

    if record.run_id != dir_name or not valid_run_id(record.run_id):
        return f"run_id {record.run_id!r} does not name its directory {dir_name!r}"
    if record.state not in KNOWN_STATES:
        return f"unknown state {record.state!r}"
    for name in ("ns_id", "ns_inode", "ns_depth"):
        value = getattr(record, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            return f"{name} {value!r} is not a namespace number"
    if (record.ns_inode is None) != (record.ns_depth is None):
        return "a namespace needs both ns_inode and ns_depth"
    if record.ns_depth is not None and record.ns_depth < 1:
        return f"ns_depth {record.ns_depth} is not a namespace below ours"
    for name in ("owner", "init", "launcher"):
        ident = getattr(record, name)
        if ident is not None and ident.pid < (1 if name == "owner" else 2):
            return f"{name} pid {ident.pid} is not a process of a run"
    cg = record.cgroup
    if cg is None:
        return None
    if not isinstance(cg, dict) or set(cg) - {"v2", "pids_v1", "memory_v1"}:
        return f"cgroup {cg!r} is not a run's cgroup record"
    leaf_tail = f"/{GROUP_DIR}/{record.run_id}"
    v1 = cg.get("pids_v1")
    if v1 is not None and v1 != f"{V1_PIDS_ROOT}{leaf_tail}":
        return f"cgroup {v1!r} is not no-docker's own pids cgroup for this run"
    memory = cg.get("memory_v1")
    # Below the supervisor's own v1 memory cgroup (cgroup.v1_memory_parent), never nested in
    # another run's: the same shape as the v2 leaf's.
    if memory is not None and (
            not isinstance(memory, str) or os.path.normpath(memory) != memory
            or not memory.endswith(leaf_tail) or not is_within(memory, V1_MEMORY_ROOT)
            or f"/{GROUP_DIR}/" in memory[: -len(leaf_tail)] + "/"):
        return f"cgroup {memory!r} is not no-docker's own memory cgroup for this run"
    v2 = cg.get("v2")
    if v2 is not None:
        if not isinstance(v2, str) or os.path.normpath(v2) != v2 or not v2.endswith(leaf_tail):
            return f"cgroup {v2!r} is not no-docker's own cgroup for this run"
        parent = v2[: -len(leaf_tail)]
        if f"/{GROUP_DIR}/" in parent + "/":
            return f"cgroup {v2!r} is nested in another run's cgroup"
        mounts = _cgroup2_mounts() if cgroup2_mounts is None else cgroup2_mounts
        if not any(is_within(parent, m) for m in mounts):
            return f"cgroup {v2!r} is not on a cgroup2 file system"
    return None


def _cgroup2_mounts() -> list[str]:
    from .cgroup import cgroup2_mounts

    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            return cgroup2_mounts(f.read())
    except OSError:
        return []


def list_markers(state: str | os.PathLike[str]) -> list[str]:
    """Marker directories (a symlink is never one: it would lead our removal elsewhere)."""
    try:
        with os.scandir(state) as entries:
            return sorted(entry.path for entry in entries
                          if valid_run_id(entry.name) and entry.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def remove_marker(directory: str | os.PathLike[str]) -> None:
    """Remove a marker directory (flat: run.json and perhaps a temporary file).

    It is first renamed to a dot name, which ``list_markers`` never lists: a concurrent run's
    stale check would otherwise see, between the unlink and the rmdir, a marker without its
    record and refuse to start ("no run.json"). A marker already gone is no error; one that
    cannot be removed (a read-only state dir) is NotProven naming it, and left in place."""
    directory = os.fspath(directory)
    parent, name = os.path.split(directory)
    try:
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
    except OSError as err:
        raise marker_error("remove the run marker", directory, err) from err


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


def own_pid_namespace() -> tuple[int | None, int | None]:
    """(NS_GET_ID, inode) of our own pid namespace; (None, None) when it cannot be read."""
    from .procfs import ProcfsError, ns_fd_id

    try:
        fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        return ns_fd_id(fd), os.fstat(fd).st_ino
    except (OSError, ProcfsError):
        return None, None
    finally:
        os.close(fd)


def owner_elsewhere(record: RunRecord, ours: tuple[int | None, int | None] | None = None) -> bool:
    """Was the run started by a supervisor in another pid namespace than ours?

    A state dir can be shared across pid namespaces (a CI container that shares /run or /tmp
    with its host). There the owner's pid is a number in *its* namespace: ours may show no such
    pid, or an unrelated process under it, so neither "gone" nor "alive" can be judged from
    here, and nothing of that run may be acted on (its init's pid is not ours either). Only a
    record that names its owner's namespace can be told; one that does not (written before
    no-docker recorded it) is judged as before."""
    if record.owner_ns_inode is None:
        return False
    ns_id, inode = own_pid_namespace() if ours is None else ours
    if record.owner_ns_id is not None and ns_id is not None:
        return record.owner_ns_id != ns_id
    return inode is None or record.owner_ns_inode != inode


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
