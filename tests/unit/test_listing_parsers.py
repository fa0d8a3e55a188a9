"""The /proc/net/unix and /proc/net/tcp parsers: pure functions over bytes."""

from __future__ import annotations

import pytest
from no_docker.supervisor.isolation.listing import (
    ListingError,
    collect,
    parse_proc_net_tcp,
    parse_proc_net_unix,
    summarize,
)

UNIX = (
    b"Num       RefCount Protocol Flags    Type St Inode Path\n"
    b"0000000000000000: 00000002 00000000 00010000 0001 01 31337 /run/docker.sock\n"
    b"0000000000000000: 00000003 00000000 00000000 0001 03 31338 /run/docker.sock\n"
    b"0000000000000000: 00000002 00000000 00010000 0001 01  1234 @/tmp/.X11-unix/X0\n"
    b"0000000000000000: 00000002 00000000 00000000 0002 01  1235 /dev/log\n"
    b"0000000000000000: 00000002 00000000 00010000 0001 01  1236 /tmp/with space/e.sock\n"
    b"0000000000000000: 00000002 00000000 00010000 0001 01  1237 relative.sock\n"
    b"ffff8881e3e0a400: 00000003 00000000 00000000 0001 03  1599\n"
)
TCP = (
    b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    b"   0: 0100007F:094F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1603 1 0\n"
    b"   1: 0100007F:D2B4 0100007F:094F 01 00000000:00000000 00:00000000 00000000     0        0 1604 1 0\n"
)
TCP6 = (
    b"  sl  local_address                         remote_address                        st tx_queue\n"
    b"   0: 00000000000000000000000001000000:0948 00000000000000000000000000000000:0000 0A 00000000:0\n"
)


def test_unix_entries_names_and_listening():
    entries = parse_proc_net_unix(UNIX)
    names = [e.name for e in entries]
    assert names == ["/run/docker.sock", "/run/docker.sock", "@/tmp/.X11-unix/X0", "/dev/log",
                     "/tmp/with space/e.sock", "relative.sock"]
    assert [e.listening for e in entries] == [True, False, True, False, True, True]
    assert entries[3].sock_type == 2  # a bound datagram socket (sendto works): listed too


def test_summary_sorts_kinds():
    listing = summarize(parse_proc_net_unix(UNIX), parse_proc_net_tcp(TCP))
    assert listing.unix_paths == ("/dev/log", "/run/docker.sock", "/tmp/with space/e.sock")
    assert listing.abstract_names == ("/tmp/.X11-unix/X0",)
    assert listing.relative_paths == ("relative.sock",)
    assert listing.tcp_ports == (2383,)


def test_tcp_and_tcp6_listening_ports_only():
    assert parse_proc_net_tcp(TCP) == [0x094F]  # the connected 0xD2B4 is not listening
    assert parse_proc_net_tcp(TCP6, source="/proc/net/tcp6") == [0x0948]


@pytest.mark.parametrize("data, where", [
    (b"", "header"),
    (b"Num RefCount\n", "header"),
    (UNIX + b"garbage line\n", ":9:"),
    (UNIX.replace(b"00010000 0001 01 31337", b"0001000X 0001 01 31337"), ":2:"),
    (UNIX.replace(b"01 31337 /run", b"01 31a37 /run"), ":2:"),
    (UNIX.replace(b"0000000000000000: 00000002", b"0000000000000000 00000002", 1), ":2:"),
])
def test_malformed_unix_listing_is_an_error_naming_the_line(data, where):
    with pytest.raises(ListingError, match=where):
        parse_proc_net_unix(data, source="/proc/net/unix")


LINE = b"0000000000000000: 00000002 00000000 00010000 0001 01  %d %s\n"


def test_another_namespaces_names_may_hold_newlines_and_cost_no_socket():
    """/proc/PID/net/unix of a namespace we may not enter (issue 24): a name holding newlines
    (any process there can bind one) is glued back to the line it started on, a fake "line" in
    it is one more entry; every socket's own line is still read. Our own reads stay strict."""
    hostile = b"/srv/engine\nnewline.sock\n" + LINE % (9, b"/srv/fake.sock") + b"tail\n\nend"
    data = UNIX + LINE % (7, hostile) + LINE % (8, b"/srv/after.sock")
    with pytest.raises(ListingError, match="cannot parse"):
        parse_proc_net_unix(data)
    names = [e.name for e in parse_proc_net_unix(data, names_may_hold_newlines=True)]
    assert names == [e.name for e in parse_proc_net_unix(UNIX)] + [
        "/srv/engine\nnewline.sock", "/srv/fake.sock\ntail\nend", "/srv/after.sock"]
    # Not our format: the header, or a first line before any name, still refuses.
    header = UNIX.split(b"\n")[0] + b"\n"
    for bad in (b"Num RefCount\n" + LINE % (1, b"/x"), header + b"garbage\n" + LINE % (1, b"/x")):
        with pytest.raises(ListingError):
            parse_proc_net_unix(bad, names_may_hold_newlines=True)


@pytest.mark.parametrize("data", [b"", b"nonsense\n", TCP + b"   2: zz\n",
                                  TCP.replace(b"0100007F:094F", b"0100007F094F")])
def test_malformed_tcp_listing_is_an_error(data):
    with pytest.raises(ListingError):
        parse_proc_net_tcp(data)


def test_collect_reads_this_machine_and_sees_our_own_listener(tmp_path):
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "mine.sock"))
    sock.listen(1)
    try:
        listing = collect()
    finally:
        sock.close()
    assert str(tmp_path / "mine.sock") in listing.unix_paths
    assert listing.netns_read >= 1


def test_collect_from_a_procfs_it_cannot_read_is_an_error(tmp_path):
    with pytest.raises(ListingError, match="cannot read"):
        collect(proc=str(tmp_path))


def test_collect_from_a_malformed_procfs_is_an_error(tmp_path):
    (tmp_path / "self" / "ns").mkdir(parents=True)
    (tmp_path / "self" / "net").mkdir()
    (tmp_path / "self" / "ns" / "net").symlink_to("net:[1]")
    (tmp_path / "self" / "net" / "unix").write_bytes(UNIX + b"\x00broken\n")
    (tmp_path / "self" / "net" / "tcp").write_bytes(TCP)
    with pytest.raises(ListingError, match="cannot parse"):
        collect(proc=str(tmp_path))


def test_netlink_and_proc_agree_on_a_real_listener():
    import socket

    from no_docker.supervisor.isolation.listing import _proc_tcp_ports, listening_tcp_ports_netlink

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        port = sock.getsockname()[1]
        fast, slow = listening_tcp_ports_netlink(), _proc_tcp_ports("/proc")
    finally:
        sock.close()
    # Other listeners on this shared machine come and go between the two reads: compare ours.
    assert port in fast and port in slow
