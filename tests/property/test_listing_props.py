"""Hypothesis: whatever the kernel prints, the parsers give back what it meant, or refuse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.isolation.listing import (
    ListingError,
    parse_proc_net_tcp,
    parse_proc_net_unix,
    summarize,
)

HEADER = b"Num       RefCount Protocol Flags    Type St Inode Path\n"
# A bound name as unix_seq_show prints it: no newline (it would end the line), no NUL.
names = st.one_of(
    st.none(),
    st.text(st.characters(blacklist_characters="\n\0", blacklist_categories=("Cs",)), min_size=1, max_size=40)
    .map(lambda s: "/" + s),
    st.text(st.characters(blacklist_characters="\n\0", blacklist_categories=("Cs",)), min_size=1, max_size=20)
    .map(lambda s: "@" + s),
)
entries = st.tuples(st.booleans(), st.sampled_from([1, 2, 5]), st.integers(0, 10**9), names)


def render(entry: tuple[bool, int, int, str | None]) -> bytes:
    listening, sock_type, inode, name = entry
    flags = 0x10000 if listening else 0
    line = f"0000000000000000: 00000002 00000000 {flags:08X} {sock_type:04X} 01 {inode:5d}"
    if name is not None:
        line += " " + name
    return line.encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(entries, max_size=30))
def test_rendered_lines_parse_back(rows):
    data = HEADER + b"".join(render(r) + b"\n" for r in rows)
    parsed = parse_proc_net_unix(data)
    expected = [(r[0], r[1], r[3]) for r in rows if r[3] is not None]
    assert [(e.listening, e.sock_type, e.name) for e in parsed] == expected, data
    listing = summarize(parsed, [])
    for _, _, name in expected:
        if name.startswith("/"):
            assert name in listing.unix_paths
        else:
            assert name[1:] in listing.abstract_names


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_is_parsed_or_refused_never_a_crash(junk):
    try:
        parse_proc_net_unix(HEADER + junk)
    except ListingError as err:
        assert "/proc/net/unix" in str(err)
    try:
        parse_proc_net_tcp(b"  sl  local_address rem_address   st\n" + junk)
    except ListingError as err:
        assert "/proc/net/tcp" in str(err)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 65535), st.integers(1, 12), st.booleans()), max_size=30))
def test_tcp_listening_ports(rows):
    lines = [b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout"]
    for i, (port, state, v6) in enumerate(rows):
        host = "0" * 32 if v6 else "0100007F"
        lines.append(f"{i:4d}: {host}:{port:04X} {host}:0000 {state:02X} 00000000:00000000 0 0".encode())
    ports = parse_proc_net_tcp(b"\n".join(lines) + b"\n")
    assert ports == sorted({port for port, state, _ in rows if state == 0x0A})


@given(names=st.lists(st.one_of(st.none(), st.binary(min_size=1, max_size=108)), max_size=20),
       states=st.integers(0, 12))
@settings(max_examples=300, deadline=None)
def test_diag_names_come_out_exactly(names, states):
    # sock_diag hands each name over whole: every byte survives into the listing (a newline,
    # invalid UTF-8, 108 bytes), abstract names are told apart by their NUL, never by '@'.
    import os

    from no_docker.supervisor.isolation.listing import entries_from_diag, summarize
    from no_docker.supervisor.isolation.sockdiag import UnixSocket

    sockets = [UnixSocket(inode=i, sock_type=1, state=states, name=n) for i, n in enumerate(names)]
    listing = summarize(entries_from_diag(sockets), [])
    bound = [n for n in names if n]
    assert {os.fsencode(p) for p in listing.unix_paths} == {n for n in bound if n[:1] == b"/"}
    assert {os.fsencode(a) for a in listing.abstract_names} == {n[1:] for n in bound if n[:1] == b"\0"}
    relative = {n for n in bound if n[:1] not in (b"/", b"\0")}
    assert {os.fsencode(r).removeprefix(b"./") if os.fsencode(r).startswith(b"./@") else os.fsencode(r)
            for r in listing.relative_paths} == relative


hostile_names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1,
                        max_size=40).map(lambda s: "/" + s)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([1, 2, 5]), st.integers(0, 10**9),
                          st.one_of(names, hostile_names)), min_size=1, max_size=20))
def test_newlines_in_another_namespaces_names_lose_no_socket(rows):
    """Names as any process of a namespace we may not enter can bind them (newlines included),
    read with ``names_may_hold_newlines``: never refused once a name is read, and every name
    without a newline comes out exactly, wherever the hostile ones are."""
    rows = [(True, 1, 1, "/first")] + rows  # the strict part (lines before any name) is tested apart
    data = HEADER + b"".join(render(r) + b"\n" for r in rows)
    parsed = {e.name for e in parse_proc_net_unix(data, names_may_hold_newlines=True)}
    plain = {r[3] for r in rows if r[3] is not None and "\n" not in r[3]}
    assert plain <= parsed, (sorted(plain - parsed), data)
