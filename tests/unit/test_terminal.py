"""isolation/terminal.py's pure parts: the raw modes the caller's terminal gets while relayed,
the sane modes of a pty made in the background, the suspend character, where output goes."""

from __future__ import annotations

import termios

from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.isolation import terminal

IFLAG, OFLAG, CFLAG, LFLAG, ISPEED, OSPEED, CC = range(7)
flags = st.integers(min_value=0, max_value=2**32 - 1)
chars = st.lists(st.binary(min_size=1, max_size=1), min_size=termios.NCCS, max_size=termios.NCCS)
modes = st.builds(lambda i, o, c, ll, cc: [i, o, c, ll, termios.B38400, termios.B9600, cc],
                  flags, flags, flags, flags, chars)


@given(modes)
def test_raw_modes_are_cfmakeraw(attrs):
    before = [*attrs[:CC], list(attrs[CC])]
    raw = terminal.raw_modes(attrs)
    assert attrs == before  # a new list: the caller's saved modes stay as they were
    assert not raw[LFLAG] & (termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN | termios.ECHONL)
    assert not raw[IFLAG] & (termios.ICRNL | termios.IXON | termios.BRKINT | termios.ISTRIP | termios.INLCR
                             | termios.IGNCR | termios.IGNBRK | termios.PARMRK)
    assert not raw[OFLAG] & termios.OPOST
    assert raw[CFLAG] & termios.CSIZE == termios.CS8 and not raw[CFLAG] & termios.PARENB
    assert raw[CC][termios.VMIN] == 1 and raw[CC][termios.VTIME] == 0
    assert raw[ISPEED:OSPEED + 1] == attrs[ISPEED:OSPEED + 1]  # speeds untouched
    # Everything else is kept: only the bits cfmakeraw names change.
    assert raw[LFLAG] | (termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN
                         | termios.ECHONL) == attrs[LFLAG] | (termios.ECHO | termios.ICANON | termios.ISIG
                                                              | termios.IEXTEN | termios.ECHONL)
    assert terminal.raw_modes(raw) == raw  # idempotent


@given(modes)
def test_sane_modes_read_lines_echo_and_signal(attrs):
    sane = terminal.sane_modes(attrs)
    for bit in (termios.ICANON, termios.ECHO, termios.ISIG, termios.IEXTEN):
        assert sane[LFLAG] & bit
    assert sane[IFLAG] & termios.ICRNL and not sane[IFLAG] & (termios.INLCR | termios.IGNCR)
    assert sane[OFLAG] & termios.OPOST and sane[OFLAG] & termios.ONLCR
    assert sane[CC] == attrs[CC] and sane[CC] is not attrs[CC]


def _with(lflag: int, vsusp: bytes | int) -> list:
    cc = [b"\0"] * termios.NCCS
    cc[termios.VSUSP] = vsusp
    return [0, 0, 0, lflag, 0, 0, cc]


def test_suspend_char():
    assert terminal.suspend_char(_with(termios.ISIG, b"\x1a")) == b"\x1a"
    assert terminal.suspend_char(_with(termios.ISIG, 26)) == b"\x1a"  # VMIN/VTIME-style ints
    assert terminal.suspend_char(_with(termios.ISIG, b"\0")) is None  # _POSIX_VDISABLE
    assert terminal.suspend_char(_with(0, b"\x1a")) is None  # no signals from keys at all


def test_output_goes_to_stdout_then_stderr_then_stdin():
    assert terminal.output_fd([0, 1, 2]) == 1
    assert terminal.output_fd([0, 2]) == 2
    assert terminal.output_fd([0]) == 0
    assert terminal.output_fd([2]) == 2

