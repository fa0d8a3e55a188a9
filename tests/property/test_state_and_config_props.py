"""Properties of the pure parts of issue 15 / 16.A1: the run.json audit, the state-dir overlap
check, --publish parsing and the [tool.no-docker] merge."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.ending import markers
from no_docker.supervisor.ending.snapshot import Identity
from no_docker.supervisor.errors import UsageError
from no_docker.supervisor.isolation.config import Config, merge
from no_docker.supervisor.isolation.publish import ENGINE_PORTS, parse_publish
from no_docker.supervisor.run import ending_options, parse_args

MOUNT = "/sys/fs/cgroup/unified"
SEGMENT = st.sampled_from(["a", "no-docker", "..", ".", "", "victim", "user.slice", "x y", "RUNID"])
RUN_ID = "20261201T000000-0123abcd"


def _record(v2: str | None) -> markers.RunRecord:
    return markers.RunRecord(run_id=RUN_ID, owner=Identity(100, 1), boot_id="b", command=["x"],
                             cgroup={"v2": v2, "pids_v1": None})


@settings(max_examples=400, deadline=None)
@given(st.lists(SEGMENT, max_size=6))
def test_a_trusted_cgroup_is_always_this_runs_own_leaf_under_a_cgroup2_mount(parts):
    path = "/".join([MOUNT, *parts]).replace("RUNID", RUN_ID)
    problem = markers.check_record(_record(path), RUN_ID, cgroup2_mounts=[MOUNT])
    if problem is None:
        assert os.path.normpath(path) == path
        assert path.endswith(f"/no-docker/{RUN_ID}") and path.startswith(MOUNT + "/")
        parent = path[: -len(f"/no-docker/{RUN_ID}")]
        assert "/no-docker/" not in parent + "/"  # not inside another run's cgroup


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "s", ".."]), min_size=1, max_size=4),
       st.lists(st.lists(st.sampled_from(["a", "b", "s"]), min_size=1, max_size=3), max_size=3))
def test_overlap_is_symmetric_containment(state_parts, roots_parts):
    state = os.path.normpath("/base/" + "/".join(state_parts))
    roots = ["/base/" + "/".join(p) for p in roots_parts]
    found = markers.overlap(state, roots)
    expected = [r for r in roots if markers.is_within(state, r) or markers.is_within(r, state)]
    assert found == (expected[0] if expected else None)


@given(st.integers(min_value=-5, max_value=70000), st.booleans())
def test_publish_takes_only_non_engine_loopback_ports(port, with_host):
    text = f"127.0.0.1:{port}" if with_host else str(port)
    if 1 <= port <= 65535 and port not in ENGINE_PORTS:
        assert parse_publish(text) == port
    else:
        with pytest.raises(UsageError):
            parse_publish(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["CI", "A", "B"]), max_size=3),
       st.lists(st.sampled_from(["X", "Y"]), max_size=3),
       st.one_of(st.none(), st.integers(8, 100)), st.one_of(st.none(), st.integers(8, 100)))
def test_lists_add_and_the_command_lines_scalars_win(cfg_env, cli_env, cfg_pids, cli_pids):
    table: dict[str, object] = {"keep-env": cfg_env}
    if cfg_pids is not None:
        table["max-pids"] = cfg_pids
    cfg = Config("/p/pyproject.toml", table)
    argv = [w for name in cli_env for w in ("--keep-env", name)]
    if cli_pids is not None:
        argv += ["--max-pids", str(cli_pids)]
    argv += ["--", "true"]
    given_opts = {a for a in argv[:-2] if a.startswith("--")}
    merged = merge(cfg, argv, given_opts)
    assert parse_args(merged).keep_env == tuple(cfg_env + cli_env)
    expected_pids = cli_pids if cli_pids is not None else cfg_pids
    assert ending_options(merged)[0] == expected_pids
