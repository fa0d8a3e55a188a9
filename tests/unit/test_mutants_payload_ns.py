"""Every route of the real payload, run WITHOUT isolation in a throwaway mount + network + pid
namespace: tmpfs hides the host's /run, a private HOME and XDG_RUNTIME_DIR, and the canary
listens on the real engine paths and ports. Per network route: the canary recorded the route's
id (or, where the protocol cannot carry it, a record on the listener the route names), or the
route says it is `unavailable` and why. This is the positive control T-05 builds on; a route
that silently stops reaching anything fails here first.

The pid namespace matters: without it /proc/1/root is the host's root, and the proc-1-root
route would reach past the tmpfs to the host's /run/docker.sock.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import pins
from no_docker.mutants.routes import canary_addresses, declared_routes, parse_route_log

PAYLOAD = pins.ROOT / "mutants" / "payloads" / "reach-engine.sh"
# Routes that cannot reach a canary here, and the evidence that they were still attempted.
NO_ANSWER_HERE = {
    "ssh-host": "no sshd in the namespace: the CLI's ssh must have run",
    "tls-2376-cli": "the canary speaks no TLS: the CLI's hello must be on 127.0.0.1:2376",
}
DRIVER = r"""
set -u
T=$1 PY=$2 PAYLOAD=$3 CANARY=$4
shift 4
ip link set lo up
mount -t tmpfs tmpfs /run
mkdir -p /run/user/0 "$T/home" "$T/work"
export HOME=$T/home XDG_RUNTIME_DIR=/run/user/0
if [ "$CANARY" = yes ]; then
  "$PY" -m no_docker.canary serve "$@" --log "$T/canary.jsonl" --ready "$T/ready.json" 2> "$T/canary.err" &
  for _ in $(seq 200); do [ -s "$T/ready.json" ] && break; sleep 0.05; done
  [ -s "$T/ready.json" ] || { echo "canary not ready: $(cat "$T/canary.err")" >&2; exit 3; }
fi
cd "$T/work" || exit 3
env -u DOCKER_HOST -u CONTAINER_HOST -u DOCKER_CONTEXT PATH="$(dirname "$PY"):$PATH" bash "$PAYLOAD"
"""


def run_in_namespace(tmp: Path, with_canary: bool) -> tuple[dict, list[dict]]:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare(1) and ip(8) (util-linux, iproute2)")
    probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "true"], capture_output=True,
                           timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"cannot make mount+net+pid namespaces here: {probe.stderr.decode().strip()}")
    addresses = canary_addresses(str(tmp / "home"), "/run/user/0")
    listen = ["--unix", *addresses["unix"], "--tcp", *addresses["tcp"], "--abstract", *addresses["abstract"]]
    driver = tmp / "driver.sh"
    driver.write_text(DRIVER)
    # --kill-child: if the test times out and kills unshare, the namespace's init dies, and with
    # it every process of the pid namespace (pid_namespaces(7)): nothing outlives the test.
    argv = ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "bash",
            str(driver), str(tmp), sys.executable, str(PAYLOAD), "yes" if with_canary else "no", *listen]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    log = tmp / "work" / "no-docker-routes.log"
    records = []
    if with_canary:
        lines = (tmp / "canary.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    return parse_route_log(log.read_text()), records


def listener_named(route_id: str) -> str | None:
    """The --unix/--tcp endpoint a helper route names in its block."""
    text = PAYLOAD.read_text()
    block = text[text.index(f"# route: {route_id} "):]
    m = re.search(r"--(?:unix|tcp) (\S+)", block.split("\n# route:")[0])
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def with_canary(tmp_path_factory):
    return run_in_namespace(tmp_path_factory.mktemp("ns-canary"), with_canary=True)


@pytest.fixture(scope="module")
def without_canary(tmp_path_factory):
    return run_in_namespace(tmp_path_factory.mktemp("ns-empty"), with_canary=False)


ROUTES = declared_routes(PAYLOAD)
NETWORK = [r.id for r in ROUTES if r.kind == "network"]
PERSISTENCE = [r.id for r in ROUTES if r.kind == "persistence"]


def test_every_declared_route_logged_exactly_its_line(with_canary):
    log, _ = with_canary
    assert sorted(log) == sorted(r.id for r in ROUTES)


@pytest.mark.parametrize("route", NETWORK)
def test_network_route_reaches_the_canary_or_says_why_not(with_canary, route):
    from no_docker.canary.records import route_of

    log, records = with_canary
    outcome, detail = log[route]
    if outcome == "unavailable":
        assert detail, f"{route}: unavailable without a reason"
        return
    if route in NO_ANSWER_HERE:
        if route == "ssh-host":
            assert outcome == "failed" and "ssh" in detail, (outcome, detail)
        else:
            assert any(r["kind"] == "raw" and r["listener"] == "127.0.0.1:2376" for r in records)
        return
    assert outcome == "reached", (route, outcome, detail)
    if any(route_of(r) == route for r in records):
        return
    listener = listener_named(route)
    assert listener is not None, f"{route}: reached, but no canary record carries its id"
    assert any(r["listener"] == listener and r["kind"] in ("raw", "request") for r in records), (
        f"{route}: no record on {listener}")


@pytest.mark.parametrize("route", PERSISTENCE)
def test_persistence_probes_write_without_isolation(with_canary, route):
    outcome, detail = with_canary[0][route]
    assert outcome in ("written", "unavailable"), (route, outcome, detail)


def test_nothing_answering_means_failed_or_unavailable_never_reached(without_canary):
    log, _ = without_canary
    assert sorted(log) == sorted(r.id for r in ROUTES), "the payload must finish every route"
    wrong = {rid: log[rid] for rid in NETWORK if log[rid][0] not in ("failed", "unavailable")}
    assert not wrong
