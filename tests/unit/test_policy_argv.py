"""``bwrap_argv`` is pure: these tests run nothing, they read the argv (DESIGN §4)."""

from __future__ import annotations

import pytest
from no_docker.supervisor.isolation.policy import (
    ALLOWED_ENV_NAMES,
    FLAG_PROPERTIES,
    GATE_FD_CHECK,
    GATE_GO_FD,
    GATE_REACHED_FD,
    GATE_SCRIPT,
    GATE_SHELL,
    PLAN_PATH,
    Policy,
    bwrap_argv,
    env_allowlist,
    env_name_denied,
)

POLICY = Policy(
    work="/home/u/proj", chdir="/home/u/proj/sub", home="/home/u",
    system_ro=("/usr", "/etc", "/var"), system_symlinks=(("/bin", "usr/bin"),),
    hidden=("/run", "/tmp", "/var/tmp", "/dev/shm", "/home/u"),
    toolchain_ro=("/home/u/.pyenv",), ro=("/data",), rw=("/scratch",),
    pinned=("/home/u/proj/.git",), protected=("/home/u/proj/.git/hooks", "/home/u/proj/.git/config"),
    masked=("/var/lib/x/engine.sock",), env=(("HOME", "/home/u"), ("PATH", "/usr/bin")),
    probe_source="/home/u/proj/supervisor/isolation/probe.py",
)
CMD = ["sh", "-c", "echo hi"]


def argv_of(policy: Policy = POLICY, command: list[str] = CMD) -> list[str]:
    return bwrap_argv(policy, command, bwrap="/usr/bin/bwrap", data_fd=5, block_fd=6, status_fd=8)


def options(argv: list[str]) -> list[str]:
    """The bwrap part (before the first ``--``)."""
    return argv[:argv.index("--")]


def position(argv: list[str], *items: str) -> int:
    """Index where ITEMS appear consecutively in ARGV."""
    n = len(items)
    for i in range(len(argv) - n + 1):
        if tuple(argv[i:i + n]) == items:
            return i
    raise AssertionError(f"{items} not in argv: {argv}")


def test_namespaces_session_and_capabilities():
    opts = options(argv_of())
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in opts
    assert position(opts, "--cap-drop", "ALL")
    assert "--share-net" not in opts


def test_every_option_is_traceable_to_a_property():
    opts = options(argv_of())
    flags = {item for item in opts if item.startswith("--")}
    unknown = flags - set(FLAG_PROPERTIES)
    assert not unknown, f"flags without a property: {unknown}"
    covered = {prop for flag in flags for prop in FLAG_PROPERTIES[flag]}
    # P7 (only fds 0-2) is not a bwrap flag: the supervisor's spawn closes the rest.
    assert covered >= {f"P{i}" for i in range(1, 12)} - {"P7"}


def test_mount_order_hides_then_exposes_then_masks():
    argv = argv_of()
    system = position(argv, "--ro-bind", "/usr", "/usr")
    proc = position(argv, "--proc", "/proc")
    tmpfs_home = position(argv, "--tmpfs", "/home/u")
    toolchain = position(argv, "--ro-bind", "/home/u/.pyenv", "/home/u/.pyenv")
    work = position(argv, "--bind", "/home/u/proj", "/home/u/proj")
    pinned = position(argv, "--bind", "/home/u/proj/.git", "/home/u/proj/.git")
    hooks = position(argv, "--ro-bind", "/home/u/proj/.git/hooks", "/home/u/proj/.git/hooks")
    mask = position(argv, "--ro-bind", "/dev/null", "/var/lib/x/engine.sock")
    remount = position(argv, "--remount-ro", "/")
    assert system < proc < tmpfs_home < toolchain < work < pinned < hooks < mask < remount


def test_hidden_parents_before_children():
    policy = Policy(**{**POLICY.__dict__, "hidden": ("/run/user/1000", "/run")})
    argv = argv_of(policy)
    assert position(argv, "--tmpfs", "/run") < position(argv, "--tmpfs", "/run/user/1000")


def test_ro_inside_work_dir_wins_over_the_work_bind():
    policy = Policy(**{**POLICY.__dict__, "ro": ("/home/u/proj/vendor",), "rw": ()})
    argv = argv_of(policy)
    assert position(argv, "--bind", "/home/u/proj", "/home/u/proj") < position(
        argv, "--ro-bind", "/home/u/proj/vendor", "/home/u/proj/vendor")


def test_environment_is_exactly_the_policy_env():
    opts = options(argv_of())
    pairs = [(opts[i + 1], opts[i + 2]) for i, item in enumerate(opts) if item == "--setenv"]
    assert pairs == list(POLICY.env)
    assert opts.index("--clearenv") < opts.index("--setenv")


def test_held_for_the_proof_then_the_gate_then_the_command():
    argv = argv_of()
    first = argv.index("--")
    assert position(argv, "--block-fd", "6") < first  # bwrap holds the sandbox for the prover
    assert argv[first + 1:first + 3] == [GATE_SHELL, "-c"]
    assert argv[first + 3] == GATE_SCRIPT and argv[first + 4] == "no-docker-gate"
    assert argv[first + 5:] == CMD
    assert position(argv, "--ro-bind-data", "5", PLAN_PATH) < first
    assert position(argv, "--json-status-fd", "8") < first
    # The gate reads its verdict on fd 3 and says it runs on fd 4 (placed by the spawn), checks
    # that only 0-2 cross into CMD, and execs CMD only after "go".
    assert "<&3" in GATE_SCRIPT and ">&4" in GATE_SCRIPT and GATE_FD_CHECK in GATE_SCRIPT
    assert GATE_SCRIPT.index('[ "$go" = go ] || exit 125') < GATE_SCRIPT.index('exec "$@"')
    assert (GATE_GO_FD, GATE_REACHED_FD) == (3, 4)


def test_with_a_terminal_the_gate_makes_it_the_commands_controlling_terminal():
    argv = bwrap_argv(POLICY, CMD, bwrap="/usr/bin/bwrap", data_fd=5, block_fd=6, terminal=True)
    script = argv[argv.index("--") + 3]
    assert "exec '/usr/bin/setsid' '/bin/sh' '-c' 'for n in 0 1 2; do" in script
    assert script.endswith("""'no-docker-tty' "$@"\n""")


def test_empty_command_is_refused():
    with pytest.raises(ValueError, match="empty command"):
        argv_of(command=[])


@pytest.mark.parametrize("name", ["DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "CONTAINER_HOST",
                                  "CONTAINERD_ADDRESS", "KUBECONFIG", "BUILDKIT_HOST", "SSH_AUTH_SOCK",
                                  "DBUS_SESSION_BUS_ADDRESS", "BASH_ENV", "ENV", "ZDOTDIR",
                                  "PROMPT_COMMAND", "LD_PRELOAD", "BASH_FUNC_docker%%", "XDG_RUNTIME_DIR"])
def test_denied_names_never_pass_even_when_kept(name):
    assert env_name_denied(name)
    assert name not in env_allowlist({name: "x"}, keep=(name,))


def test_allowlist_passes_only_known_and_kept_names():
    outside = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "SECRET": "s", "MY_VAR": "1"}
    assert env_allowlist(outside) == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C"}
    assert env_allowlist(outside, keep=("MY_VAR",))["MY_VAR"] == "1"
    assert all(not env_name_denied(n) for n in ALLOWED_ENV_NAMES)


def test_init_memory_masked_right_after_proc_and_seccomp_fd_passed_when_given():
    opts = options(argv_of())
    proc = position(opts, "--proc", "/proc")
    assert proc < position(opts, "--ro-bind", "/dev/null", "/proc/1/mem") < position(opts, "--dev", "/dev")
    assert position(opts, "--ro-bind", "/dev/null", "/proc/1/task/1/mem")
    assert "--seccomp" not in opts
    with_filter = bwrap_argv(POLICY, CMD, bwrap="/usr/bin/bwrap", data_fd=5, block_fd=6, status_fd=8,
                             seccomp_fd=9)
    assert position(options(with_filter), "--seccomp", "9")


def test_others_control_a_path_only_through_a_directory_they_can_change():
    """plan.others_control (issue 24): a listed socket is masked only where nobody but root and
    the caller can unlink or bind it; elsewhere no mask holds and the mediation alone decides."""
    from no_docker.supervisor.isolation.plan import others_control

    me, other = 1000, 1001
    root_dir, my_dir, sticky = (0, 0o40755), (me, 0o40700), (0, 0o41777)
    assert not others_control([root_dir, root_dir], 0, me)  # /opt/engine/docker.sock of root
    assert not others_control([root_dir, my_dir], me, me)
    assert not others_control([root_dir, root_dir], other, me)  # theirs, in root's dir: they cannot unlink it
    assert not others_control([root_dir, sticky], me, me)  # a /tmp-like dir: ours stays ours
    assert others_control([root_dir, (other, 0o40755)], other, me)  # their directory
    assert others_control([(other, 0o40755), root_dir], 0, me)  # they can rename what is below them
    assert others_control([root_dir, (0, 0o40775)], 0, me)  # group-writable, not sticky
    assert others_control([root_dir, (0, 0o40777)], 0, me)
    assert others_control([root_dir, sticky], other, me)  # theirs to unlink and bind again
    assert others_control([root_dir, sticky], None, me)  # a free name there: anyone's to bind
    assert not others_control([root_dir, root_dir], None, me)


def test_controlled_by_others_reads_the_chain_of_a_real_path(tmp_path):
    import os

    from no_docker.supervisor.isolation.plan import controlled_by_others

    me = os.geteuid()
    (tmp_path / "mine").mkdir(mode=0o755)
    os.chmod(tmp_path / "mine", 0o755)
    chain_is_trusted = not any(os.stat(p).st_uid not in (0, me) or (os.stat(p).st_mode & 0o022 and not
                               os.stat(p).st_mode & 0o1000) for p in [tmp_path, *tmp_path.parents])
    assert controlled_by_others(str(tmp_path / "mine" / "s.sock"), me) is not chain_is_trusted
    os.chmod(tmp_path / "mine", 0o777)
    assert controlled_by_others(str(tmp_path / "mine" / "s.sock"), me)
    assert controlled_by_others(str(tmp_path / "gone" / "s.sock"), me)  # unreadable chain: the mediation's


def test_a_project_under_tmp_is_shown_again_over_the_fresh_tmp():
    """A clone under /tmp: the work dir, the venv and checkout running no-docker, and --ro/--rw
    paths there are bound *after* the tmpfs over /tmp (a later mount covers an earlier one), so
    they are visible inside; the rest of the host's /tmp stays hidden (T-12)."""
    from no_docker.supervisor.isolation.plan import MountView

    policy = Policy(**{**POLICY.__dict__, "work": "/tmp/clone/proj", "chdir": "/tmp/clone/proj",
                       "toolchain_ro": ("/tmp/clone/.venv", "/tmp/clone/supervisor"),
                       "ro": ("/tmp/data",), "rw": ("/tmp/cache",), "pinned": (), "protected": (),
                       "masked": ()})
    argv = argv_of(policy)
    tmpfs = position(argv, "--tmpfs", "/tmp")
    for kind, path in (("--ro-bind", "/tmp/clone/.venv"), ("--ro-bind", "/tmp/clone/supervisor"),
                       ("--bind", "/tmp/clone/proj"), ("--ro-bind", "/tmp/data"), ("--bind", "/tmp/cache")):
        assert position(argv, kind, path, path) > tmpfs, path
    view = MountView(policy)
    for path in ("/tmp/clone/proj/x", "/tmp/clone/.venv/bin/python", "/tmp/clone/supervisor/run.py",
                 "/tmp/data/f", "/tmp/cache/f"):
        assert view.visible(path), path
    for path in ("/tmp/secret", "/tmp/clone/tests", "/tmp/clone", "/tmp"):
        assert not view.visible(path), path
