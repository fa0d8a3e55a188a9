"""sock_diag: pure parsers (hypothesis), and real dumps of this and another namespace."""

from __future__ import annotations

import ctypes
import os
import socket
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.isolation import sockdiag
from no_docker.supervisor.isolation import syscalls as _linux
from no_docker.supervisor.isolation.sockdiag import SockDiagError, UnixSocket


# --- builders for the property tests (the parsers' inverse) ----------------------------------
def unix_payload(sock: UnixSocket, raw_name: bytes | None) -> bytes:
    body = struct.pack("=BBBBIII", socket.AF_UNIX, sock.sock_type, sock.state, 0, sock.inode, 7, 9)
    if raw_name is not None:
        body += sockdiag.nlattr(sockdiag.UNIX_DIAG_NAME, raw_name)
    if sock.vfs is not None:
        body += sockdiag.nlattr(sockdiag.UNIX_DIAG_VFS, struct.pack("=II", sock.vfs[1], sock.vfs[0]))
    if sock.rqlen is not None:
        body += sockdiag.nlattr(sockdiag.UNIX_DIAG_RQLEN, struct.pack("=II", *sock.rqlen))
    return body


u32 = st.integers(0, 2**32 - 1)
paths = st.binary(min_size=1, max_size=108).filter(lambda b: b[0] != 0 and b"\0" not in b)
abstract = st.binary(max_size=107).map(lambda b: b"\0" + b)


@st.composite
def unix_sockets(draw: st.DrawFn) -> tuple[UnixSocket, bytes | None]:
    kind = draw(st.sampled_from(["path", "abstract", "unbound"]))
    if kind == "path":
        name = draw(paths)
        raw = name + b"\0"  # the kernel stores the NUL (unix_bind_bsd)
    elif kind == "abstract":
        name = raw = draw(abstract)
    else:
        name = raw = None
    vfs = (draw(u32), draw(u32)) if kind == "path" else None
    rqlen = draw(st.none() | st.tuples(u32, u32))
    sock = UnixSocket(inode=draw(u32), sock_type=draw(st.sampled_from([1, 2, 5])),
                      state=draw(st.integers(0, 255)), name=name, vfs=vfs, rqlen=rqlen)
    return sock, raw


@given(st.lists(unix_sockets(), max_size=8), st.integers(1, 2**32 - 1), st.booleans())
def test_unix_dump_round_trips(socks, seq, done):
    data = b"".join(sockdiag.nlmsg(sockdiag.SOCK_DIAG_BY_FAMILY, sockdiag.NLM_F_MULTI, seq,
                                   unix_payload(s, raw)) for s, raw in socks)
    if done:
        data += sockdiag.nlmsg(sockdiag.NLMSG_DONE, sockdiag.NLM_F_MULTI, seq, bytes(4))
    payloads, finished = sockdiag.parse_dump(data, seq)
    assert finished == done
    assert [sockdiag.parse_unix_msg(p) for p in payloads] == [s for s, _ in socks]


@given(st.lists(unix_sockets(), min_size=1, max_size=4), st.data())
def test_truncated_dump_is_an_error_or_a_prefix(socks, data):
    """A cut datagram either fails with SockDiagError or yields the messages before the cut
    (and done=False, so the collector reads on): never a socket that was not sent."""
    whole = b"".join(sockdiag.nlmsg(sockdiag.SOCK_DIAG_BY_FAMILY, 2, 1, unix_payload(s, raw))
                     for s, raw in socks)
    cut = data.draw(st.integers(1, len(whole) - 1))
    try:
        payloads, done = sockdiag.parse_dump(whole[:cut], 1)
        parsed = [sockdiag.parse_unix_msg(p) for p in payloads]
    except SockDiagError:
        return
    assert not done
    assert parsed == [s for s, _ in socks][:len(parsed)]


@given(st.binary(max_size=300))
def test_garbage_never_raises_anything_but_sockdiagerror(garbage):
    try:
        payloads, _ = sockdiag.parse_dump(garbage)
        for p in payloads:
            sockdiag.parse_unix_msg(p)
            sockdiag.parse_inet_msg(p)
    except SockDiagError:
        pass


def test_error_and_done_with_error_are_errors():
    err = sockdiag.nlmsg(sockdiag.NLMSG_ERROR, 0, 1, struct.pack("=i", -13) + bytes(16))
    with pytest.raises(SockDiagError, match="Permission denied"):
        sockdiag.parse_dump(err, 1)
    done = sockdiag.nlmsg(sockdiag.NLMSG_DONE, 2, 1, struct.pack("=i", -4))
    with pytest.raises(SockDiagError, match="dump ended"):
        sockdiag.parse_dump(done, 1)
    stale = sockdiag.nlmsg(sockdiag.NLMSG_DONE, 2, 5, bytes(4))
    with pytest.raises(SockDiagError, match="sequence 5"):
        sockdiag.parse_dump(stale, 1)


@given(st.integers(0, 2**12 - 1), st.integers(0, 2**20 - 1))
def test_kernel_dev_t_converts_like_makedev(major, minor):
    kdev = major << 20 | minor
    assert sockdiag.kdev_to_st_dev(kdev) == os.makedev(major, minor)
    assert sockdiag.st_dev_to_kdev(os.makedev(major, minor)) == kdev


# --- real dumps ------------------------------------------------------------------------------
def _bind_raw(sock: socket.socket, path: bytes) -> None:
    """bind with sun_path filled to the last byte (no NUL): Python's bind refuses 108 bytes."""
    addr = struct.pack("=H", socket.AF_UNIX) + path
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.bind(sock.fileno(), addr, len(addr)) == 0, os.strerror(ctypes.get_errno())


@pytest.fixture
def diag():
    with sockdiag.open_diag() as d:
        yield d


def test_hostile_names_come_out_exactly(diag, tmp_path):
    base = os.fsencode(tmp_path)
    names = [base + b"/new\nline.sock", base + b"/bad-\xff\xfe-utf8.sock", (base + b"/" + b"L" * 120)[:108]]
    socks = []
    try:
        for name in names:
            s = socket.socket(socket.AF_UNIX)
            socks.append(s)
            _bind_raw(s, name)
            s.listen()
        ab = socket.socket(socket.AF_UNIX)
        socks.append(ab)
        ab.bind(b"\0no-docker\nabstract\0with nul")
        listed = {u.name: u for u in diag.unix_sockets()}
        for name in names:
            assert name in listed, name
            st_ = os.stat(name)
            assert listed[name].file_id == (st_.st_dev, st_.st_ino)
            assert listed[name].state == sockdiag.TCP_LISTEN
        assert listed[b"\0no-docker\nabstract\0with nul"].abstract
        assert len(names[2]) == 108
    finally:
        for s in socks:
            s.close()


def test_vfs_dev_is_not_st_dev_on_a_block_device(diag, tmp_path):
    """On a file system with a non-zero major, the raw kernel dev_t differs from st_dev:
    the conversion is what makes them comparable (/tmp here is ext4 on 254:0)."""
    path = str(tmp_path / "s.sock")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
        st_ = os.stat(path)
        if os.major(st_.st_dev) == 0:
            pytest.skip(f"{tmp_path} is on an anonymous device: both encodings agree there")
        [entry] = [u for u in diag.unix_sockets() if u.name == os.fsencode(path)]
        assert entry.vfs[0] != st_.st_dev
        assert entry.file_id == (st_.st_dev, st_.st_ino)
        assert (st_.st_dev, st_.st_ino) in diag.bound_files()
    finally:
        s.close()


CLONE_NEWUSER = 0x10000000  # linux/sched.h


def test_another_namespace_is_dumped_from_inside_it(tmp_path):
    """A child in a fresh network namespace binds a socket; a DiagSocket made inside that
    namespace lists it (and its loopback listener), ours does not. As an ordinary user the
    child makes a user namespace too, as bwrap does for a run, and open_diag goes in the
    owner's way.

    Bounded both ways: each side closes its copies of the other's pipe ends, so a child that
    fails (an unshare refused) gives EOF at once, never a read that waits for ever; the child
    is killed if it has not ended in time."""
    from bounded import first_read, reap

    _linux.load()
    flags = _linux.CLONE_NEWNET | (0 if os.geteuid() == 0 else CLONE_NEWUSER)
    r, w = os.pipe()  # child -> parent: bound (or why not)
    r2, w2 = os.pipe()  # parent -> child: done (EOF)
    path = os.fsencode(tmp_path / "inner.sock")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.close(w2)
            try:
                _linux.unshare(flags)
            except OSError as err:
                os.write(w, f"unshare: {err.strerror}".encode())
                raise
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            s.listen()
            os.write(w, b"x")
            os.read(r2, 1)  # hold until the parent is done (EOF: it closed its end, or is gone)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    os.close(r2)
    try:
        said = first_read(r, timeout=10)
        if said.startswith(b"unshare:") and os.geteuid() != 0:
            pytest.skip(f"no user and network namespace for an ordinary user here ({said.decode()})")
        assert said == b"x", said
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            with sockdiag.open_diag(fd) as inner, sockdiag.open_diag() as outer:
                assert path in {u.name for u in inner.unix_sockets()}
                assert path not in {u.name for u in outer.unix_sockets()}
                assert inner.netns_cookie != outer.netns_cookie
                assert inner.tcp_listeners() == []
            # the setns thread is gone; this thread never left our namespace
            assert os.readlink("/proc/thread-self/ns/net") == os.readlink("/proc/self/ns/net")
        finally:
            os.close(fd)
    finally:
        os.close(w2)  # the child's go to end
        os.close(r)
        reap(pid, timeout=10)


def test_tcp_listeners_v4_and_v6(diag):
    a = socket.socket()
    b = socket.socket(socket.AF_INET6)
    try:
        a.bind(("127.0.0.1", 0))
        a.listen()
        b.bind(("::1", 0))
        b.listen()
        found = {(s.family, s.port, s.address) for s in diag.tcp_listeners()}
        assert (socket.AF_INET, a.getsockname()[1], socket.inet_aton("127.0.0.1")) in found
        assert (socket.AF_INET6, b.getsockname()[1], socket.inet_pton(socket.AF_INET6, "::1")) in found
    finally:
        a.close()
        b.close()


@given(st.lists(unix_sockets(), max_size=8), st.booleans())
def test_fast_bound_files_parser_agrees(socks, done):
    data = b"".join(sockdiag.nlmsg(sockdiag.SOCK_DIAG_BY_FAMILY, 2, 3, unix_payload(s, raw))
                    for s, raw in socks)
    if done:
        data += sockdiag.nlmsg(sockdiag.NLMSG_DONE, 2, 3, bytes(4))
    files, finished = sockdiag.parse_bound_files(data, 3)
    assert finished == done
    assert files == {s.file_id for s, _ in socks if s.vfs is not None}


@given(st.binary(max_size=300))
def test_fast_parser_garbage_is_sockdiagerror_only(garbage):
    try:
        sockdiag.parse_bound_files(garbage)
    except SockDiagError:
        pass
