"""Run a bash text against recording stubs, and hold what ran against the lint's prediction.

The stubs stand first on PATH in a private directory: ``docker`` (and the other engine CLIs),
``nc`` and ``socat`` record their argv (and, for the raw clients, every byte they read on
stdin: what a real nc would send), ``python3`` records a pinned helper's argv. None of them
connects anywhere: a real engine is never reached, whatever the text does.

``compare`` is the differential check of issue 27: for a text the lint accepted, every engine
command line, raw client's bytes and helper call that bash (and dash, for ``sh -c``) really ran
must be one the lint predicted (``lint.lint_model``), an opaque part of a prediction standing
for any text. The other direction (predicted but not run) is no error: the lint checks both
branches of an if, the body of a function never called.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from no_docker.mutants.lint import Opaque, Shared, Val

ENGINE_STUBS = ("docker", "podman", "nerdctl", "kubectl")
RAW_STUBS = ("nc", "socat")
# argv NUL-separated into its own file (the order of the records does not matter: compared as sets)
_RECORD_ARGV = 'f=$(mktemp "$NO_DOCKER_REC/{name}.XXXXXX")\nprintf \'%s\\0\' "$@" > "$f"\n'
# the engine variables a command prefix may set (lint_rules.PREFIX_VARIABLES), as NAME=VALUE\0
_RECORD_ENV = ('for v in DOCKER_HOST CONTAINER_HOST DOCKER_CONFIG DOCKER_CONTEXT; do\n'
               '  [ "${!v+set}" ] && printf \'%s=%s\\0\' "$v" "${!v}"\ndone > "$f.env"\n')
STUB = {
    "engine": "#!/bin/bash\n" + _RECORD_ARGV + _RECORD_ENV + "exit 0\n",
    "raw": "#!/bin/bash\n" + _RECORD_ARGV + 'cat > "$f.stdin"\nexit 0\n',
    # python3 -I -S - ARGS <<'HELPER': the helper's arguments are what follows "-"
    "python": "#!/bin/bash\n" + _RECORD_ARGV + 'cat > /dev/null\nexit 0\n',
}


@dataclass
class Ran:
    """What the stubs recorded."""

    engine: list[list[str]] = field(default_factory=list)
    engine_env: list[dict[str, str]] = field(default_factory=list)  # the engine variables each got
    raw: list[tuple[str, list[str], bytes]] = field(default_factory=list)
    helpers: list[list[str]] = field(default_factory=list)
    status: int | None = None


def stub_dir(base: Path) -> Path:
    bin_dir = base / "bin"
    bin_dir.mkdir()
    for name in ENGINE_STUBS:
        (bin_dir / name).write_text(STUB["engine"].replace("{name}", name))
    for name in RAW_STUBS:
        (bin_dir / name).write_text(STUB["raw"].replace("{name}", name))
    (bin_dir / "python3").write_text(STUB["python"].replace("{name}", "python3"))
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def run_recorded(text: bytes, base: Path, timeout: float = 10.0) -> Ran:
    """Run TEXT with bash in BASE (its own work dir, HOME and stubs); what the stubs saw."""
    bin_dir = stub_dir(base)
    rec = base / "rec"
    rec.mkdir()
    work = base / "work"
    work.mkdir()
    script = base / "program.sh"
    script.write_bytes(text)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work), "NO_DOCKER_REC": str(rec),
           "LC_ALL": "C"}
    proc = subprocess.Popen(["bash", str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        # the program's own session only (background jobs included): nothing else is ours
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
    ran = Ran(status=status)
    for f in sorted(rec.iterdir()):
        if f.name.endswith((".stdin", ".env")):
            continue
        argv = f.read_bytes().split(b"\0")[:-1]
        words = [w.decode("utf-8", "surrogateescape") for w in argv]
        tool = f.name.split(".")[0]
        if tool in ENGINE_STUBS:
            ran.engine.append([tool, *words])
            env_file = Path(f"{f}.env")
            pairs = env_file.read_bytes().split(b"\0")[:-1] if env_file.exists() else []
            ran.engine_env.append(dict(p.decode("utf-8", "surrogateescape").split("=", 1) for p in pairs))
        elif tool in RAW_STUBS:
            stdin = Path(f"{f}.stdin")
            ran.raw.append((tool, words, stdin.read_bytes() if stdin.exists() else b""))
        else:
            ran.helpers.append(words[words.index("-") + 1:] if "-" in words else words)
    return ran


class TcpRecorder:
    """A loopback listener that records every byte of every connection (bash's own /dev/tcp
    writes have no stub to record them): ``with TcpRecorder() as rec: ... rec.port ... rec.got``."""

    def __init__(self) -> None:
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.got: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.got.append(data)

    def wait_for(self, count: int, timeout: float) -> list[bytes]:
        """The connections recorded so far, once there are ``count`` (or ``timeout`` passed)."""
        deadline = time.monotonic() + timeout
        while len(self.got) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.got)

    def __enter__(self) -> TcpRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.server.close()


def pattern(vals: tuple[Val, ...]) -> re.Pattern[str]:
    """A predicted command line as a regex over NUL-joined words: opaque parts match any text."""
    words = []
    for v in vals:
        words.append("".join(re.escape(p) if isinstance(p, str) else "[^\0]*" for p in v.parts))
    return re.compile("\0".join(words), re.S)


def matches(vals: tuple[Val, ...], argv: list[str]) -> bool:
    if any(v.split for v in vals):
        return False  # never predicted one word for a value that may split
    return len(vals) == len(argv) and pattern(vals).fullmatch("\0".join(argv)) is not None


def env_matches(predicted: dict[str, Val], got: dict[str, str]) -> bool:
    return set(predicted) == set(got) and all(matches((predicted[k],), [got[k]]) for k in got)


def compare(model: Shared, ran: Ran) -> list[str]:
    """What ran that the lint did not predict, one line each ([] when it predicted everything)."""
    problems = []
    for argv, env in zip(ran.engine, ran.engine_env, strict=True):
        # a stub is found by name on PATH: the prediction's argv[0] may be /usr/bin/docker. The
        # run's environment has none of the engine variables: each one the engine got must be
        # one the prediction's command prefix set, with the predicted value.
        predicted = list(zip(model.engine_calls, model.engine_envs, strict=True))
        if not any(matches((Val((Path(p[0].text).name,)),) + p[1:], argv) and env_matches(penv, env)
                   for p, penv in predicted if p and p[0].exact):
            shown = [([v.shown for v in p], {k: v.shown for k, v in e.items()}) for p, e in predicted]
            problems.append(f"engine command not predicted: {argv!r} with {env!r}; predicted {shown!r}")
    for tool, argv, data in ran.raw:
        if not any(name == tool and matches(args, argv) and data == sent.encode("utf-8", "surrogateescape")
                   for name, args, sent in model.raw_sends):
            problems.append(f"raw client not predicted: {tool} {argv!r} sent {data!r}; predicted "
                            f"{[(n, [v.shown for v in a], s) for n, a, s in model.raw_sends]!r}")
    for argv in ran.helpers:
        if not any(matches(args, argv) for _, args, in model.helper_calls):
            problems.append(f"helper call not predicted: {argv!r}; predicted "
                            f"{[[v.shown for v in a] for _, a in model.helper_calls]!r}")
    return problems


__all__ = ["Opaque", "Ran", "compare", "matches", "run_recorded"]
