"""Issue 27's six lint bypasses: each is first shown doing damage in real bash (or dash, for
``sh -c``) against recording stubs, never an engine, and then must be refused by the lint.

The stubs (tests/mutants_recording.py) stand first on PATH: ``docker`` and ``nc`` record their
argv and what they read, connecting nowhere. The raw-socket helper is run for real, against a
unix socket this test listens on.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mutants_recording import run_recorded
from no_docker.mutants import pins
from no_docker.mutants.lint import lint_source

REPO = Path(__file__).resolve().parents[2]
RAWSOCK = REPO / "mutants" / "helpers" / "rawsock.py"
HASHES = pins.helper_hashes()
CRLF_ROUTE = "x HTTP/1.1\r\nHost: d\r\n\r\nDELETE /containers/db?force=1"

# name -> (payload, what bash really runs or sends that the old lint did not see, reason code)
BYPASSES = {
    "background-assignment": (
        "opt=-l &\nwait\ndocker $opt rm inspect -f web db\n",
        ("engine", ["docker", "rm", "inspect", "-f", "web", "db"]), "dynamic-engine-subcommand"),
    "bare-local-dynamic-scope": (
        "opt=-l\ng() { docker $opt rmi inspect alpine:latest; }\nf() { local opt; g; }\nf\n",
        ("engine", ["docker", "rmi", "inspect", "alpine:latest"]), "dynamic-engine-subcommand"),
    "newline-in-double-quotes": (
        'bash -c "# note\ndocker rm -f web db"\n',
        ("engine", ["docker", "rm", "-f", "web", "db"]), "destructive-engine-command"),
    "newline-in-printf-format": (
        # printf escapes where the old lint looked, literal CR LF where it dropped the bytes
        'printf "GET /_ping HTTP/1.1\\r\\nHost: d\r\n\r\n'
        'DELETE /containers/db HTTP/1.1\r\nHost: d\\r\\n\\r\\n" '
        "| nc -U /run/docker.sock\n",
        ("raw", b"DELETE /containers/db HTTP/1.1"), "network-input-unprovable"),
    "dash-echo-decodes": (
        "sh -c \"echo 'GET /_ping HTTP/1.1\r\nHost: d\r\nX-No-Docker-Route: a\\0015\\0012\\0015\\0012"
        "POST /containers/web/kill HTTP/1.1\r\nHost: d\r\n\r' | nc -U /run/docker.sock\"\n",
        ("raw", b"\r\n\r\nPOST /containers/web/kill"), "unsupported"),
}


@pytest.mark.parametrize("case", sorted(BYPASSES))
def test_bypass_does_damage_in_bash_and_the_lint_refuses_it(case, tmp_path):
    text, (kind, damage), code = BYPASSES[case]
    ran = run_recorded(text.encode(), tmp_path)
    if kind == "engine":
        assert damage in ran.engine, f"{case}: bash did not run {damage}: {ran}"
    else:
        assert any(damage in data for _, _, data in ran.raw), f"{case}: nc never got {damage!r}: {ran}"
    findings = lint_source(text, f"{case}.sh", HASHES)
    assert findings, f"{case}: ACCEPTED, and bash ran the destructive command above"
    assert any(f.code == code for f in findings), [str(f) for f in findings]


def helper_payload(route_words: str) -> str:
    return ("rawsock() {\n  timeout -k 1 3 python3 -I -S - \"$@\" <<'NO_DOCKER_HELPER'\n"
            + RAWSOCK.read_text() + "NO_DOCKER_HELPER\n}\n"
            + f"rawsock --route {route_words} --unix /run/docker.sock --proto http\n")


@pytest.mark.parametrize("route, accepted", [
    ("raw-python-socket", True),
    ("$'x HTTP/1.1\\r\\nHost: d\\r\\n\\r\\nDELETE /containers/db?force=1'", False),
    ("'a b'", False), ("\"$HOME\"", False), ("''", False), ("'-x'", False),
    ("r --route twice", False),
])
def test_lint_checks_the_raw_socket_helpers_arguments(route, accepted):
    findings = lint_source(helper_payload(route), "helper.sh", HASHES)
    assert (findings == []) is accepted, [str(f) for f in findings]
    if not accepted:
        assert {f.code for f in findings} == {"python-not-pinned-helper"}, [str(f) for f in findings]


def test_lint_checks_helper_arguments_given_directly():
    text = ("python3 -I -S - --route $'x\\r\\nDELETE /x' --unix /run/docker.sock <<'NO_DOCKER_HELPER'\n"
            + RAWSOCK.read_text() + "NO_DOCKER_HELPER\n")
    assert any(f.code == "python-not-pinned-helper" for f in lint_source(text, "h.sh", HASHES))


def listen_once(path: Path) -> tuple[socket.socket, list[bytes], threading.Thread]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(10)
    got: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data or len(got) == 0 and not data.endswith(b"\r\n\r\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            got.append(data)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, got, thread


def run_helper(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", str(RAWSOCK), *args], capture_output=True, text=True,
                          timeout=20)


def test_the_helper_itself_refuses_a_route_with_crlf(tmp_path):
    sock = tmp_path / "engine.sock"
    server, got, thread = listen_once(sock)
    try:
        done = run_helper("--route", CRLF_ROUTE, "--unix", str(sock))
        assert done.returncode == 2, done.stdout + done.stderr
        assert "usage" in done.stdout
    finally:
        # close() does not wake an accept() blocked in another thread (it waited out its 10 s);
        # shutdown() of a listening socket does, with EINVAL (Linux).
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(10)
    assert got == [], f"the helper sent {got!r}"


def test_the_helper_sends_one_request_for_a_plain_route(tmp_path):
    sock = tmp_path / "engine.sock"
    server, got, thread = listen_once(sock)
    try:
        done = run_helper("--route", "raw-python-socket", "--unix", str(sock))
    finally:
        thread.join(10)
        server.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(got) == 1 and got[0].count(b"\r\n\r\n") == 1
    assert got[0].startswith(b"GET /_ping?route=raw-python-socket HTTP/1.1\r\n")


@pytest.mark.parametrize("args", [
    ("--route", "a", "--route", "b", "--unix", "/x"),       # given twice: which one is sent?
    ("--route", "a", "--unix", "/x", "--bogus", "1"),       # an option it does not know
    ("--route", "a", "--unix", "/x\r\n"),                   # a control character in a value
    ("--route", "-a", "--unix", "/x"), ("--route", "a/b", "--unix", "/x"),
])
def test_the_helper_refuses_malformed_arguments(args):
    done = run_helper(*args)
    assert done.returncode == 2, done.stdout + done.stderr


DOCKERPY = REPO / "mutants" / "helpers" / "dockerpy_route.py"


@pytest.mark.parametrize("args, accepted", [("route-1", True), ("$'a\\r\\nb'", False), ("a b", False),
                                            ('"$HOME"', False), ("", False)])
def test_lint_checks_the_docker_py_helpers_argument(args, accepted):
    text = ("dockerpy_route() {\n  python3 -I - \"$@\" <<'NO_DOCKER_HELPER'\n" + DOCKERPY.read_text()
            + "NO_DOCKER_HELPER\n}\n" + f"dockerpy_route {args}\n")
    findings = lint_source(text, "dockerpy.sh", HASHES)
    assert (findings == []) is accepted, [str(f) for f in findings]


# sh -c text is dash's: the subset there is smaller (docs/mutants.md, "sh -c is dash")
@pytest.mark.parametrize("text, accepted", [
    ("sh -c 'docker ps --filter label=x'", True),
    ("sh -c 'out=`docker ps`'", True),
    ("sh -c 'printf \"%s\\n\" x'", True),
    ("sh -c 'printf '\\''%s\\\"'\\'' x'", False),   # dash's printf keeps the backslash of \"
    ("sh -c 'echo a\\\\0101'", False),              # dash's echo decodes \0NNN
    ("sh -c \"docker ps \\$'-a'\"", False),          # $'...' is bash's
    ("sh -c '[[ -e x ]] && docker ps'", False),
    ("sh -c 'docker ps &>/dev/null'", False),       # & then > in dash
    ("sh -c 'docker ps 2>&1'", True),
    ("dash -c 'echo a\\\\nb'", False),
    ("zsh -c 'docker ps'", False), ("ksh -c 'docker ps'", False),
    ("sh -c 'cat <(docker ps)'", False),
    ("bash -c 'echo a\\\\0101'", True),             # bash's echo prints it as it is
])
def test_sh_c_text_is_linted_as_dash(text, accepted):
    findings = lint_source(text + "\n", "sh.sh", HASHES)
    assert (findings == []) is accepted, [str(f) for f in findings]
