"""T-09: the environment inside is an allowlist: no engine or start-up variable crosses,
DOCKER_CONFIG is an empty directory, HOME is the empty home; --keep-env passes a name, and
refuses a denied one."""

from __future__ import annotations

import json
import os

from isolation_cases import inside_python, require_bwrap, run

DENIED = {"DOCKER_HOST": "unix:///run/docker.sock", "DOCKER_CONTEXT": "evil", "CONTAINER_HOST": "unix:///x",
          "KUBECONFIG": "/root/.kube/config", "BUILDKIT_HOST": "unix:///x", "CONTAINERD_ADDRESS": "/x",
          "SSH_AUTH_SOCK": "/tmp/ssh-agent", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x", "BASH_ENV": "/x",
          "ENV": "/x", "ZDOTDIR": "/x", "PROMPT_COMMAND": "docker ps", "PODMAN_HOST": "x"}
INSIDE = ("import json, os; c = os.environ.get('DOCKER_CONFIG', ''); "
          "print(json.dumps({'env': dict(os.environ), 'config_entries': os.listdir(c) if c else None}))")


def test_only_allowlisted_names_cross(tmp_path):
    require_bwrap()
    env = dict(os.environ, **DENIED, SECRET_TOKEN="s3cr3t", MY_SETTING="kept")
    result = run(["--quiet", "--keep-env", "MY_SETTING", "--", *inside_python(INSIDE)], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    inside = said["env"]
    for name in [*DENIED, "SECRET_TOKEN"]:
        assert name not in inside, f"{name} crossed into the run"
    assert inside["MY_SETTING"] == "kept"
    assert said["config_entries"] == []
    assert inside["HOME"] and inside["HOME"] == os.path.realpath(os.environ["HOME"])
    assert not any(n.startswith(("DOCKER_", "CONTAINER_")) and n != "DOCKER_CONFIG" for n in inside)


def test_keep_env_of_a_denied_name_is_a_usage_error(tmp_path):
    result = run(["--keep-env", "DOCKER_HOST", "--", "true"], cwd=tmp_path)
    assert result.returncode == 2
    assert "--keep-env DOCKER_HOST: refused" in result.stderr
