"""T-04: inside ``no-docker run``, every real engine socket path refuses.

In the outer guard the canary answers on every engine path (``/run/docker.sock`` ...
``127.0.0.1:2375``, an abstract name). The same connect() attempts are made twice: without
isolation (the positive control: each one connects, so the target is real) and inside
``no-docker run`` (each one must fail). The canary must record nothing from the isolated run.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import no_docker_argv
from no_docker.supervisor.proving.outer_guard import Layout

# connect() to each target; print {label: "connected" | errno name}.
CONNECT = r"""
import errno, json, socket, sys
out = {}
for label, kind, address in json.loads(sys.argv[1]):
    if kind == "tcp":
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        target = (host, int(port))
    else:
        sock = socket.socket(socket.AF_UNIX)
        target = "\0" + address if kind == "abstract" else address
    sock.settimeout(3)
    try:
        sock.connect(target)
        out[label] = "connected"
    except OSError as err:
        out[label] = errno.errorcode.get(err.errno, str(err.errno))
    finally:
        sock.close()
print(json.dumps(out))
"""


def engine_targets(layout: Layout, listeners: list[dict] | None = None) -> list[tuple[str, str, str]]:
    """(label, kind, address) of every engine path; labels do not depend on the guard's root."""
    from no_docker.supervisor.proving import outer_guard as og

    unix = list(layout.unix_paths()) + ["/proc/1/root/run/docker.sock", "/proc/self/root/run/docker.sock"]
    out = []
    for path in unix:
        label = path.replace(layout.home, "~").replace(layout.runtime_dir, "$XDG_RUNTIME_DIR")
        out.append((f"unix:{label}", "unix", path))
    out.append((f"abstract:{og.ABSTRACT_NAME}", "abstract", og.ABSTRACT_NAME))
    out += [(f"tcp:{address}", "tcp", address) for address in og.TCP_LISTENERS]
    return out


# Inside the guard we are root, or root of its user namespace: the runtime dir is /run/user/0.
LABELS = [label for label, _, _ in engine_targets(Layout(root="/ROOT", uid=0))]


@pytest.fixture(scope="module")
def attempts(module_guard):
    """The same connect() attempts without isolation and inside ``no-docker run``.

    A run that does not start is a set-up error here, never a pass and never a T-04 failure:
    T-04 is about what a started run can reach.
    """
    targets = engine_targets(module_guard.layout)
    code = [sys.executable, "-I", "-c", CONNECT, json.dumps(targets)]
    start = len(module_guard.settled_records())
    control = module_guard.run(code, timeout=120)
    assert control.returncode == 0, control.stderr.decode()
    connected = sum(result == "connected" for result in json.loads(control.stdout).values())
    before = len(module_guard.settled_records(start + connected))  # one connection record per connect
    isolated = module_guard.run(no_docker_argv("run", "--work", str(module_guard.work), "--", *code),
                                timeout=120)
    stderr = isolated.stderr.decode(errors="replace")
    assert isolated.returncode == 0, f"no-docker run exited {isolated.returncode}: {stderr.strip()[-600:]}"
    return {"control": json.loads(control.stdout), "isolated": json.loads(isolated.stdout),
            "records": module_guard.records()[before:]}


@pytest.mark.parametrize("label", LABELS)
def test_engine_path_refuses_inside_the_run(attempts, label):
    assert attempts["control"][label] == "connected", f"control: {label} is not a live canary path"
    assert attempts["isolated"][label] != "connected", f"{label} connected from inside no-docker run"


VISIBLE = r"""
import json, os, stat, sys
shown = []
for label, kind, address in json.loads(sys.argv[1]):
    if kind != "unix":
        continue
    try:
        if stat.S_ISSOCK(os.stat(address).st_mode):
            shown.append(label)
    except OSError:
        pass
print(json.dumps(shown))
"""


def test_engine_paths_are_not_even_sockets_inside_the_run(module_guard):
    # The hiding layer alone (tmpfs over the engine dirs, /dev/null masks), not only the connect
    # mediation behind it (P12): inside the run no engine path is a socket at all.
    targets = engine_targets(module_guard.layout)
    done = module_guard.run(no_docker_argv("run", "--quiet", "--work", str(module_guard.work), "--",
                                           sys.executable, "-I", "-c", VISIBLE, json.dumps(targets)),
                            timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-600:]
    assert json.loads(done.stdout) == [], f"engine sockets visible inside the run: {done.stdout.decode()}"


def test_canary_recorded_nothing_from_the_run(attempts):
    assert attempts["records"] == [], f"the canary recorded {len(attempts['records'])} records from the run"


def test_docker_cli_inside_the_run_reaches_nothing(module_guard):
    before = len(module_guard.settled_records())
    done = module_guard.run(no_docker_argv("run", "--work", str(module_guard.work), "--",
                                           "docker", "version"), timeout=120)
    stderr = done.stderr.decode(errors="replace")[-600:]
    if done.returncode == 125:
        pytest.fail(f"no-docker run did not start (125), so this shows nothing: {stderr}", pytrace=False)
    assert done.returncode != 0, f"docker version succeeded inside the run: {done.stdout.decode()[-300:]}"
    assert module_guard.records()[before:] == []
