"""A run's memory as an ordinary user (uid 65534, no cgroup of its own): the tmpfs sizes and the
run's raised ``oom_score_adj`` hold without privilege; ``--memory-max``, which needs a cgroup,
refuses the run with one line (125) and CMD never runs. Skipped as test_isolation_nonroot is."""

from __future__ import annotations

from test_isolation_nonroot import as_nobody, world  # noqa: F401 - world is a fixture


def test_memory_max_without_a_cgroup_refuses_the_run(world):  # noqa: F811
    done = as_nobody(world, ["run", "--memory-max", "64M", "--", "touch", "ran"])
    assert done.returncode == 125, done.stderr
    assert done.stderr.startswith("no-docker: --memory-max: ") and done.stderr.count("\n") == 1, done.stderr
    assert not (world / "work" / "ran").exists()


def test_tmpfs_bound_and_oom_preference_hold_without_a_cgroup(world):  # noqa: F811
    # --end-timeout 1: where another root process holds a pid namespace of its own, an ordinary
    # user's ending cannot be shown (a different issue); what is asserted here is CMD's view.
    script = "cat /proc/self/oom_score_adj; df -k /tmp | tail -1; head -c 5M /dev/zero > /tmp/fill"
    done = as_nobody(world, ["run", "--end-timeout", "1", "--tmp-size", "4M", "--", "sh", "-c", script])
    lines = done.stdout.splitlines()
    assert lines[:1] == ["1000"], done.stdout + done.stderr
    assert lines[1].split()[1] == str(4 << 10), lines  # 1K-blocks of the run's /tmp
    assert "No space left on device" in done.stderr, done.stderr
