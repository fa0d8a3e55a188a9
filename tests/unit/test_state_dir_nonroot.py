"""A newcomer without a login session (``su``, a CI container, a ``docker exec``-style shell: no
``XDG_RUNTIME_DIR``, no ``NO_DOCKER_STATE_DIR``): every command works, from a fresh shell of an
unprivileged user made with ``setpriv``, and the state dir is the private per-user fallback
``/tmp/no-docker-<uid>``, made 0700 and verified (issue 15 item 1). A squatter's dir or link
in its place is refused with 125 naming it.

The uid is one no other test uses (no passwd entry is needed), so runs of other sessions in
``/tmp/no-docker-65534`` can neither disturb nor be disturbed by this test.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from isolation_helpers import BWRAP, REPO
from nonroot import SYSTEM_PYTHON, skip_reason

_why = skip_reason(BWRAP)
if _why:
    pytest.skip(_why, allow_module_level=True)


@pytest.fixture
def user():
    """(uid, base): a fresh uid, a readable copy of the package, its own home and work dir."""
    uid = 61000 + int.from_bytes(os.urandom(2), "big") % 4000
    fallback = Path(f"/tmp/no-docker-{uid}")
    shutil.rmtree(fallback, ignore_errors=True)
    base = Path(tempfile.mkdtemp(prefix="no-docker-newcomer-"))
    try:
        for part in ("supervisor", "ci"):
            shutil.copytree(REPO / part, base / "pkg" / "no_docker" / part,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("home", "work"):
            (base / name).mkdir()
            os.chown(base / name, uid, uid)
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o755)
        yield uid, base
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if fallback.is_symlink():
            fallback.unlink()
        shutil.rmtree(fallback, ignore_errors=True)


def as_user(uid: int, base: Path, command: str) -> subprocess.CompletedProcess:
    """COMMAND (no-docker's arguments) in a fresh shell of UID: a login-less environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(base / "pkg")}
    script = f"cd {base / 'work'} && exec {SYSTEM_PYTHON} -m no_docker.supervisor.cli {command}"
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           "env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", script],
                          capture_output=True, text=True, timeout=120)


def test_every_command_works_without_a_login_session(user):
    uid, base = user
    expected = {  # command -> exit status
        "--version": 0, "--help": 0, "run -- id -u": 0, "run --quiet -- sh -c 'echo made > f'": 0,
        "runs": 0, "runs --json": 0, "end --all": 0, "stanza": 0,
        "check": 125,  # outside a run: "not proven" is the right answer, not a state-dir error
    }
    for command, status in expected.items():
        result = as_user(uid, base, command)
        assert result.returncode == status, f"{command}: {result.stdout}{result.stderr}"
        assert "state dir" not in result.stderr, f"{command}: {result.stderr}"
    assert as_user(uid, base, "run --quiet -- id -u").stdout.split() == [str(uid)]
    assert (base / "work" / "f").read_text() == "made\n"
    fallback = os.lstat(f"/tmp/no-docker-{uid}")
    assert fallback.st_uid == uid and fallback.st_mode & 0o7777 == 0o700
    assert os.listdir(f"/tmp/no-docker-{uid}") == []  # every run ended and removed its marker


@pytest.fixture
def guarded(user):
    """(uid, base, run): USER's commands in an outer guard, whose own pid namespace shows no
    other user's pid namespaces (what the ending must settle is another slice of issue 24) and
    whose /tmp is a private tmpfs, sticky and open to all as the host's, that the test may fill
    with squatters' entries without touching the machine's."""
    from no_docker.supervisor.proving.outer_guard import OuterGuard

    uid, base = user
    with OuterGuard(base / "canary.jsonl", share=[base]) as guard:
        guard.run(["chmod", "1777", "/tmp"], check=True)

        def run(who: int, command: str, **extra: str) -> subprocess.CompletedProcess:
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
                   "PYTHONPATH": str(base / "pkg"), **extra}
            done = guard.run(["setpriv", f"--reuid={who}", f"--regid={who}", "--clear-groups", "env", "-i",
                              *(f"{k}={v}" for k, v in env.items()), SYSTEM_PYTHON, "-m",
                              "no_docker.supervisor.cli", *shlex.split(command)], cwd=base / "work")
            out, err = (b.decode(errors="replace") for b in (done.stdout, done.stderr))
            return subprocess.CompletedProcess(done.args, done.returncode, out, err)

        def sh(script: str) -> str:
            return guard.run(["sh", "-c", script], check=True).stdout.decode()

        yield uid, base, run, sh


def test_a_squatted_fallback_locks_nobody_out(guarded):
    """Anyone may create ``/tmp/no-docker-<uid>`` first (measured before issue 24: every run of
    that user exit 125, ``state dir: ... belongs to uid N, not to us``). Another uid's dir, a
    link, a file there: each run works, in ``/tmp/no-docker-<uid>.1``, made ours and 0700; the
    squatter leaving moves nothing (``runs`` and ``end`` find the same markers). The user's own
    dir that others can read is still refused: that one only the user can fix."""
    uid, base, run, sh = guarded
    fallback, second = f"/tmp/no-docker-{uid}", f"/tmp/no-docker-{uid}.1"
    squatter = f"setpriv --reuid={uid + 1} --regid={uid + 1} --clear-groups"
    for squat in (f"{squatter} mkdir -m 700 {fallback}",
                  f"rmdir {fallback} && {squatter} ln -s {base / 'home'} {fallback}",  # a dir the user owns
                  f"rm {fallback} && {squatter} touch {fallback}"):
        sh(squat)
        result = run(uid, "run --quiet -- id -u")
        assert result.returncode == 0, (squat, result.stderr)
        assert result.stdout.split() == [str(uid)] and "state dir" not in result.stderr
        assert sh(f"stat -c '%u %a' {second}").split() == [str(uid), "700"], squat
    assert os.listdir(base / "home") == []  # the link was never followed
    sh(f"rm {fallback}")
    for command in ("run --quiet -- true", "runs", "end --all"):
        result = run(uid, command)
        assert result.returncode == 0, (command, result.stderr)
    assert sh(f"ls -d /tmp/no-docker-{uid}*").split() == [second], "the squatter left and the state dir moved"
    sh(f"rmdir {second} && mkdir -m 755 {fallback} && chown {uid}:{uid} {fallback}")
    result = run(uid, "runs")  # the user's own, but others can read it: only the user can fix it
    assert result.returncode == 125, result.stderr
    assert f"state dir: {fallback} is mode 755" in result.stderr and f"chmod 700 {fallback}" in result.stderr


def test_xdg_runtime_dir_shared_by_two_users_locks_neither_out(guarded):
    """``XDG_RUNTIME_DIR=/tmp`` (set by hand, or by a CI image) made ``/tmp/no-docker`` the state
    dir of every such user: the first one's, and every other's run refused on it (measured: 125,
    ``belongs to uid N``). A runtime dir that is not the user's own and private is ignored (the
    XDG spec's MUST), and each user gets the per-user default."""
    uid, _base, run, sh = guarded
    for who in (uid + 1, uid):
        result = run(who, "run --quiet -- id -u", XDG_RUNTIME_DIR="/tmp")
        assert result.returncode == 0, (who, result.stderr)
        assert result.stdout.split() == [str(who)], result.stdout
    made = sh(f"stat -c %u /tmp/no-docker-{uid} /tmp/no-docker-{uid + 1}; "
              "test -e /tmp/no-docker || echo none")
    assert made.split() == [str(uid), str(uid + 1), "none"], made
