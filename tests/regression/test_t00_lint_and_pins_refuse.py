"""T-00: the lint rejects every payload that is not provably read-only, and a tampered payload
(hash mismatch) is refused by verify and apply.

Issue 27's rules are here too: an assignment in the background or hidden by a bare `local` is
no constant, the newlines and CRs inside double quotes count, `sh -c` text is read as dash
reads it, and a pinned helper's arguments are checked (a route id with CR LF is refused).

Real components: the installed `no-docker mutants` CLI in a subprocess (the same interpreter,
so a weakened copy's code is what runs), real files, the repository's real pins.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import pins

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = REPO / "mutants" / "payloads" / "reach-engine.sh"
PAYLOAD_NAME = "mutants/payloads/reach-engine.sh"

# One payload per way a mutant could do damage; each must be rejected with this reason.
NOT_READ_ONLY = {
    "rmi": ("docker rmi -f app:latest", "destructive-engine-command"),
    "prune": ("docker system prune -af --volumes", "destructive-engine-command"),
    "variable": ("d=docker; $d rm -f db", "destructive-engine-command"),
    "quoted": ('"dock"er container rm db', "destructive-engine-command"),
    "compose": ("docker compose down -v", "destructive-engine-command"),
    "podman": ("podman system prune -af", "destructive-engine-command"),
    "ctr": ("ctr images rm docker.io/library/x:1", "destructive-engine-command"),
    "kubectl": ("kubectl delete ns default", "destructive-engine-command"),
    "bash-c": ("bash -c 'docker rm -f db'", "destructive-engine-command"),
    "eval": ('eval "$CMD"', "eval-non-constant"),
    "eval-decoded": ('eval "$(echo ZG9ja2VyIHJtIHg= | base64 -d)"', "destructive-command"),
    "pipe-to-bash": ("printf 'docker rm x' | bash", "shell-reads-stdin"),
    "xargs": ("echo db | xargs docker rm", "destructive-engine-command"),
    "curl-delete": ("curl -q -X DELETE --unix-socket /run/docker.sock http://d/containers/db",
                    "curl-method-not-read-only"),
    "curl-body": ("curl -q -d @- --unix-socket /run/docker.sock http://d/containers/create", "curl-upload"),
    "python": ("python3 -c 'import docker; docker.from_env().images.prune()'", "python-not-pinned-helper"),
    "bashrc": ("echo 'docker rm -f db' >> ~/.bashrc", "write-outside-run-dir"),
    "rm": ("rm -rf ./build", "destructive-command"),
    # issue 27: bash runs `docker rm inspect -f web db` (opt is set in a background subshell)
    "background-assignment": ("opt=-l & docker $opt rm inspect -f web db", "dynamic-engine-subcommand"),
    # `local opt` (no value) hides the caller's opt from g: bash runs `docker rmi inspect alpine`
    "bare-local": ("opt=-l; g() { docker $opt rmi inspect alpine; }; f() { local opt; g; }; f",
                   "dynamic-engine-subcommand"),
    "newline-in-double-quotes": ('bash -c "# note\ndocker rm -f web db"', "destructive-engine-command"),
    # dash's echo decodes \0015\0012: CR LF, and a second request on the socket
    "dash-echo": ("sh -c \"echo 'GET /_ping HTTP/1.1\r\nHost: d\r\n"
                  "X-No-Docker-Route: a\\0015\\0012\\0015\\0012"
                  "POST /containers/web/kill HTTP/1.1\r\nHost: d\r\n\r' | nc -U /run/docker.sock\"",
                  "unsupported"),
}
# A pinned helper with arguments it must refuse: the finding is on the call's line.
RAWSOCK = (REPO / "mutants" / "helpers" / "rawsock.py").read_text()
HELPER_CALLS = {
    "rawsock-crlf-route": ("rawsock --route $'x HTTP/1.1\\r\\n\\r\\nDELETE /containers/db?force=1' "
                           "--unix /run/docker.sock"),
    "rawsock-route-twice": "rawsock --route a --unix /run/docker.sock --route b",
}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "mutants", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(NOT_READ_ONLY))
def test_lint_rejects_non_read_only_payload(tmp_path, case):
    line, reason = NOT_READ_ONLY[case]
    path = tmp_path / f"{case}.sh"
    path.write_text(f"#!/usr/bin/env bash\n# route: x (network) a mutant\n{line}\n")
    done = cli("lint", str(path))
    assert done.returncode == 1, f"{case}: accepted\n{done.stdout}{done.stderr}"
    assert f"{path}:3:" in done.stdout and f": {reason}:" in done.stdout, done.stdout


@pytest.mark.parametrize("case", sorted(HELPER_CALLS))
def test_lint_rejects_a_pinned_helper_with_bad_arguments(tmp_path, case):
    text = ("#!/usr/bin/env bash\n# route: x (network) a mutant\nrawsock() {\n"
            "  python3 -I -S - \"$@\" <<'NO_DOCKER_HELPER'\n" + RAWSOCK + "NO_DOCKER_HELPER\n}\n")
    line = text.count("\n") + 1
    path = tmp_path / f"{case}.sh"
    path.write_text(text + HELPER_CALLS[case] + "\n")
    done = cli("lint", str(path))
    assert done.returncode == 1, f"{case}: accepted\n{done.stdout}{done.stderr}"
    assert f"{path}:{line}:" in done.stdout and ": python-not-pinned-helper:" in done.stdout, done.stdout


def test_lint_accepts_the_pinned_payload():
    done = cli("lint", str(PAYLOAD))
    assert done.returncode == 0, done.stdout


@pytest.fixture
def tampered(tmp_path):
    """A copy of the pinned payload with one harmless-looking byte changed."""
    copy = tmp_path / "reach-engine.sh"
    copy.write_bytes(PAYLOAD.read_bytes().replace(b"limit=3", b"limit=4", 1))
    return copy


def test_exact_copy_verifies(tmp_path):
    copy = tmp_path / "reach-engine.sh"
    shutil.copyfile(PAYLOAD, copy)
    pins.verify_copy(copy, PAYLOAD_NAME)


def test_tampered_copy_is_refused_by_verify(tampered):
    with pytest.raises(pins.PinError, match="does not match the pin"):
        pins.verify_copy(tampered, PAYLOAD_NAME)


def test_tampered_tree_is_refused_by_verify_all(tmp_path, tampered):
    root = tmp_path / "tree"
    for name in pins.load_pins():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, root / name)
    assert all(c.ok for c in pins.verify_all(root=root))
    shutil.copyfile(tampered, root / PAYLOAD_NAME)
    bad = [c.name for c in pins.verify_all(root=root) if not c.ok]
    assert bad == [PAYLOAD_NAME]


def test_tampered_payload_is_refused_by_apply(tmp_path, tampered):
    target = tmp_path / "t.sh"
    target.write_text("#!/usr/bin/env bash\n# no-docker: mutant here\necho target\n")
    out = tmp_path / "mutant.sh"
    done = cli("apply", str(tampered), str(target), "--out", str(out), "--name", PAYLOAD_NAME)
    assert done.returncode == 1
    assert "does not match the pin" in done.stderr
    assert not out.exists(), "a refused apply must write nothing"
