"""The pure parts of ``no-docker prove --real-engine``: argv, the mutant, Podman's access log,
rows, the verdict, the host listing diff, the only-this-engine check."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.proving import real_engine as re_

STATE = "/run/x"


def test_podman_argv_keeps_all_state_in_the_scratch_dir():
    argv = re_.podman_argv("/usr/bin/podman", STATE, "images")
    pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert pairs["--root"] == f"{STATE}/root" and pairs["--runroot"] == f"{STATE}/runroot"
    assert pairs["--tmpdir"] == f"{STATE}/tmp" and pairs["--network-config-dir"] == f"{STATE}/networks"
    assert pairs["--storage-driver"] == "vfs" and pairs["--cgroup-manager"] == "cgroupfs"
    assert pairs["--events-backend"] == "file"
    assert argv[-1] == "images"


def test_service_argv_never_times_out_and_listens_on_the_uri():
    argv = re_.service_argv("podman", STATE, "tcp://127.0.0.1:2375")
    assert argv[-4:] == ["system", "service", "--time=0", "tcp://127.0.0.1:2375"]


def test_victim_commands_make_three_victims_per_route_without_network():
    cmds = re_.victim_commands("podman", STATE, ["a", "b"])
    assert len(cmds) == 6
    create = cmds[1]
    assert create[create.index("--network") + 1] == "none"
    assert "nd-ctr-a" in create and re_.victims("a")["image"] in create
    assert cmds[2][-3:] == ["volume", "create", "nd-vol-a"]


def test_mutant_has_one_block_per_route_and_moving_routes_after_the_wait():
    script = re_.mutant_script(re_.ROUTES)
    for route in re_.ROUTES:
        assert f"# route: {route.id}\nnd_route {route.id} " in script
    wait = script.index(re_.WAITING)
    for route in re_.ROUTES:
        assert (script.index(f"# route: {route.id}") > wait) is route.moves
    assert script.count(f"timeout {re_.DOCKER_TIMEOUT} ") == 3  # every docker call bounded


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to parse the mutant")
def test_mutant_is_valid_bash():
    done = subprocess.run(["bash", "-n"], input=re_.mutant_script(re_.ROUTES), text=True,
                          capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_route_ids_are_unique_and_none_hides_inside_another():
    ids = [r.id for r in re_.ROUTES]
    assert len(ids) == len(set(ids)) == 12
    entries = [("DELETE", f"/v1.41/containers/nd-ctr-{rid}?force=1", 204) for rid in ids]
    assert all(re_.requests_for(rid, entries) == 1 for rid in ids)


def test_parse_access_log_keeps_requests_only():
    agent = '"" "Docker-Client/28.2.2 (linux)"'
    text = ('time="2026" level=info msg="API service listening on \\"/run/podman/podman.sock\\""\n'
            f'@ - - [02/Dec/2026:01:36:52 +0000] "HEAD /_ping HTTP/1.1" 200 0 {agent}\n'
            '@ - - [02/Dec/2026:01:36:53 +0000] "DELETE /v1.41/images/localhost/nd-img-tcp-2375:latest'
            f'?force=1 HTTP/1.1" 200 120 {agent}\n'
            'garbage "GET"\n')
    entries = re_.parse_access_log(text)
    assert entries == [("HEAD", "/_ping", 200),
                       ("DELETE", "/v1.41/images/localhost/nd-img-tcp-2375:latest?force=1", 200)]
    assert re_.requests_for("tcp-2375", entries) == 1
    assert re_.requests_for("tcp-237", entries) == 0


def test_requests_for_run_docker_sock_is_not_var_run_docker_sock():
    entries = [("DELETE", "/v1.41/volumes/nd-vol-var-run-docker-sock", 204)]
    assert re_.requests_for("run-docker-sock", entries) == 0
    assert re_.requests_for("var-run-docker-sock", entries) == 1


def test_parse_route_log_skips_malformed_lines():
    assert re_.parse_route_log("a 0 0 0\nb 1 1\nc x 1 1\nd 125 1 1\n") == {"a": (0, 0, 0), "d": (125, 1, 1)}


def test_destroyed_names_what_is_missing():
    v = re_.victims("r")
    present = {"image": {v["image"]}, "container": set(), "volume": {v["volume"], "other"}}
    assert re_.destroyed("r", present) == [v["container"]]
    assert re_.destroyed("r", {}) == list(v.values())


ROUTE = re_.Route("r", "a route", "docker")


def test_route_row_control_all_isolated_none():
    row = re_.route_row(ROUTE, ["a", "b", "c"], [], 3, 0)
    assert (row.control, row.isolated, row.requests) == ("yes (3 of 3)", "no (0 of 3)", "3 / 0")
    assert row.control_ok is True and row.isolated_ok is True


def test_route_row_a_request_from_the_run_is_a_leak_even_with_nothing_destroyed():
    row = re_.route_row(ROUTE, ["a", "b", "c"], [], 3, 1)
    assert row.isolated_ok is False


def test_route_row_partial_control_and_untried_isolated():
    row = re_.route_row(ROUTE, ["a"], [], 1, 0, isolated_tried=False)
    assert row.control == "NO (1 of 3)" and row.control_ok is False
    assert row.isolated.startswith("NOT TRIED") and row.isolated_ok is None


def test_route_row_unavailable_counts_neither_way():
    row = re_.route_row(ROUTE, [], [], 0, 0, unavailable="no /srv")
    assert row.control_ok is None and row.isolated_ok is None and "no /srv" in row.control


def _rows(control=3, isolated=0, requests=0, n=2):
    return [re_.route_row(re_.Route(f"r{i}", "", "docker"), ["x"] * control, ["x"] * isolated, 3, requests)
            for i in range(n)]


def test_verdict_proven_only_when_everything_holds():
    assert re_.verdict(_rows(), [], []).status == "PROVEN"
    assert re_.verdict(_rows(), [], []).exit_status == 0


@pytest.mark.parametrize(("rows", "changes", "incomplete", "requests", "status", "exit_status"), [
    (_rows(isolated=1), [], [], 0, "FAILED", 1),
    (_rows(requests=2), [], [], 0, "FAILED", 1),
    (_rows(), ["new /var/lib/containers"], [], 0, "FAILED", 1),
    (_rows(), [], [], 4, "FAILED", 1),
    (_rows(control=2), [], [], 0, "FAILED", 1),
    ([], [], [], 0, "FAILED", 1),
    (_rows(), [], ["podman is missing"], 0, "INCOMPLETE", 125),
    ([re_.route_row(ROUTE, ["a", "b", "c"], [], 3, 0, isolated_tried=False)], [], [], 0, "INCOMPLETE", 125),
])
def test_verdict_fails_or_is_incomplete(rows, changes, incomplete, requests, status, exit_status):
    result = re_.verdict(rows, [], changes, incomplete, isolated_requests=requests)
    assert (result.status, result.exit_status) == (status, exit_status), result.line
    assert result.line.startswith(f"no-docker prove --real-engine: {status} - ")
    assert "\n" not in result.line


def test_a_leak_wins_over_incomplete():
    assert re_.verdict(_rows(isolated=3), [], [], ["a part could not run"]).status == "FAILED"


def test_render_table_has_the_four_columns():
    lines = re_.render_table(_rows(n=1)).splitlines()
    assert lines[0].split("  ")[0] == "route"
    assert "destroyed without isolation" in lines[0] and "requests in engine log" in lines[0]
    assert lines[2].split() == ["r0", "yes", "(3", "of", "3)", "no", "(0", "of", "3)", "3", "/", "0"]


def test_missing_tools_names_the_package():
    missing = re_.missing_tools(lambda tool: None if tool == "podman" else f"/usr/bin/{tool}")
    assert missing == ["podman is missing (apt-get install podman)"]
    assert re_.missing_tools(lambda tool: f"/usr/bin/{tool}") == []


def test_listing_diff_names_each_kind_of_change():
    before = {"/etc/containers": "dir", "/etc/containers/a": "file 1 2", "process 5 podman": "S"}
    after = {"/etc/containers": "dir", "/etc/containers/a": "file 3 4", "/var/lib/containers": "dir"}
    assert re_.listing_diff(before, after) == ["changed /etc/containers/a", "new /var/lib/containers"]
    assert re_.ended_elsewhere(before, after) == ["5 podman"]


def test_a_new_podman_process_is_a_change_and_one_that_ended_is_not():
    """Someone else's Podman that ends while the proof runs (T-74 failed on it in CI: ``gone
    process 9605 podman``) is a note; one that appears and stays is left behind by the proof."""
    before = {"process 9605 podman": "process"}
    assert re_.listing_diff(before, {}) == []
    assert re_.ended_elsewhere(before, {}) == ["9605 podman"]
    assert re_.listing_diff({}, {"process 77 conmon": "process"}) == ["new process 77 conmon"]
    assert re_.ended_elsewhere({}, {"process 77 conmon": "process"}) == []


_listings = st.dictionaries(st.one_of(st.text(min_size=1, max_size=8),
                                      st.text(min_size=1, max_size=4).map(lambda t: f"process {t}")),
                            st.text(max_size=4), max_size=8)


@given(_listings, _listings)
def test_listing_diff_is_empty_exactly_when_equal_but_for_ended_processes(before, after):
    kept = {k: v for k, v in before.items() if not (k.startswith("process ") and k not in after)}
    assert (re_.listing_diff(before, after) == []) is (kept == after)
    gone = before.keys() - kept.keys()
    assert set(re_.ended_elsewhere(before, after)) == {k.removeprefix("process ") for k in gone}


def test_parse_comm_stat_with_spaces_and_parens():
    assert re_.parse_comm_stat(b"12 (pod man) x) S 1 2 3") == ("pod man) x", "S")
    assert re_.parse_comm_stat(b"7 (podman) Z 1") == ("podman", "Z")


def test_only_engine_problems():
    answers = {"/run/podman/podman.sock": "ours", "/run/docker.sock": "other: pids [9]",
               "/run/containerd/containerd.sock": "absent", "127.0.0.1:2375": "absent"}
    problems = re_.only_engine_problems(answers, ["/run/podman/podman.sock", "127.0.0.1:2375", "/srv/x"])
    assert problems == ["/run/docker.sock: another engine answers there (other: pids [9])",
                        "127.0.0.1:2375: our Podman does not answer there (absent)",
                        "/srv/x: not checked"]
    assert re_.only_engine_problems({"/a": "ours", "/b": "absent"}, ["/a"]) == []


def test_expected_ours_takes_other_names_of_the_same_socket():
    real = {"/var/run/docker.sock": "/run/docker.sock"}
    ours = re_.expected_ours(["/var/run/docker.sock", "/run/crio/crio.sock", "127.0.0.1:2375"],
                             ["/run/docker.sock", "127.0.0.1:2375"], realpath=lambda p: real.get(p, p))
    assert ours == ["/run/docker.sock", "127.0.0.1:2375", "/var/run/docker.sock"]


def test_work_context_points_at_the_main_socket():
    import json

    files = re_.work_context_files("/w")
    meta = next(json.loads(text) for path, text in files.items() if path.endswith("meta.json"))
    assert meta["Name"] == re_.WORK_CONTEXT
    assert meta["Endpoints"]["docker"]["Host"] == f"unix://{re_.MAIN_SOCKET}"
    assert all(path.startswith(f"/w/{re_.WORK_CONFIG}/") for path in files)


def _children_named(parent: int, comm: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            name, _ = re_.parse_comm_stat(stat)
            if name == comm and int(stat[stat.rfind(b")") + 2:].split()[1]) == parent:
                out.append(int(entry))
    return out


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_podman_processes_lists_this_pid_namespace_only(tmp_path):
    """A Podman of another pid namespace (another guard's: the weakened builds' T-74 runs beside
    the suite's) is not the host's; one here is."""
    fake = tmp_path / "podman"
    fake.symlink_to(shutil.which("sleep"))  # comm is the name executed: "podman"
    here = subprocess.Popen([str(fake), "30"])
    there = subprocess.Popen(["unshare", *(["-r"] if os.geteuid() != 0 else []), "-p", "-f", "--kill-child",
                              str(fake), "30"])
    try:
        deadline = time.monotonic() + 10
        while not (inner := _children_named(there.pid, "podman")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert inner, "the other namespace's podman did not start"
        listed = re_.podman_processes()
        assert f"{here.pid} podman" in listed, listed
        assert not any(f"{pid} podman" in listed for pid in inner), (inner, listed)
    finally:
        for proc in (here, there):
            proc.kill()
            proc.wait(timeout=30)
