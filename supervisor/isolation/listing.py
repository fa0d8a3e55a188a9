"""The outside view before a run starts: every bound unix socket and every listening TCP port.

The probe inside the sandbox tries each of these (P2, P3), so a socket that is missing from
this listing is a socket nobody tried. Hence the rule: a listing that cannot be read or parsed
refuses the run (exit 125), it never degrades to "nothing listed".

Pathname unix sockets are reachable across network namespaces (a socket file is found through
the file system, not the network stack; ``notes/isolation-anchors.md`` §1), but
``/proc/net/unix`` lists only the sockets of the reader's network namespace. So we read it once
per network namespace we can see, through ``/proc/PID/net/unix`` of one process in each.

Listening TCP ports come from sock_diag netlink (fast: the kernel walks only the listening
hash), or from ``/proc/net/tcp`` and ``tcp6`` where netlink is unavailable.

The parsers are small pure functions over bytes; ``collect()`` is the only code that touches
``/proc``, and it turns OSError into :class:`ListingError`.
"""

from __future__ import annotations

import os

from ..record import record

# Format of a /proc/net/unix line (net/unix/af_unix.c, unix_seq_show):
#   "%pK: %08X %08X %08X %04X %02X %5lu" then " " + path when the socket is bound.
# The inode is padded to width 5, so fields are not single-space separated. Parsed by hand
# rather than with `re`: importing re is a measurable part of `no-docker run -- true`.
_UNIX_HEADER = b"Num       RefCount Protocol Flags    Type St Inode Path"
_UNIX_WIDTHS = (8, 8, 8, 4, 2)  # RefCount Protocol Flags Type St
# __SO_ACCEPTCON: set on a socket that called listen() (include/linux/net.h).
_SO_ACCEPTCON = 0x00010000
# /proc/net/tcp{,6} (net/ipv4/tcp_ipv4.c get_tcp4_sock): "%4d: %08X:%04X %08X:%04X %02X ..."
_TCP_LISTEN = 0x0A
_HEX = frozenset(b"0123456789abcdefABCDEF")
_UPPER_HEX = frozenset(b"0123456789ABCDEF")


def _is_hex(field: bytes, width: int | None = None, *, upper: bool = True) -> bool:
    digits = _UPPER_HEX if upper else _HEX
    return bool(field) and (width is None or len(field) == width) and all(c in digits for c in field)


def split_unix_line(line: bytes) -> tuple[int, int, bytes | None] | None:
    """(flags, type, name or None) of one /proc/net/unix line, or None if it does not fit."""
    head, sep, rest = line.partition(b": ")
    if not sep or not _is_hex(head, upper=False):
        return None
    fields = rest.split(b" ", len(_UNIX_WIDTHS))
    if len(fields) != len(_UNIX_WIDTHS) + 1:
        return None
    for value, width in zip(fields, _UNIX_WIDTHS, strict=False):
        if not _is_hex(value, width):
            return None
    tail = fields[-1].lstrip(b" ")  # the inode, padded to width 5
    inode, space, name = tail.partition(b" ")
    if not inode.isdigit() or (space and not name):
        return None
    return int(fields[2], 16), int(fields[3], 16), (name if space else None)


def split_tcp_line(line: bytes) -> tuple[int, int] | None:
    """(local port, state) of one /proc/net/tcp{,6} line, or None if it does not fit."""
    fields = line.split()
    if len(fields) < 4 or not fields[0].endswith(b":") or not fields[0][:-1].isdigit():
        return None
    local, remote, state = fields[1], fields[2], fields[3]
    for address in (local, remote):
        host, colon, port = address.partition(b":")
        if not colon or len(host) not in (8, 32) or not _is_hex(host) or not _is_hex(port, 4):
            return None
    if not _is_hex(state, 2):
        return None
    return int(local.partition(b":")[2], 16), int(state, 16)


class ListingError(Exception):
    """The outside listing could not be read or parsed; the message says which file and why."""


@record
class UnixEntry:
    """One line of /proc/net/unix that names a bound socket."""

    name: str  # as the kernel prints it: "/abs/path", "rel/path" or "@abstract"
    listening: bool
    sock_type: int

    @property
    def abstract(self) -> bool:
        # The kernel prints abstract names with a leading '@' (and NULs as '@'). A relative
        # path that starts with '@' is indistinguishable; see docs/isolation.md, residual risks.
        return self.name.startswith("@")


@record
class Listing:
    """What listens outside, as handed to the probe (JSON-able)."""

    unix_paths: tuple[str, ...] = ()  # absolute pathnames, sorted, unique
    relative_paths: tuple[str, ...] = ()  # bound with a relative name: cannot be located
    abstract_names: tuple[str, ...] = ()  # without the leading '@'
    tcp_ports: tuple[int, ...] = ()
    netns_read: int = 0
    netns_unreadable: int = 0

    def to_json(self) -> dict:
        return {
            "unix_paths": list(self.unix_paths),
            "relative_paths": list(self.relative_paths),
            "abstract_names": list(self.abstract_names),
            "tcp_ports": list(self.tcp_ports),
            "netns_read": self.netns_read,
            "netns_unreadable": self.netns_unreadable,
        }


def parse_proc_net_unix(data: bytes, *, source: str = "/proc/net/unix",
                        names_may_hold_newlines: bool = False) -> list[UnixEntry]:
    """Parse /proc/net/unix; raise ListingError naming the first line that does not fit.

    NAMES_MAY_HOLD_NEWLINES (another network namespace, read here only because we may not
    enter it for a sock_diag dump): a line that does not fit, below a bound name, is taken for
    the rest of a name holding a newline (unix_seq_show prints it raw), which any process of
    that namespace can bind; it used to refuse every run of the user (issue 24). What this can
    cost is names, never sockets: every socket's line starts with its own fields, so none is
    lost; a name cut or glued is one that cannot be located, and like a relative name it is
    left to the connect mediation, which decides by the inode at each connect (P12); a
    binder's fake "line" inside its name adds an entry, which can only add a mask. The header
    and the first lines up to a bound name stay strict: a file in another format refuses."""
    lines = data.split(b"\n")
    if not lines or lines[0].rstrip() != _UNIX_HEADER:
        raise ListingError(f"{source}: unexpected header {lines[0][:80]!r}")
    entries: list[UnixEntry] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        parsed = split_unix_line(line)
        if parsed is None and names_may_hold_newlines and entries:
            entries[-1] = entries[-1].replace(name=entries[-1].name + "\n" + os.fsdecode(line))
            continue
        if parsed is None:
            raise ListingError(f"{source}:{number}: cannot parse {line[:120]!r}")
        flags, sock_type, raw_name = parsed
        if raw_name is None:
            continue  # unbound socket: nothing to find by name
        entries.append(UnixEntry(name=os.fsdecode(raw_name), listening=bool(flags & _SO_ACCEPTCON),
                                 sock_type=sock_type))
    return entries


def parse_proc_net_tcp(data: bytes, *, source: str = "/proc/net/tcp") -> list[int]:
    """Ports in LISTEN state in a /proc/net/tcp or tcp6 file (sorted, unique)."""
    lines = data.split(b"\n")
    header = lines[0].split() if lines else []
    if header[:4] not in ([b"sl", b"local_address", b"rem_address", b"st"],
                          [b"sl", b"local_address", b"remote_address", b"st"]):
        raise ListingError(f"{source}: unexpected header {lines[0][:80]!r}")
    ports = set()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parsed = split_tcp_line(line)
        if parsed is None:
            raise ListingError(f"{source}:{number}: cannot parse {line[:120]!r}")
        if parsed[1] == _TCP_LISTEN:
            ports.add(parsed[0])
    return sorted(ports)


def summarize(unix_entries: list[UnixEntry], tcp_ports: list[int], *, netns_read: int = 1,
              netns_unreadable: int = 0) -> Listing:
    """Fold parsed entries into a Listing.

    Every bound name counts, not only listening ones: a bound datagram socket accepts
    ``sendto`` (think ``/dev/log``), and the server end of an accepted connection repeats the
    listener's name, so including it costs nothing.
    """
    paths, relative, abstract = set(), set(), set()
    for entry in unix_entries:
        if entry.abstract:
            abstract.add(entry.name[1:])
        elif entry.name.startswith("/"):
            paths.add(entry.name)
        else:
            relative.add(entry.name)
    return Listing(
        unix_paths=tuple(sorted(paths)),
        relative_paths=tuple(sorted(relative)),
        abstract_names=tuple(sorted(abstract)),
        tcp_ports=tuple(sorted(set(tcp_ports))),
        netns_read=netns_read,
        netns_unreadable=netns_unreadable,
    )


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def other_netns_pids(proc: str, own_netns: str) -> tuple[dict[str, str], int]:
    """One pid per network namespace other than ours, and how many pids we could not inspect."""
    chosen: dict[str, str] = {own_netns: "self"}
    unreadable = 0
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            netns = os.readlink(f"{proc}/{name}/ns/net")
        except FileNotFoundError:
            continue  # exited while we looked
        except PermissionError:
            unreadable += 1  # another user's process: "every namespace you can read"
            continue
        except OSError:
            unreadable += 1
            continue
        chosen.setdefault(netns, name)
    del chosen[own_netns]
    return chosen, unreadable


_TCP_LISTEN_STATE = 10  # TCP_LISTEN; a listening unix socket shows the same state in sock_diag


def listening_tcp_ports_netlink() -> list[int]:
    """Listening TCP ports (IPv4 and IPv6) of our network namespace, through sock_diag: the
    kernel walks only the listening hash for a LISTEN-state dump, where reading /proc/net/tcp
    walks every TCP socket (measured: 1.5 ms minimum for a 4-line file here)."""
    from .sockdiag import open_diag

    with open_diag() as diag:
        return sorted({s.port for s in diag.tcp_listeners()})


def listening_tcp_ports(proc: str = "/proc") -> list[int]:
    """Listening TCP ports: sock_diag, or /proc/net/tcp{,6} where netlink is unavailable."""
    from .sockdiag import SockDiagError

    try:
        return listening_tcp_ports_netlink()
    except (OSError, SockDiagError):
        return _proc_tcp_ports(proc)  # e.g. a kernel without inet_diag: the slow, always-present way


def _proc_tcp_ports(proc: str) -> list[int]:
    ports = parse_proc_net_tcp(_read(f"{proc}/self/net/tcp"), source=f"{proc}/self/net/tcp")
    try:
        data6 = _read(f"{proc}/self/net/tcp6")
    except FileNotFoundError:
        return ports  # kernel without IPv6: nothing can listen there
    return sorted(set(ports + parse_proc_net_tcp(data6, source=f"{proc}/self/net/tcp6")))


def entries_from_diag(sockets: list) -> list[UnixEntry]:
    """UnixEntry of every bound socket of a sock_diag dump (pure). The kernel hands each name
    over whole (a length-prefixed attribute): a newline, invalid UTF-8 or all 108 bytes of
    ``sun_path`` come out exactly, and an abstract name is told apart by its leading NUL, not
    by the '@' /proc/net/unix prints (a relative path may start with '@' too)."""
    out = []
    for sock in sockets:
        name = sock.name
        if not name:
            continue  # unbound: nothing to find by name
        if name[:1] == b"\0":
            text = "@" + os.fsdecode(name[1:])
        else:
            text = os.fsdecode(name)
            if text.startswith("@"):
                text = "./" + text  # relative, and must not pass for an abstract name
        out.append(UnixEntry(name=text, listening=sock.state == _TCP_LISTEN_STATE, sock_type=sock.sock_type))
    return out


def _diag_entries(netns_fd: int | None) -> list[UnixEntry]:
    from .sockdiag import UDIAG_SHOW_NAME, open_diag

    with open_diag(netns_fd) as diag:
        return entries_from_diag(diag.unix_sockets(show=UDIAG_SHOW_NAME))


def collect(proc: str = "/proc") -> Listing:
    """Read the listing of this machine as the caller can see it; ListingError if unreadable.

    Unix sockets come from sock_diag, in our network namespace and in every other one we may
    enter (root): exact names, which no local user can make ambiguous (DESIGN §4 "The outside
    listing"). A namespace we may not enter (not root: setns needs CAP_SYS_ADMIN) is read from
    ``/proc/PID/net/unix`` as before, where an unparsable line still refuses the run."""
    from .sockdiag import SockDiagError

    try:
        own_netns = os.readlink(f"{proc}/self/ns/net")
        ports = listening_tcp_ports(proc) if proc == "/proc" else _proc_tcp_ports(proc)
        others, unreadable = other_netns_pids(proc, own_netns)
    except OSError as err:
        raise ListingError(f"cannot read the socket listing: {err}") from err
    try:
        entries = _diag_entries(None) if proc == "/proc" else parse_proc_net_unix(
            _read(f"{proc}/self/net/unix"), source=f"{proc}/self/net/unix")
    except (SockDiagError, OSError) as err:
        raise ListingError(f"cannot list the unix sockets: {err}") from err
    read = 1
    may_enter = proc == "/proc" and os.geteuid() == 0
    for pid in others.values():
        if may_enter:
            try:
                fd = os.open(f"{proc}/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            except (FileNotFoundError, ProcessLookupError):
                continue  # the process (and maybe its namespace) went away meanwhile
            except OSError:
                unreadable += 1
                continue
            try:
                entries += _diag_entries(fd)
                read += 1
                continue
            except SockDiagError:
                pass  # e.g. a namespace whose owner we have no capability in: /proc below
            finally:
                os.close(fd)
        source = f"{proc}/{pid}/net/unix"
        try:
            data = _read(source)
        except (FileNotFoundError, ProcessLookupError):
            continue
        except OSError:
            unreadable += 1
            continue
        entries += parse_proc_net_unix(data, source=source, names_may_hold_newlines=True)
        read += 1
    return summarize(entries, ports, netns_read=read, netns_unreadable=unreadable)
