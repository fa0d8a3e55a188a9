"""The outer guard itself: it hides the host, brings lo up, lets only the canary answer, and
leaves nothing behind. Real namespaces, real sockets; the pure parts get their own tests."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from bounded import readline
from no_docker.supervisor.proving import outer_guard as og

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDER = REPO / "tests" / "regression" / "placeholder_canary.py"

needs_unshare = pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("nsenter") is None,
    reason="no unshare/nsenter (apt-get install util-linux)",
)


def canary_prefix() -> list[str]:
    """The real canary once it exists, else the stdlib stand-in with the same contract."""
    if (REPO / "canary" / "__main__.py").exists():
        return og.default_canary()
    return [sys.executable, str(PLACEHOLDER)]


def _mountinfo() -> list[str]:
    return sorted(line.split(" ", 4)[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())


# --------------------------------------------------------------------------- pure parts


def test_layout_points_every_engine_variable_at_the_canary():
    layout = og.Layout(root="/tmp/g", uid=1000)
    env = layout.env({"PATH": "/bin", "DOCKER_CONTEXT": "prod", "SSH_AUTH_SOCK": "/x"})
    assert env["HOME"] == "/tmp/g/home"
    assert env["XDG_RUNTIME_DIR"] == "/run/user/1000"
    assert env["DOCKER_HOST"] == "unix:///run/docker.sock"
    assert env["CONTAINER_HOST"] == "unix:///run/podman/podman.sock"
    assert "DOCKER_CONTEXT" not in env and "SSH_AUTH_SOCK" not in env
    assert "/tmp/g/home/.docker/run/docker.sock" in layout.unix_paths()
    assert "/run/user/1000/podman/podman.sock" in layout.unix_paths()
    files = layout.docker_files()
    config = json.loads(files["/tmp/g/home/.docker/config.json"])
    (meta_path,) = [p for p in files if p.endswith("meta.json")]
    meta = json.loads(files[meta_path])
    assert config["currentContext"] == meta["Name"]
    # docker finds a context's meta under sha256(name) (notes/docker-wire.md §6)
    import hashlib

    assert hashlib.sha256(meta["Name"].encode()).hexdigest() in meta_path
    assert meta["Endpoints"]["docker"]["Host"].startswith("unix:///")


def test_dedupe_by_realpath_keeps_first_of_each_file():
    real = {"/var/run/docker.sock": "/run/docker.sock"}
    got = og.dedupe_by_realpath(["/run/docker.sock", "/var/run/docker.sock", "/run/x"],
                                realpath=lambda p: real.get(p, p))
    assert got == ["/run/docker.sock", "/run/x"]


def test_toolchain_dirs_follow_a_package_made_of_symlinks(tmp_path, monkeypatch):
    """A weakened copy imports ``no_docker`` through a folder of symlinks to the copy's parts
    (tests/regression/weakened_harness.py). Under /tmp (a clone there) the guard hides both,
    so both are kept: the folder as imported, and the tree its parts lead to, or the canary
    (``no_docker.canary``, not imported by the owner) is not found inside the guard."""
    import types

    tree = tmp_path / "repo"
    (tree / "canary").mkdir(parents=True)
    (tree / "canary" / "routes.py").write_text("")
    pkg = tmp_path / "path" / "no_docker"
    pkg.mkdir(parents=True)
    (pkg / "canary").symlink_to(tree / "canary")
    module = types.ModuleType("no_docker.canary.routes_for_this_test")
    module.__file__ = str(pkg / "canary" / "routes.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    dirs = og.toolchain_dirs()
    assert str(pkg) in dirs and str(tree) in dirs, dirs


def test_canary_and_namespace_argv():
    argv = og.canary_argv(["c"], unix=["/a"], tcp=["[::1]:2375"], abstract=["n"], log="L", mode="refuse",
                          ready="R")
    assert argv == ["c", "serve", "--unix", "/a", "--tcp", "[::1]:2375", "--abstract", "n",
                    "--log", "L", "--mode", "refuse", "--ready", "R"]
    root = og.unshare_argv(["h"], userns=False)
    assert "--user" not in root and {"--mount", "--net", "--pid", "--kill-child"} <= set(root)
    assert root[-2:] == ["--", "h"]
    assert og.unshare_argv(["h"], userns=True)[1:3] == ["--user", "--map-root-user"]
    enter = og.nsenter_argv(7, ["true"], userns=True, cwd="/w")
    assert enter[:2] == ["nsenter", "--target=7"] and "--user" in enter and "--wdns=/w" in enter
    assert enter[-2:] == ["--", "true"]


def test_parse_tcp_listeners_and_addresses():
    text = textwrap.dedent("""\
        sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
         0: 0100007F:0947 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1
         1: 0100007F:0948 0100007F:1234 01 00000000:00000000 00:00000000 00000000     0        0 4343 1
         2: garbage
    """)
    assert og.parse_tcp_listeners(text) == {("0100007F", 2375): 4242}
    assert og.proc_net_address("127.0.0.1") == "0100007F"
    assert og.proc_net_address("::1") == "00000000000000000000000001000000"
    assert og.split_tcp("[::1]:2375") == ("::1", 2375)


def test_marker_problems_names_the_listener_without_its_probe():
    records = [
        {"kind": "connection", "listener": "/a"},
        {"kind": "request", "listener": "/a", "query": "route=M", "headers": []},
        {"kind": "request", "listener": "/b", "query": "", "headers": [["X-No-Docker-Route", "M"]]},
        {"kind": "request", "listener": "/c", "query": "route=other", "headers": []},
    ]
    assert og.marker_problems(["/a", "/b", "/c"], records, "M") == [
        "/c: the probe request is not in the canary log"]


# --------------------------------------------------------------------------- real namespaces


@pytest.fixture
def outside_listeners(tmp_path_factory):
    """A unix socket under the host's /tmp, an abstract socket and a loopback port, outside."""
    private = Path(tempfile.mkdtemp(prefix="no-docker-outside-"))
    socks = []
    try:
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(str(private / "engine.sock"))
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0no-docker-outside-" + private.name)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        socks = [unix, abstract, tcp]
        for sock in socks:
            sock.listen(1)
        yield {"unix": str(private / "engine.sock"), "abstract": "no-docker-outside-" + private.name,
               "port": tcp.getsockname()[1], "dir": str(private)}
    finally:
        for sock in socks:
            sock.close()
        shutil.rmtree(private, ignore_errors=True)


CONNECT = """
import json, socket, sys
out = {}
for kind, addr in json.loads(sys.argv[1]):
    fam = socket.AF_INET if kind == "tcp" else socket.AF_UNIX
    s = socket.socket(fam)
    s.settimeout(3)
    try:
        s.connect(tuple(addr) if kind == "tcp" else addr.replace("@", "\\0", 1))
        out[str(addr)] = "connected"
    except OSError as e:
        out[str(addr)] = e.errno
    s.close()
print(json.dumps(out))
"""


def _connect_inside(guard: og.OuterGuard, targets: list) -> dict:
    done = guard.run([sys.executable, "-c", CONNECT, json.dumps(targets)], timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


@needs_unshare
@pytest.mark.parametrize("userns", [False, True], ids=["root", "userns"])
def test_guard_hides_host_brings_lo_up_and_only_the_canary_answers(tmp_path, outside_listeners, userns):
    if not userns and os.geteuid() != 0:
        pytest.skip("the guard without a user namespace of its own is root's (unshare needs "
                    "CAP_SYS_ADMIN); the userns case is an ordinary user's")
    before = _mountinfo()
    log = tmp_path / "canary.jsonl"
    with og.OuterGuard(log, canary=canary_prefix(), userns=userns) as guard:
        holder, root = guard.holder_pid, guard.root
        pid_ns = os.stat(f"/proc/{holder}/ns/pid").st_ino
        # The host's /run is hidden: inside it holds only what the guard made.
        inside_run = guard.run(["ls", "-A", "/run"]).stdout.decode().split()
        made = {p.split("/")[2] for p in guard.layout.unix_paths() if p.startswith("/run/")} | {"user"}
        assert set(inside_run) <= made, inside_run
        # ... on a file system of its own, not the host's (whatever the host keeps in /run).
        inside_dev = guard.run(["stat", "-c", "%d", "/run", "/tmp", "/dev/shm"]).stdout.decode().split()
        outside_dev = [str(os.stat(p).st_dev) for p in ("/run", "/tmp", "/dev/shm")]
        assert all(i != o for i, o in zip(inside_dev, outside_dev, strict=True)), (inside_dev, outside_dev)
        # The host's /tmp is hidden (the outside socket's directory is gone), lo is up
        # (a listener inside is reachable), and the outside ports and names are not.
        got = _connect_inside(guard, [
            ["unix", outside_listeners["unix"]],
            ["unix", "@" + outside_listeners["abstract"]],
            ["tcp", ["127.0.0.1", outside_listeners["port"]]],
            ["tcp", ["127.0.0.1", 2375]],
            ["unix", "/run/docker.sock"],
            ["unix", "/var/run/docker.sock"],
            ["unix", f"{guard.home}/.docker/run/docker.sock"],
            ["unix", f"{guard.runtime_dir}/podman/podman.sock"],
            ["unix", "/proc/1/root/run/docker.sock"],
            ["unix", "@" + og.ABSTRACT_NAME],
        ])
        import errno

        assert got[outside_listeners["unix"]] == errno.ENOENT
        assert got["@" + outside_listeners["abstract"]] == errno.ECONNREFUSED
        assert got[str(["127.0.0.1", outside_listeners["port"]])] == errno.ECONNREFUSED
        for addr in ("['127.0.0.1', 2375]", "/run/docker.sock", "/var/run/docker.sock",
                     f"{guard.home}/.docker/run/docker.sock", f"{guard.runtime_dir}/podman/podman.sock",
                     "/proc/1/root/run/docker.sock", "@" + og.ABSTRACT_NAME):
            assert got[addr] == "connected", (addr, got)
        # The docker CLI inside finds the canary through DOCKER_HOST, and so does a context.
        if shutil.which("docker"):
            guard.run(["docker", "ps", "--filter", "label=no-docker-route=guard-test"], timeout=60)
            env = dict(guard.env)
            del env["DOCKER_HOST"]
            guard.run(["docker", "images", "--filter", "label=no-docker-route=guard-ctx"], env=env,
                      timeout=60)
            queries = " ".join(str(r.get("query")) for r in guard.records())
            assert "guard-test" in queries and "guard-ctx" in queries, guard.records()
        assert guard.inside(f"{guard.home}/.docker/config.json").exists()
    # Teardown leaves nothing: no process of the guard, no mount here, no directory.
    assert og.processes_in_namespace("pid", pid_ns) == []
    assert not os.path.exists(f"/proc/{holder}")
    assert _mountinfo() == before
    assert not root.exists()


@needs_unshare
def test_guard_records_exclude_its_own_probes_and_run_times_out(tmp_path):
    log = tmp_path / "canary.jsonl"
    with og.OuterGuard(log, canary=canary_prefix()) as guard:
        assert guard.records() == []
        probes = [json.loads(line) for line in log.read_text().splitlines()]
        assert {r["listener"] for r in probes if r["kind"] == "request"} == {
            lst["address"] for lst in guard.listeners}
        with pytest.raises(subprocess.TimeoutExpired):
            guard.run(["sleep", "60"], timeout=0.5)
        # Killed, and reaped by the guard's pid 1 (a zombie would show as state Z).
        left = guard.run(["ps", "-eo", "stat=,comm="]).stdout.decode().split("\n")
        assert [line for line in left if line.endswith("sleep") and not line.startswith("Z")] == []


ROGUE = """
import json, os, socket, subprocess, sys, time
args = sys.argv[1:]
ready = args[args.index("--ready") + 1]
# A stand-in that lets another process take /run/docker.sock and names itself in the ready file.
if sys.argv[0] == "-c" and "--rogue-child" not in args:
    pass
child = subprocess.Popen([sys.executable, {placeholder!r}, *args[:args.index("--ready")],
                          "--ready", ready + ".child"])
while not os.path.exists(ready + ".child"):
    time.sleep(0.01)
state = json.load(open(ready + ".child"))
state["pid"] = os.getpid()
json.dump(state, open(ready + ".tmp", "w"))
os.replace(ready + ".tmp", ready)
child.wait()
"""

SILENT = """
import json, os, socket, sys, threading
args = sys.argv[1:]
ready = args[args.index("--ready") + 1]
listeners = []
socks = []
for i, a in enumerate(args):
    if a == "--unix":
        s = socket.socket(socket.AF_UNIX); os.makedirs(os.path.dirname(args[i+1]), exist_ok=True)
        s.bind(args[i+1]); listeners.append({{"kind": "unix", "address": args[i+1]}})
    elif a == "--abstract":
        s = socket.socket(socket.AF_UNIX); s.bind("\\0" + args[i+1])
        listeners.append({{"kind": "abstract", "address": args[i+1]}})
    elif a == "--tcp":
        h, _, p = args[i+1].rpartition(":"); h = h.strip("[]")
        s = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET); s.bind((h, int(p)))
        listeners.append({{"kind": "tcp", "address": args[i+1]}})
    else:
        continue
    s.listen(8); socks.append(s)
def serve(s):
    while True:
        c, _ = s.accept(); c.close()  # answers, but never writes a record
for s in socks:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
json.dump({{"pid": os.getpid(), "listeners": listeners}}, open(ready + ".tmp", "w"))
os.replace(ready + ".tmp", ready)
threading.Event().wait()
"""


@needs_unshare
@pytest.mark.parametrize("script,why", [
    (ROGUE, "not the canary"),
    (SILENT, "the probe request is not in the canary log"),
], ids=["peer-is-not-the-canary", "canary-does-not-record"])
def test_guard_refuses_when_something_else_answers(tmp_path, script, why):
    code = script.format(placeholder=str(PLACEHOLDER))
    with pytest.raises(og.GuardError, match=why), \
            og.OuterGuard(tmp_path / "canary.jsonl", canary=[sys.executable, "-c", code]):
        pass
    assert _guard_dirs_naming(tmp_path) == []


def _guard_dirs_naming(tmp_path: Path) -> list[str]:
    """This user's guard dirs under /tmp whose config names TMP_PATH: another user's (0700,
    a shared machine: root's suite or prove beside ours) cannot be this test's leftover."""
    out = []
    for name in os.listdir("/tmp"):
        config = Path("/tmp") / name / "guard-config.json"
        if not name.startswith("no-docker-guard-"):
            continue
        try:
            if (Path("/tmp") / name).stat().st_uid == os.getuid() and str(tmp_path) in config.read_text():
                out.append(name)
        except (FileNotFoundError, PermissionError):
            continue
    return out


@needs_unshare
def test_guard_refuses_when_the_canary_cannot_start(tmp_path):
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    log = tmp_path / "c.jsonl"
    with pytest.raises(og.GuardError, match="canary exited"), og.OuterGuard(log, canary=failing):
        pass


def test_parse_ppid_survives_parentheses_and_spaces_in_comm():
    assert og.parse_ppid(b"42 (a) b) (c) S 7 42 42 0 -1") == 7
    assert og.parse_ppid(Path(f"/proc/{os.getpid()}/stat").read_bytes()) == os.getppid()


def test_peercred_struct_is_three_ints():
    # SO_PEERCRED returns struct ucred {pid_t pid; uid_t uid; gid_t gid;} (unix(7)).
    a, b = socket.socketpair()
    with a, b:
        pid, uid, gid = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    assert (pid, uid, gid) == (os.getpid(), os.getuid(), os.getgid())


OWNER = """
import json, os, sys, time
from pathlib import Path
from no_docker.supervisor.proving.outer_guard import OuterGuard
guard = OuterGuard(Path(sys.argv[1]), canary=json.loads(sys.argv[2])).__enter__()
print(json.dumps({"holder": guard.holder_pid, "root": str(guard.root),
                  "pidns": os.stat(f"/proc/{guard.holder_pid}/ns/pid").st_ino}), flush=True)
time.sleep(600)
"""


@needs_unshare
def test_guard_dies_with_its_owner_even_on_sigkill(tmp_path, spawn):
    import signal
    import time

    owner = spawn([sys.executable, "-c", OWNER, str(tmp_path / "canary.jsonl"), json.dumps(canary_prefix())],
                  stdout=subprocess.PIPE)
    state = json.loads(readline(owner.stdout, 60, "the guard's state"))
    try:
        assert og.processes_in_namespace("pid", state["pidns"]), "the guard never came up"
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        # The holder reads EOF on its stdin (the owner's end closed with it) and exits; as pid 1
        # it takes every process of the guard with it.
        deadline = time.monotonic() + 15
        while og.processes_in_namespace("pid", state["pidns"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert og.processes_in_namespace("pid", state["pidns"]) == []
    finally:
        owner.stdout.close()
        shutil.rmtree(state["root"], ignore_errors=True)


@needs_unshare
def test_guard_in_refuse_mode_records_and_refuses(tmp_path):
    with og.OuterGuard(tmp_path / "canary.jsonl", mode="refuse", canary=canary_prefix()) as guard:
        done = guard.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket",
                          "/run/docker.sock", "http://d/_ping?route=guard-refuse"])
        assert done.stdout.decode().startswith(("4", "5")), done.stdout
        requests = [r for r in guard.records() if r.get("kind") == "request"]
        assert any("guard-refuse" in str(r.get("query")) for r in requests), requests


def test_guard_rejects_a_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode must be"):
        og.OuterGuard(tmp_path / "c.jsonl", mode="loud")


@needs_unshare
def test_guard_leaks_no_file_descriptor(tmp_path):
    def fds() -> set[str]:
        return set(os.listdir("/dev/fd"))

    before = fds()
    with og.OuterGuard(tmp_path / "canary.jsonl", canary=canary_prefix()) as guard:
        guard.run(["true"])
    assert fds() == before
    failing = [sys.executable, "-c", "raise SystemExit(4)"]
    with pytest.raises(og.GuardError), og.OuterGuard(tmp_path / "c2.jsonl", canary=failing):
        pass
    assert fds() == before


def test_settled_records_waits_for_records_the_canary_writes_late(tmp_path):
    # Regression (T-04 failed once): a control's connection records were written after the
    # control had exited, and were then blamed on the isolated run.
    import threading

    guard = og.OuterGuard.__new__(og.OuterGuard)  # only the log is needed here
    guard.log, guard._log_offset = tmp_path / "canary.log", 0
    guard.log.write_text('{"seq": 1}\n{"seq": 2}\n')

    def late() -> None:
        with open(guard.log, "a") as f:
            f.write('{"seq": 3}\n')

    timer = threading.Timer(0.15, late)
    timer.start()
    try:
        assert [r["seq"] for r in guard.settled_records(at_least=3, quiet=0.05, timeout=5)] == [1, 2, 3]
    finally:
        timer.cancel()
    # Quiet: nothing new for QUIET seconds is enough when nothing more is expected.
    assert len(guard.settled_records(quiet=0.05, timeout=5)) == 3
    with pytest.raises(og.GuardError, match="expected at least 5"):
        guard.settled_records(at_least=5, quiet=0.05, timeout=0.3)


SLOW_TO_STOP = """
import signal, sys, time
def finish(signum, frame):
    time.sleep(0.4)  # a canary writing its last records and unlinking its sockets
    open(sys.argv[1], "w").write("finished")
    sys.exit(0)
signal.signal(signal.SIGTERM, finish)
open(sys.argv[2], "w").close()
while True:
    time.sleep(0.05)
"""


@needs_unshare
def test_stop_returns_only_once_the_spawned_command_has_exited(tmp_path):
    # Regression (issue 13.6): stop() sent SIGTERM to nsenter too, which died at once; the
    # engine went on shutting down, orphaned, so its last records were read too early.
    done, ready = tmp_path / "finished", tmp_path / "ready"
    with og.OuterGuard(tmp_path / "canary.jsonl", canary=canary_prefix(), share=[tmp_path]) as guard:
        proc = guard.spawn([sys.executable, "-c", SLOW_TO_STOP, str(done), str(ready)])
        try:
            for _ in range(500):
                if ready.exists():
                    break
                og.time.sleep(0.01)
            assert ready.exists(), "the command never started"
        finally:
            guard.stop(proc)
        assert done.read_text() == "finished"
        assert proc.returncode == 0
        left = guard.run(["ps", "-eo", "stat=,args="]).stdout.decode()
        assert "SLOW_TO_STOP" not in left and str(done) not in left, left


def test_a_leftover_is_named_with_its_comm_state_and_parent(tmp_path):
    from no_docker.supervisor.proving.outer_guard import describe_process

    (tmp_path / "41").mkdir()
    fields = b" ".join(b"0" for _ in range(40))  # a whole line: what procfs.parse_stat reads
    (tmp_path / "41" / "stat").write_bytes(b"41 (a) (b c) Z 7 " + fields + b"\n")
    assert describe_process(41, proc=str(tmp_path)) == "41 (a) (b c, state Z, parent 7)"
    assert describe_process(42, proc=str(tmp_path)) == "42 (gone)"
    (tmp_path / "43").mkdir()
    (tmp_path / "43" / "stat").write_bytes(b"43 no parenthesis")
    assert describe_process(43, proc=str(tmp_path)) == "43 (unreadable stat)"
