"""P8 for a terminal: the run gets a pty of its own, which no-docker relays.

Why: when stdio is the caller's terminal, the run holds that terminal itself. ``ioctl(TIOCSWINSZ)``
from inside makes the kernel send SIGWINCH to the terminal's foreground process group (the
caller's shell, outside the run), and a ``tcsetattr`` (echo off, raw mode) outlives the run
(red-team finding, issue 16 C.9). A new session stops ``TIOCSTI``, not these.

So, as ``sudo``'s ``use_pty`` and ``script`` do: when any of fds 0-2 is a terminal, the
supervisor opens a pty pair (modes and window size copied from the caller's terminal) and the
run gets the slave where the caller's stdio was a terminal; stdio that is not a terminal stays
as it is. The probe makes the slave the controlling terminal of the command's session inside
(probe.py, P8), so what the run does to its terminal — window size, modes, ``TIOCSTI``, job
control — acts on its own pty and on its own processes only. Nothing is restored by hand on the
run's behalf: the caller's terminal is only ever changed by this module, which puts it in raw
mode while it relays input and puts back exactly the modes it found.

The relay:

* output: everything the run writes to the pty goes to the caller's terminal, until the run's
  side is closed (every process of the run is gone); what is left is read after the ending;
* input (only when fd 0 is a terminal and no-docker is its foreground job): the caller's
  terminal is in raw mode from the moment the probe lets the command start (before that a
  Ctrl-C is the supervisor's, and ends the run with 130); every byte goes to the pty, whose
  line discipline turns Ctrl-C into SIGINT for the run's foreground job, as a terminal would;
* Ctrl-Z (the caller's suspend character) is not passed on: the supervisor puts the caller's
  terminal back and stops its own job, so the shell gets its prompt (``fg`` resumes the relay,
  in raw mode again). The run itself goes on; its output waits in the pty once the pty's buffer
  is full. A stopped run would have no one to continue it: no key reaches a stopped process;
* in the background (``&``, or ``bg`` after Ctrl-Z) the caller's terminal is left alone and no
  key is read (reading would stop the job with SIGTTIN); a shell's ``fg`` sends no signal to a
  running job, so a watcher thread looks at the terminal's foreground job every 0.2 s, only
  while the job is in the background, and the relay takes the keys again once it is ``fg``;
* window size: SIGWINCH on the caller's side is read from the caller's terminal and set on the
  master, which signals the run's foreground job only.

Relayed from the supervisor's poll loop (``Run.wait``), not from a thread: the caller's terminal
modes change on Ctrl-Z, on SIGCONT and at the end; all of that, and the signal handlers that
trigger it, happen in the main thread, so the restore at the end can never race a thread
putting the terminal back in raw mode.
"""

from __future__ import annotations

# _signal, not signal: the wrapper module imports enum (run.py's start-up budget).
import _signal as signal
import errno
import fcntl
import os
import select
import termios
import threading

from ..errors import NotProven

READ_SIZE = 65536
INPUT_HIGH = 65536  # input not yet taken by the pty: stop reading the caller's terminal
FOREGROUND_POLL = 0.2  # seconds, while in the background: how soon `fg` gives the run the keys
DRAIN_LIMIT = 1 << 26  # after the ending; bounded: an ending not proven may leave a writer
_IFLAG, _OFLAG, _CFLAG, _LFLAG, _ISPEED, _OSPEED, _CC = range(7)
_WINSZ = b"\0" * 8  # struct winsize: 4 unsigned shorts


def raw_modes(attrs: list) -> list:
    """``cfmakeraw(3)`` of a ``termios.tcgetattr`` list (pure; a new list)."""
    new = [*attrs[:_CC], list(attrs[_CC])]
    new[_IFLAG] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR
                     | termios.IGNCR | termios.ICRNL | termios.IXON)
    new[_OFLAG] &= ~termios.OPOST
    new[_LFLAG] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    new[_CFLAG] &= ~(termios.CSIZE | termios.PARENB)
    new[_CFLAG] |= termios.CS8
    new[_CC][termios.VMIN] = 1
    new[_CC][termios.VTIME] = 0
    return new


def sane_modes(attrs: list) -> list:
    """ATTRS with canonical input, echo, signals, CR->NL and output processing on, as
    ``stty sane`` would have them (pure; a new list)."""
    new = [*attrs[:_CC], list(attrs[_CC])]
    new[_IFLAG] |= termios.ICRNL | termios.BRKINT
    new[_IFLAG] &= ~(termios.INLCR | termios.IGNCR)
    new[_OFLAG] |= termios.OPOST | termios.ONLCR
    new[_LFLAG] |= (termios.ICANON | termios.ISIG | termios.IEXTEN | termios.ECHO | termios.ECHOE
                    | termios.ECHOK | termios.ECHOCTL | termios.ECHOKE)
    return new


def suspend_char(attrs: list) -> bytes | None:
    """The character that would stop the caller's job (VSUSP), or None when the caller's
    terminal has none (ISIG off, or VSUSP disabled) (pure)."""
    if not attrs[_LFLAG] & termios.ISIG:
        return None
    char = attrs[_CC][termios.VSUSP]
    if isinstance(char, int):
        char = bytes([char])
    return None if char in (b"", b"\0") else char


def output_fd(ttys: list[int]) -> int:
    """Where the run's terminal output goes: the caller's stdout if it is a terminal, else its
    stderr, else its stdin (a terminal is normally open for reading and writing) (pure)."""
    return next(fd for fd in (1, 2, 0) if fd in ttys)


class Relay:
    """One pty for the run, relayed to the caller's terminal; :meth:`close` puts it all back."""

    def __init__(self, ttys: list[int], stdio: tuple[int, int, int] = (0, 1, 2)) -> None:
        self.term = 0 if 0 in ttys else ttys[0]  # the caller's terminal: modes, size, raw mode
        self.input = 0 in ttys
        self.out = output_fd(ttys)
        modes = termios.tcgetattr(self.term)
        if not self._foreground():
            # A job started in the background may find the shell's line-editing modes (no
            # echo, no canonical input, no CR->NL): give the run ordinary ones instead.
            modes = sane_modes(modes)
        self.saved: list | None = None  # the caller's modes when we took the terminal (raw)
        self.suspend: bytes | None = None
        self.raw = False  # the caller's terminal is in raw mode (ours)
        self.reading = False  # input from the caller is relayed
        self.started = False  # the command may read: input is wanted (take_input)
        self.to_run = bytearray()
        self.poller: select.poll | None = None
        self._flags = {"winch": False, "cont": False, "tstp": False}
        self._previous: dict[int, object] = {}
        self._watch: _ForegroundWatch | None = None
        self.master, slave = os.openpty()
        self.slave: int | None = slave
        self.master_open = True
        try:
            termios.tcsetattr(slave, termios.TCSANOW, modes)
            self._copy_size(slave)
            os.set_blocking(self.master, False)
        except BaseException:
            self.close()
            raise
        self.fds = tuple(slave if fd in ttys else stdio[fd] for fd in range(3))
        self.rdev = os.fstat(slave).st_rdev  # the run's own pty: the only terminal it may hold (P8)

    # -- what Run calls ------------------------------------------------------------------
    def register(self, poller: select.poll) -> None:
        """The sandbox is started: drop our copy of the slave (its end is then the run's
        alone), watch the master, and handle SIGWINCH/SIGTSTP/SIGCONT (after the spawn: a
        handler installed before it would not be, but SIG_IGN would be inherited)."""
        if self.slave is not None:
            os.close(self.slave)
            self.slave = None
        self.poller = poller
        poller.register(self.master, select.POLLIN)
        for sig, name in ((signal.SIGWINCH, "winch"), (signal.SIGCONT, "cont"), (signal.SIGTSTP, "tstp")):
            self._previous[sig] = signal.signal(sig, self._recorder(name))
        # A restore from the background (the job was stopped and put in the background while
        # raw) must not stop us again; the command never inherits this (it is started already).
        self._previous[signal.SIGTTOU] = signal.signal(signal.SIGTTOU, signal.SIG_IGN)

    def take_input(self) -> None:
        """The command may start: from now on the caller's keys are the run's."""
        self.started = True
        self._sync()

    def on_events(self, events: dict[int, int]) -> None:
        """One turn of the poll loop (EVENTS: fd -> poll events)."""
        flags = self._flags
        if flags["tstp"]:
            flags["tstp"] = False
            self._stop_job()
        if flags["cont"]:
            flags["cont"] = False
            self._sync()
        if flags["winch"]:
            flags["winch"] = False
            self._copy_size(self.master)
        if self.master_open and self.master in events:
            if events[self.master] & select.POLLOUT:
                self._feed()
            if events[self.master] & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self._pump(limit=READ_SIZE)
        if self.reading and 0 in events:
            self._read_input(events[0])
        if self._watch is not None and self._watch.read_fd in events:
            self._sync()  # the watcher saw us in the foreground (or ended)
        self._update()

    def close(self) -> None:
        """After the ending: the rest of the run's output, then the caller's terminal exactly
        as it was, the handlers as they were. Every error path comes through here."""
        try:
            if self.slave is not None:
                os.close(self.slave)
                self.slave = None
            if self.master_open:
                self._pump(limit=DRAIN_LIMIT)  # every process of the run is gone: read to EIO
        finally:
            self._unwatch()
            self._cooked()
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous = {}
            if self.master >= 0:
                os.close(self.master)
                self.master = -1
            self.master_open = False

    # -- the relay -----------------------------------------------------------------------
    def _recorder(self, name: str):  # noqa: ANN202 - a signal handler
        def record(_signum: int, _frame: object) -> None:
            self._flags[name] = True  # the wakeup fd (run._Signals) wakes the poll loop
        return record

    def _pump(self, limit: int) -> None:
        """Master -> the caller's terminal: what is there, LIMIT bytes at most."""
        got = 0
        while got < limit:
            try:
                chunk = os.read(self.master, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:  # EIO: the run's side is closed everywhere
                chunk = b""
            if not chunk:
                self._master_closed()
                return
            got += len(chunk)
            _write_all(self.out, chunk)

    def _master_closed(self) -> None:
        if self.master_open and self.poller is not None:
            try:
                self.poller.unregister(self.master)
            except KeyError:
                pass
        self.master_open = False

    def _read_input(self, event: int) -> None:
        try:
            data = os.read(0, READ_SIZE) if event & select.POLLIN else b""
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the caller's terminal hung up (SIGHUP ends the run anyway)
            self._stop_reading()
            return
        if self.suspend is not None and self.suspend in data:
            before, _, after = data.partition(self.suspend)
            self.to_run += before
            self._stop_job()
            self.to_run += after
        else:
            self.to_run += data
        self._feed()

    def _feed(self) -> None:
        while self.to_run and self.master_open:
            try:
                n = os.write(self.master, self.to_run)
            except BlockingIOError:
                return
            except OSError:
                self.to_run.clear()
                return
            del self.to_run[:n]

    def _update(self) -> None:
        """What the poller watches: the master for output (and for room, when input waits);
        the caller's terminal while input is relayed and the pty takes it."""
        if self.poller is None:
            return
        if self.master_open:
            self.poller.modify(self.master, select.POLLIN | (select.POLLOUT if self.to_run else 0))
        want = self.reading and len(self.to_run) < INPUT_HIGH
        try:
            if want:
                self.poller.register(0, select.POLLIN)
            else:
                self.poller.unregister(0)
        except KeyError:
            pass

    def _stop_reading(self) -> None:
        self.reading = False
        self._update()

    # -- the caller's terminal -------------------------------------------------------------
    def _foreground(self) -> bool:
        """Our job is the terminal's foreground one, or the terminal is not our controlling
        terminal at all (ENOTTY: no job control applies, a read never stops us)."""
        try:
            return os.tcgetpgrp(self.term) == os.getpgrp()
        except OSError as err:
            return err.errno == errno.ENOTTY

    def _sync(self) -> None:
        """Raw and reading while we are the terminal's foreground job and the command runs;
        the caller's own modes otherwise (stopped, or put in the background)."""
        if self.input and self.started and self._foreground():
            self._unwatch()
            if not self.raw:
                try:
                    saved = termios.tcgetattr(self.term)  # what the caller has now: put back exactly
                    termios.tcsetattr(self.term, termios.TCSADRAIN, raw_modes(saved))
                except termios.error:
                    return
                self.saved, self.suspend, self.raw = saved, suspend_char(saved), True
            self.reading = True
            self._copy_size(self.master)  # it may have changed while we were stopped
        else:
            self._cooked()
            self.reading = False
            if self.input and self.started and self._watch is None and self.poller is not None:
                self._watch = _ForegroundWatch(self.term)
                self.poller.register(self._watch.read_fd, select.POLLIN)
        self._update()

    def _unwatch(self) -> None:
        if self._watch is not None:
            if self.poller is not None:
                try:
                    self.poller.unregister(self._watch.read_fd)
                except KeyError:
                    pass
            self._watch.stop()
            self._watch = None

    def _cooked(self) -> None:
        if self.raw and self.saved is not None:
            try:
                termios.tcsetattr(self.term, termios.TCSADRAIN, self.saved)
            except termios.error:
                pass  # hung up: nothing left to restore
            self.raw = False

    def _stop_job(self) -> None:
        """Ctrl-Z: the caller's terminal back as it was, our job stopped (as the terminal
        would have done); on ``fg``, raw again. An orphaned job is not stopped (the kernel
        drops the signal): the relay just goes on."""
        self._cooked()
        previous = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(0, signal.SIGTSTP)
        finally:
            signal.signal(signal.SIGTSTP, previous)
        self._flags["tstp"] = False
        self._sync()

    def _copy_size(self, target: int) -> None:
        if target < 0:
            return
        try:
            size = fcntl.ioctl(self.term, termios.TIOCGWINSZ, _WINSZ)
            if size != _WINSZ:
                fcntl.ioctl(target, termios.TIOCSWINSZ, size)
        except OSError:
            pass


class _ForegroundWatch:
    """Says (a byte on :attr:`read_fd`) when the caller's terminal has our job in the foreground.
    Only reads the terminal's foreground process group: every change of the terminal stays in
    the main thread. Signals are blocked here, so they all go to the main thread."""

    def __init__(self, term: int) -> None:
        self.term = term
        self.read_fd, self._write_fd = os.pipe()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="no-docker-terminal")
        self._thread.start()

    def _run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while not self._stop.wait(FOREGROUND_POLL):
            try:
                if os.tcgetpgrp(self.term) != os.getpgrp():
                    continue
            except OSError:
                return  # hung up: SIGHUP ends the run; nothing to wait for
            os.write(self._write_fd, b"f")
            return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * FOREGROUND_POLL)
        os.close(self.read_fd)
        os.close(self._write_fd)


def _write_all(fd: int, data: bytes) -> None:
    """All of DATA to the caller's terminal. Its fd may be non-blocking (it is the caller's open
    file: we never change its flags), so wait for room; give up only if it cannot be written."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
            continue
        except OSError as err:
            if err.errno == errno.EINTR:
                continue
            return  # EIO/EBADF: the caller's terminal is gone or not writable
        view = view[n:]


def open_relay(ttys: list[int], stdio: tuple[int, int, int] = (0, 1, 2)) -> Relay:
    """The pty relay for TTYS (the fds among 0-2 that are terminals; ``Run.start`` asks
    ``os.isatty`` only, and imports this module only when one is);
    NotProven (P8) when no pty can be had: the run would hold the caller's terminal."""
    try:
        return Relay(ttys, stdio)
    except (OSError, termios.error) as err:
        raise NotProven("P8", f"cannot open a pty for the run's terminal ({err})",
                        "give the run stdio that is not a terminal (e.g. `< /dev/null 2>&1 | cat`)") from err
