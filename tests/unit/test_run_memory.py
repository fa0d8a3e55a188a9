"""A run's memory (issue 24): bounded tmpfs sizes, ``--memory-max``, the OOM killer's choice.

Pure parts (sizes, the argv, the options, the marker check, where the memory cgroup goes) are
read, not run; the cgroup and ``oom_score_adj`` parts run against the real kernel where they
can (root, a v1 memory hierarchy) and skip saying why elsewhere. T-71 is the end-to-end case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.ending import cgroup, markers
from no_docker.supervisor.ending.procfs import ProcFS
from no_docker.supervisor.ending.snapshot import Identity
from no_docker.supervisor.errors import UsageError
from no_docker.supervisor.isolation import config
from no_docker.supervisor.isolation.policy import (
    TMP_SIZE_MIN,
    Policy,
    bwrap_argv,
    default_tmp_size,
    mount_layers,
    parse_size,
)
from no_docker.supervisor.run import parse_args

POLICY = Policy(work="/w", chdir="/w", home="/home/u", system_ro=("/usr",),
                hidden=("/run", "/tmp", "/var/tmp", "/dev/shm", "/home/u"), ro=("/home/u/data",))


# --- sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "size"), [
    ("1048576", 1 << 20), ("64K", 64 << 10), ("64k", 64 << 10), ("512M", 512 << 20),
    ("4G", 4 << 30), ("2GiB", 2 << 30), ("8MB", 8 << 20), ("0", 0),
])
def test_sizes_are_read_as_powers_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "1.5G", "-1M", "1T", "1 G", "0x10", "１M", "1iB", "1GG", "4B5"])
def test_anything_else_is_not_a_size(text):
    assert parse_size(text) is None


@given(st.integers(min_value=0, max_value=1 << 40), st.sampled_from(["", "K", "M", "G", "k", "m", "g"]))
def test_every_spelled_size_reads_back(number, unit):
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit.upper()]
    assert parse_size(f"{number}{unit}") == number * scale


def test_the_default_is_a_quarter_of_the_ram_each_in_whole_mib():
    assert default_tmp_size(24 << 30) == 6 << 30
    assert default_tmp_size((4 << 30) + 12345) == 1 << 30
    assert default_tmp_size(1 << 20) == TMP_SIZE_MIN  # a tiny machine still gets a working /run


# --- the argv -----------------------------------------------------------------------------


def _argv(policy: Policy) -> list[str]:
    argv = bwrap_argv(policy, ["true"], data_fd=5, block_fd=6)
    return argv[:argv.index("--")]


def test_every_tmpfs_is_sized_and_size_precedes_only_tmpfs():
    """bwrap applies --size to the next --tmpfs and refuses it before anything else."""
    argv = _argv(POLICY.replace(tmp_size=64 << 20))
    tmpfs = [i for i, word in enumerate(argv) if word == "--tmpfs"]
    tmpfs_layers = [path for kind, path in mount_layers(POLICY) if kind == "tmpfs"]
    assert [argv[i + 1] for i in tmpfs] == tmpfs_layers  # the re-hidden ones (step 4) too
    assert all(argv[i - 2:i] == ["--size", str(64 << 20)] for i in tmpfs)
    assert all(argv[i + 2] == "--tmpfs" for i, word in enumerate(argv) if word == "--size")


def test_without_a_size_no_size_flag():
    assert "--size" not in _argv(POLICY)


def test_build_policy_sizes_by_default(tmp_path):
    from no_docker.supervisor.isolation.listing import Listing
    from no_docker.supervisor.isolation.plan import Request, build_policy

    def policy(**kw: int) -> Policy:
        request = Request(command=("true",), work=str(tmp_path), **kw)
        return build_policy(request, Listing(), {"PATH": "/usr/bin", "HOME": "/nonexistent"},
                            probe_source=str(tmp_path / "probe.py"))

    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert policy().tmp_size == default_tmp_size(ram)
    assert policy(tmp_size=8 << 20).tmp_size == 8 << 20


# --- options and config -------------------------------------------------------------------


def test_options_are_parsed_and_bad_values_are_usage_errors():
    request = parse_args(["--tmp-size", "2G", "--memory-max=512M", "--", "true"])
    assert (request.tmp_size, request.memory_max) == (2 << 30, 512 << 20)
    assert (parse_args(["true"]).tmp_size, parse_args(["true"]).memory_max) == (None, None)
    for bad in (["--tmp-size", "lots"], ["--tmp-size", "512K"], ["--memory-max", "8M"],
                ["--memory-max", "1.5G"], ["--tmp-size", "1G", "--tmp-size", "2G"]):
        with pytest.raises(UsageError, match=bad[0]):
            parse_args([*bad, "--", "true"])


def test_bad_values_exit_2_with_one_line():
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--tmp-size", "big", "--",
                           "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--tmp-size 'big'" in done.stderr


def test_config_keys_and_the_command_line_wins(tmp_path):
    cfg = config.Config(str(tmp_path / "pyproject.toml"), {"tmp-size": "8G", "memory-max": 1 << 30})
    assert cfg.options == [("tmp-size", ["--tmp-size", "8G"]), ("memory-max", ["--memory-max", str(1 << 30)])]
    merged = config.merge(cfg, ["--tmp-size", "1G", "--", "true"], {"--tmp-size"})
    assert parse_args(merged).tmp_size == 1 << 30
    assert parse_args(merged).memory_max == 1 << 30
    for value in (True, 1.5, ["1G"]):
        with pytest.raises(UsageError, match="tmp-size: a size"):
            config.Config("p", {"tmp-size": value})


def test_help_names_both_options():
    from no_docker.supervisor.isolation.run_help import HELP

    assert "--tmp-size SIZE" in HELP and "--memory-max SIZE" in HELP


# --- the marker and where the memory cgroup goes -----------------------------------------


def test_marker_accepts_only_our_own_memory_cgroup():
    rec = markers.RunRecord(run_id=markers.new_run_id(), owner=Identity(os.getpid(), 1),
                            boot_id=ProcFS().boot_id(), command=["true"])
    rid = rec.run_id

    def check(memory: object) -> str | None:
        rec.cgroup = {"v2": None, "pids_v1": None, "memory_v1": memory}
        return markers.check_record(rec, rid, cgroup2_mounts=["/sys/fs/cgroup/unified"])

    assert check(f"/sys/fs/cgroup/memory/no-docker/{rid}") is None
    assert check(f"/sys/fs/cgroup/memory/ci/job/no-docker/{rid}") is None
    for bad in (f"/sys/fs/cgroup/memory/ci/{rid}", f"/sys/fs/cgroup/pids/no-docker/{rid}",
                f"/sys/fs/cgroup/memory/no-docker/other/no-docker/{rid}",
                f"/sys/fs/cgroup/memory/x/../no-docker/{rid}", "/sys/fs/cgroup/memory/victim", 7):
        assert check(bad), bad


def test_record_round_trip_keeps_the_memory_cgroup_and_old_records_stay_the_same():
    cg = cgroup.RunCgroup("/a", None, "/m")
    assert cgroup.RunCgroup.from_record(cg.as_record()).memory_v1 == "/m"
    assert "memory_v1" not in cgroup.RunCgroup("/a", "/b").as_record()
    assert cgroup.RunCgroup.from_record({"v2": None, "pids_v1": None, "memory_v1": "/m"}).dirs() == ["/m"]


def test_the_memory_cgroup_goes_below_ours_never_below_a_runs():
    text = "5:pids:/\n4:memory:/ci/job\n0::/\n"
    assert cgroup.own_v1_path(text, "memory") == "/ci/job"
    assert cgroup.own_v1_path(text, "cpu") is None
    assert cgroup.v1_memory_parent(text, root="/m") == "/m/ci/job"
    assert cgroup.v1_memory_parent("4:memory:/\n", root="/m") == "/m"
    assert cgroup.v1_memory_parent("4:memory:/t/no-docker/RUN\n", root="/m") == "/m/t"
    assert cgroup.v1_memory_parent("0::/\n", root="/m") is None
    own = cgroup.own_cgroup_dir("/sys/fs/cgroup/memory/ci/no-docker/R", text)
    assert own == "/sys/fs/cgroup/memory/ci/job"


def test_a_memory_limit_that_cannot_be_enforced_is_an_error_and_leaves_nothing(tmp_path):
    with pytest.raises(cgroup.CgroupError, match="memory") as err:
        cgroup.create("t-nomem", memory_max=64 << 20, parent=tmp_path / "nowhere", v1_pids_root=None,
                      v1_memory_parent_dir=tmp_path / "none")
    assert err.value.option == "--memory-max"
    fake = tmp_path / "fake"  # a directory that looks like a cgroup but has no limit file
    fake.mkdir()
    (fake / "cgroup.procs").touch()
    with pytest.raises(cgroup.CgroupError) as err:
        cgroup.create("t-nolimit", memory_max=64 << 20, parent=tmp_path / "nowhere", v1_pids_root=None,
                      v1_memory_parent_dir=fake)
    assert err.value.option == "--memory-max"
    assert not (fake / "no-docker" / "t-nolimit").exists()


memory_usable = os.geteuid() == 0 and (cgroup.v1_memory_parent() or "") != "" and os.path.exists(
    f"{cgroup.v1_memory_parent()}/cgroup.procs")


@pytest.mark.skipif(not memory_usable, reason="needs root and a v1 memory hierarchy")
def test_real_memory_cgroup_limits_and_is_removed():
    run_id = markers.new_run_id()
    cg = cgroup.create(run_id, memory_max=64 << 20)
    child = None
    try:
        assert cg is not None and cg.memory_v1 is not None and cg.v1()
        assert Path(cg.memory_v1, "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
        # What `end` would act on: the record of the real cgroup passes the marker check.
        rec = markers.RunRecord(run_id=run_id, owner=Identity(os.getpid(), 1), boot_id=ProcFS().boot_id(),
                                command=["true"], cgroup=cg.as_record())
        assert markers.check_record(rec, run_id) is None
        child = subprocess.Popen([sys.executable, "-c", "x = bytearray(256 << 20)"],
                                 preexec_fn=cg.spawn_hook())
        cg.close_hook()
        assert child.wait(timeout=60) == -9  # OOM-killed inside its own cgroup
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        assert cg is not None and cg.remove(time.monotonic() + 5)
    assert not os.path.exists(cg.memory_v1)


# --- the OOM killer's choice --------------------------------------------------------------


def _has_cap_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)  # CAP_SYS_RESOURCE = 24
    return False


def test_the_run_is_preferred_and_the_supervisor_protected_where_allowed():
    """In a child interpreter: what this test process is must not change."""
    script = ("import os, subprocess, time\n"
              "from no_docker.supervisor.ending import cgroup\n"
              "print(cgroup.protect_supervisor(), open('/proc/self/oom_score_adj').read().strip())\n"
              "p = subprocess.Popen(['sleep', '30'])\n"
              "print(cgroup.prefer_for_oom(p.pid), open(f'/proc/{p.pid}/oom_score_adj').read().strip())\n"
              "p.kill(); p.wait()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    protected, run = (line.split() for line in done.stdout.splitlines())
    if _has_cap_sys_resource():
        assert protected == ["True", str(cgroup.SUPERVISOR_OOM_SCORE_ADJ)]
    else:
        # Only CAP_SYS_RESOURCE may lower it: an ordinary user, and root here (its bounding set
        # lacks it: CapEff 000001fffeffffff, bit 24 clear).
        assert protected == ["False", Path("/proc/self/oom_score_adj").read_text().strip()]  # as it was
    assert run == ["True", str(cgroup.RUN_OOM_SCORE_ADJ)]
    assert not cgroup.prefer_for_oom(2 ** 22 + 1)  # no such process: said, not raised


# --- which bubblewrap can size a tmpfs ---------------------------------------------------


def test_only_a_bwrap_that_knows_size_and_is_not_setuid_gets_it(tmp_path):
    from no_docker.supervisor.isolation.policy import SIZE_OPTION_MARK, takes_size
    from no_docker.supervisor.run import bwrap_takes_size

    assert takes_size(b"\0usage\0" + SIZE_OPTION_MARK + b"\0", setuid=False)
    assert not takes_size(b"\0usage\0" + SIZE_OPTION_MARK + b"\0", setuid=True)
    assert not takes_size(b"bwrap: Unknown option %s\0--tmpfs\0", setuid=False)  # 0.6 and older
    wrapper = tmp_path / "bwrap"
    wrapper.write_text("#!/bin/sh\nexec /usr/bin/bwrap \"$@\"\n")
    wrapper.chmod(0o755)
    assert not bwrap_takes_size(str(wrapper))
    assert not bwrap_takes_size(str(tmp_path / "missing"))
    assert not bwrap_takes_size(str(tmp_path))  # a directory
    real = "/usr/bin/bwrap"
    if os.path.exists(real) and SIZE_OPTION_MARK in Path(real).read_bytes():
        assert bwrap_takes_size(real)
        setuid = tmp_path / "bwrap-setuid"
        setuid.write_bytes(Path(real).read_bytes())
        setuid.chmod(0o4755)  # only looked at, never run
        assert not bwrap_takes_size(str(setuid))


def test_a_size_asked_of_a_bwrap_that_cannot_is_refused(tmp_path):
    wrapper = tmp_path / "bwrap"
    wrapper.write_text("#!/bin/sh\nexec /usr/bin/bwrap \"$@\"\n")
    wrapper.chmod(0o755)
    env = {**os.environ, "NO_DOCKER_BWRAP": str(wrapper)}
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--tmp-size", "1G", "--",
                           "touch", "ran"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 125, done.stderr
    assert done.stderr.startswith("no-docker: --tmp-size: ") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "ran").exists()


def test_dev_is_remounted_read_only_after_everything_below_it():
    """bwrap's --dev tmpfs takes no --size: read-only once /dev/shm (sized) is mounted on it."""
    argv = _argv(POLICY.replace(tmp_size=64 << 20))
    ro = [argv[i + 1] for i, word in enumerate(argv) if word == "--remount-ro"]
    assert ro == ["/dev", "/"]
    assert argv.index("--remount-ro") > max(i for i, word in enumerate(argv) if word in ("--dev", "--tmpfs"))
