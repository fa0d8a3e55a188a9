"""P7 for stdio (isolation/stdio.py): which stdio sockets are relayed, which refuse the run,
and the relay itself on real pipes and sockets (no sandbox: the relay is the supervisor's)."""

from __future__ import annotations

import os
import socket
import threading

import pytest
from bounded import first_read
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.errors import NotProven
from no_docker.supervisor.isolation.stdio import (
    PASS,
    RELAY,
    Facts,
    Relay,
    peer_is_local_listener,
    plan,
    stdio_facts,
)

UNIX, INET, INET6 = socket.AF_UNIX, socket.AF_INET, socket.AF_INET6
STREAM, DGRAM, SEQPACKET = socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET


def sock(fd: int = 0, **kw: object) -> Facts:
    fields = {"socket": True, "identity": (1, 100 + fd), "sock_type": STREAM, "family": UNIX, "peer": ""}
    fields.update(kw)
    return Facts(fd, **fields)  # type: ignore[arg-type]


def test_no_socket_passes_unchanged():
    assert plan([Facts(0), Facts(1), Facts(2)]) == [PASS, PASS, PASS]


@pytest.mark.parametrize("facts, why", [
    (sock(peer=None), "not connected"),
    (sock(family=INET, peer=None), "not connected"),
    (sock(sock_type=DGRAM, family=INET, peer=None), "not a stream"),
    (sock(sock_type=DGRAM, peer=""), "not a stream"),  # a connected unix dgram pair re-connects
    (sock(sock_type=SEQPACKET), "not a stream"),
    (sock(listening=True, peer=None), "listening"),
    (sock(peer="/run/docker.sock"), "listener of this machine"),
    (sock(peer="\0containerd-shim"), "listener of this machine"),
    (sock(family=INET, peer=("127.0.0.1", 2375)), "listener of this machine"),
    (sock(family=INET6, peer=("::1", 2375, 0, 0)), "listener of this machine"),
    (sock(family=INET6, peer=("::ffff:127.0.0.1", 2375, 0, 0)), "listener of this machine"),
])
def test_sockets_that_can_reach_outside_refuse_the_run(facts, why):
    with pytest.raises(NotProven) as err:
        plan([facts, Facts(1), Facts(2)])
    assert err.value.prop == "P7" and why in err.value.detail and "fd 0" in err.value.detail
    assert "| no-docker run" in str(err.value)  # says what to do


@pytest.mark.parametrize("facts", [
    sock(peer=""),  # a socketpair (socat EXEC:, CI runners, ssh sessions)
    sock(peer=b""),
    sock(family=INET, peer=("192.0.2.7", 51234)),  # systemd Accept=yes / inetd, remote client
    sock(family=INET6, peer=("2001:db8::7", 51234, 0, 0)),
])
def test_connected_stream_sockets_are_relayed(facts):
    assert plan([facts, Facts(1), Facts(2)]) == [RELAY, PASS, PASS]


@given(st.lists(st.booleans(), min_size=3, max_size=3), st.sampled_from([STREAM, DGRAM, SEQPACKET]),
       st.sampled_from([None, "", "/x.sock", ("127.0.0.1", 1), ("198.51.100.1", 1)]), st.booleans())
def test_nothing_that_can_reach_outside_is_ever_relayed_or_passed(is_socket, sock_type, peer, listening):
    family = INET if isinstance(peer, tuple) else UNIX
    facts = [Facts(fd, is_socket[fd], (1, fd), sock_type, family, listening, peer) for fd in range(3)]
    try:
        actions = plan(facts)
    except NotProven:
        assert any(is_socket)
        return
    for f, action in zip(facts, actions, strict=True):
        assert action == (RELAY if f.socket else PASS)
        if f.socket:  # only a connected stream socket to no local listener
            assert f.sock_type == STREAM and f.peer is not None and not f.listening
            assert not peer_is_local_listener(f.family, f.peer)


def _relay_of(sockets: dict[int, socket.socket]) -> tuple[Relay, dict[int, int]]:
    """A Relay over SOCKETS placed at fds 0-2 of a Facts list (the real fds are elsewhere)."""
    facts = []
    for fd in range(3):
        if fd in sockets:
            st_ = os.fstat(sockets[fd].fileno())
            facts.append(Facts(fd, True, (st_.st_dev, st_.st_ino), STREAM, UNIX, False, ""))
        else:
            facts.append(Facts(fd))
    saved = {fd: os.dup(fd) for fd in sockets}
    for fd, s in sockets.items():
        os.dup2(s.fileno(), fd)
    try:
        relay = Relay(facts, plan(facts))
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
    return relay, {fd: relay.fds[fd] for fd in range(3)}


def test_relay_carries_stdin_and_one_pipe_for_stdout_and_stderr_of_one_socket():
    outside, given_in = socket.socketpair()
    out_outside, given_out = socket.socketpair()
    relay, fds = _relay_of({0: given_in, 1: given_out, 2: given_out})
    given_in.close()
    given_out.close()
    assert fds[1] == fds[2], "stdout and stderr of one socket share one pipe (their order is kept)"
    run_in, run_out = os.dup(fds[0]), os.dup(fds[1])
    relay.spawned()  # the supervisor's copies go; the "run" holds its own
    outside.sendall(b"ping\n")
    outside.shutdown(socket.SHUT_WR)
    got = b""
    while not got.endswith(b"\n"):
        got += first_read(run_in, 10, 64)
    assert got == b"ping\n" and first_read(run_in, 10, 64) == b"", "EOF follows the peer's"
    os.write(run_out, b"out\n")
    os.write(run_out, b"err\n")
    os.close(run_in)
    os.close(run_out)  # the run is gone
    relay.finish(5)
    received = b""
    out_outside.settimeout(5)
    while True:
        chunk = out_outside.recv(64)
        if not chunk:
            break
        received += chunk
    assert received == b"out\nerr\n"
    outside.close()
    out_outside.close()


def test_relay_stops_reading_stdin_when_the_run_ends():
    outside, given_in = socket.socketpair()
    relay, fds = _relay_of({0: given_in})
    given_in.close()
    relay.spawned()  # nobody ever writes to `outside`: finish must not wait for it
    done = threading.Event()
    threading.Thread(target=lambda: (relay.finish(5), done.set()), daemon=True).start()
    assert done.wait(5)
    outside.close()


def test_address_is_ours_knows_loopback_and_refuses_a_stranger():
    from no_docker.supervisor.isolation.stdio import address_is_ours

    assert address_is_ours(INET, "127.0.0.1")
    assert not address_is_ours(INET, "198.51.100.7")  # TEST-NET-2: on no interface here


def test_a_peer_at_an_address_of_ours_is_refused_whatever_the_address():
    # Through the host's own address, a local listener is as local as through 127.0.0.1.
    facts = [sock(0, family=INET, peer=("192.0.2.2", 2375), peer_is_ours=True), Facts(1), Facts(2)]
    with pytest.raises(NotProven) as info:
        plan(facts)
    assert info.value.prop == "P7"


def test_an_o_path_descriptor_of_a_socket_file_is_refused():
    # issue 24: found as a traceback (getsockopt: EBADF); connect(2) to /proc/self/fd/N reaches
    # what listens on that socket file, so it must not cross (no relay exists for a name)
    with pytest.raises(NotProven, match="P7: fd 1 is an O_PATH descriptor of a socket file"):
        plan([Facts(0), Facts(1, True, (1, 2), path_only=True), Facts(2)])


def test_stdio_facts_sees_an_o_path_socket(tmp_path):
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "s.sock"))
    saved = os.dup(0)
    try:
        fd = os.open(tmp_path / "s.sock", os.O_PATH)
        os.dup2(fd, 0)
        os.close(fd)
        facts = stdio_facts()
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        listener.close()
    assert facts[0].socket and facts[0].path_only
