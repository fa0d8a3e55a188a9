"""Issue 17 part A: the lint accepts a defined subset of bash and refuses the rest.

One row per red-team class (and its neighbours): values bash evaluates as code, "constants"
that change, here-documents, BASH_ENV, sockets and fd duplication, printf escapes, arguments
after an allowed subcommand, environment that reroutes an engine client. Every row is refused;
the code is the row's contract (docs/mutants.md lists the codes). The accepted rows are the
subset's own forms, so the refusals cannot come from refusing everything.
"""

from __future__ import annotations

import pytest
from no_docker.mutants import lint_rules
from no_docker.mutants.lint import lint_source

SOCK = "/run/docker.sock"
EVIL = "x='a[$(docker rm -f c)]'\n"  # a constant whose text runs docker rm when evaluated arithmetically

REFUSED: list[tuple[str, str]] = [
    # values bash evaluates as code where the lint saw a constant (arithmetic contexts)
    (EVIL + "[[ 1 -eq x ]]", "arithmetic-unprovable"),
    (EVIL + '[[ 1 -eq "$x" ]]', "arithmetic-unprovable"),
    (EVIL + "[[ x -lt 2 ]]", "arithmetic-unprovable"),
    (EVIL + 'echo "${@:x}"', "arithmetic-unprovable"),
    (EVIL + 'echo "${y:x:1}"', "arithmetic-unprovable"),
    (EVIL + "y=([x]=1)", "unsupported"),
    (EVIL + "y=(1 2)", "unsupported"),
    (EVIL + "test -v \"$x\"", "unsupported"),
    (EVIL + "[ -v \"$x\" ]", "unsupported"),
    (EVIL + "[[ -v x ]]", "unsupported"),
    (EVIL + "[ \"$a\" \"$x\" ]", "parse-error"),
    (EVIL + "wait -p x", "unsupported"),
    (EVIL + "wait -p \"$x\" $!", "unsupported"),
    (EVIL + '[[ -n "${y[$x]}" ]]', "arithmetic-unprovable"),
    (EVIL + "[[ $(( x )) == 1 ]]", "arithmetic-unprovable"),
    (EVIL + "echo $[x]", "arithmetic-unprovable"),
    (EVIL + "(( x ))", "arithmetic-unprovable"),
    (EVIL + "let x", "arithmetic-unprovable"),
    (EVIL + 'shift "$x"', "unsupported"),
    (EVIL + 'printf "%d" "$x"', "unsupported"),
    # indirection and prompt expansion
    ('y=x; echo "${!y}"', "unsupported"),
    ('echo "${!DOCKER@}"', "unsupported"),
    ('p=\'$(docker rm -f c)\'; echo "${p@P}"', "unsupported"),
    ('echo "${p@Q}"', "unsupported"),
    ('echo "${p:=x}"', "unsupported"),
    ('echo "${p:-$(docker rm -f c)}"', "unsupported"),
    ('echo "${p^^}"', "unsupported"),
    # a "constant" that changes: printf -v, read, and the builtins behind command/exec
    ("x=ps; printf -v x rm; docker $x -f c", "unsupported"),
    ("x=ps; printf -vx rm; docker $x -f c", "unsupported"),
    ("x=ps; printf -v 'x' '%s' rm; docker \"$x\" -f c", "unsupported"),
    ("x=ps; command unset x; docker \"${x:-rm}\" -f c", "unsupported"),
    ("x=ps; command eval 'x=rm'; docker \"$x\" -f c", "unsupported"),
    ("x=ps; command read x < /dev/null; docker \"$x\" -f c", "unsupported"),
    ("x=ps; command export x=rm; docker \"$x\" -f c", "unsupported"),
    ("x=ps; exec read x; docker \"$x\"", "unsupported"),
    ("x=ps; builtin read x; docker \"$x\"", "command-not-allowed"),
    ("x=ps; e=eval; $e 'x=rm'; docker \"$x\" -f c", "unsupported"),
    ("x=ps; eval 'f() { :; }'", "unsupported"),
    ("x=ps; mapfile x < /dev/null", "command-not-allowed"),
    ("x=ps; getopts a x", "unsupported"),
    ("x=ps; unset x; docker \"${x:-rm}\"", "unsupported"),
    # here-documents: unquoted bodies expand, odd delimiters end where bash and the parser disagree
    ("cat <<EOF\n$x\n$(docker rm -f c)\nEOF", "unsupported"),
    ("cat <<\"EOF\"\nx\nEOF", "unsupported"),
    ("cat <<$'EOF'\nx\nEOF\ndocker rm -f c\nEOF", "parse-error"),
    ('cat <<$"EOF"\nx\nEOF\ndocker rm -f c\nEOF', "parse-error"),
    ("cat <<-'EOF'\n\tx\n\tEOF", "unsupported"),
    ("cat <<'E\\OF'\nx\nEOF", "unsupported"),
    ("cat <<'EOF' <<'EOG'\nx\nEOF\ny\nEOG", "parse-error"),
    ("cat <<'EOF' \"\nEOF\n\"\ndocker rm -f c\nEOF", "unsupported"),
    ("x=$(cat <<'EOF'\nEOF)\ndocker rm -f c\nEOF\n)", "parse-error"),
    ("cat <<'EOF'\nEOF \nx\nEOF", "unsupported"),
    # BASH_ENV: set -k, files rewritten after the lint read them
    ("set -k; bash -c true BASH_ENV=./no-docker-x", "unsupported"),
    ("set -o posix", "unsupported"),
    ("set -- rm -f c; docker \"$@\"", "unsupported"),
    ("printf '%s\\n' : > ./no-docker-e.sh\nfor i in 1 2; do BASH_ENV=./no-docker-e.sh bash -c :; "
     "printf '%s\\n' 'docker rm -f c' > ./no-docker-e.sh; done", "sensitive-variable"),
    ("printf '%s\\n' : > ./no-docker-e.sh\nBASH_ENV=./no-docker-e.sh bash -c :\n"
     "printf '%s\\n' 'docker rm -f c' > ./no-docker-e.sh\nBASH_ENV=./no-docker-e.sh bash -c :",
     "sensitive-variable"),
    ("w() { printf '%s\\n' 'docker rm -f c' > ./no-docker-e.sh; }\nprintf '%s\\n' : > ./no-docker-e.sh\n"
     "BASH_ENV=./no-docker-e.sh bash -c :", "sensitive-variable"),
    ("printf '%s\\n' : > ./no-docker-e.sh\nBASH_ENV=./no-docker-e.sh bash -c :\n"
     "curl -q -o ./no-docker-e.sh http://127.0.0.1:2375/_ping", "sensitive-variable"),
    ("printf '%s\\n' : > ./no-docker-d/e.sh\nBASH_ENV=./no-docker-d/e.sh bash -c :\nfor i in 1; do "
     "printf '%s\\n' 'docker rm -f c' > ./no-docker-d/./e.sh; done", "sensitive-variable"),
    ("printf '%s\\n' : > ./no-docker-e.sh\nexport BASH_ENV=./no-docker-e.sh", "unsupported"),
    ("printf '%s\\n' : > ./no-docker-e.sh\nenv BASH_ENV=./x bash -c :", "sensitive-variable"),
    # sockets: fd duplication is followed
    ("exec 3</dev/tcp/127.0.0.1/2375\nexec 1<&3\necho 'POST /containers/c/kill HTTP/1.0'", "unsupported"),
    ("exec 3</dev/tcp/127.0.0.1/2375\nexec 1>&3", "unsupported"),
    ("exec 3</dev/tcp/127.0.0.1/2375\nexec >./no-docker-o", "unsupported"),
    ("exec 3</dev/tcp/127.0.0.1/9\nnc -U /run/docker.sock < /dev/null 0<&3", "network-input-unprovable"),
    ("exec 3</dev/tcp/127.0.0.1/9\nnc -U /run/docker.sock 0<&3", "network-input-unprovable"),
    ("exec 3</dev/tcp/127.0.0.1/9\nsocat - UNIX-CONNECT:/run/docker.sock <&3", "network-input-unprovable"),
    ("exec 3</dev/tcp/127.0.0.1/9\n{ echo x; } >&3", "network-input-unprovable"),
    ("exec 3</dev/tcp/127.0.0.1/9\necho 'DELETE /containers/c HTTP/1.0' 1>&3", "network-input-unprovable"),
    ("exec 3</dev/tcp/127.0.0.1/9\ncat 4<&3", "unsupported"),
    ("cat 3<./no-docker-x", "unsupported"),
    ("exec 3<>/dev/tcp/127.0.0.1/2375", "parse-error"),
    ('cat < "$f"', "redirect-target-unprovable"),
    ("f() { echo 'POST /containers/c/kill HTTP/1.0'; echo; } > /dev/tcp/127.0.0.1/2375\nf", "unsupported"),
    ("f() ( echo hi ) > /etc/passwd\nf", "unsupported"),
    # printf escapes the lint did not decode smuggle a second request
    ("printf 'GET /_ping HTTP/1.0\\u000d\\u000aPOST /containers/c/kill HTTP/1.0\\r\\n\\r\\n' | "
     f"nc -N -U {SOCK}", "unsupported"),
    ("printf 'GET /_ping HTTP/1.0\\x0d\\x0aPOST /containers/c/kill HTTP/1.0\\r\\n\\r\\n' | "
     f"nc -N -U {SOCK}", "unsupported"),
    ("printf 'GET /_ping HTTP/1.0\\015\\012POST /x HTTP/1.0\\r\\n\\r\\n'", "unsupported"),
    ("printf '%b' 'GET /_ping HTTP/1.0\\r\\n\\r\\n'", "unsupported"),
    (f"printf 'GET /_ping HTTP/1.0\\rPOST /containers/c/kill HTTP/1.0\\r\\n\\r\\n' | nc -N -U {SOCK}",
     "network-input-unprovable"),
    ("echo $'\\u0041'", "unsupported"),
    ("echo $'\\cA'", "unsupported"),
    ('echo $"locale"', "unsupported"),
    # every argument after an allowed subcommand
    ("kubectl get pods --kubeconfig=./no-docker-k", "engine-option-not-allowed"),
    ("kubectl get pods --kubeconfig ./no-docker-k", "engine-option-not-allowed"),
    ("kubectl get pods -o go-template-file=./x", "engine-option-not-allowed"),
    ("kubectl get pods --token=x", "engine-option-not-allowed"),
    ("x='pods --kubeconfig=./k'; kubectl get $x", "engine-option-not-allowed"),
    ("xargs kubectl get pods", "xargs-open-command"),
    ("echo --kubeconfig=./k | xargs kubectl get pods", "xargs-open-command"),
    ("xargs -a ./no-docker-args kubectl get pods < /dev/null", "wrapper-option-not-allowed"),
    ("docker ps --kubeconfig=x", "engine-option-not-allowed"),
    ("docker ps -f x --unknown", "engine-option-not-allowed"),
    ("docker ps \"$opts\"", "engine-option-not-allowed"),
    ("docker ps extra", "engine-option-not-allowed"),
    ("docker version --format x y", "engine-option-not-allowed"),
    ("podman --connection prod ps", "engine-option-not-allowed"),
    ("sort -o ./no-docker-x y", "unsupported"),
    ("sort --compress-program=sh y", "unsupported"),
    ("date -s 2020-01-01", "unsupported"),
    ("head -n 1 \"$f\"", "unsupported"),
    # a value that splits where a wrapper takes one word
    ('v="1 3 rm"; timeout -k $v 3 docker ps', "wrapper-option-not-allowed"),
    ('d="3 rm -rf"; timeout $d docker ps', "wrapper-option-not-allowed"),
    ('n="1 rm"; xargs -n $n docker ps < /dev/null', "wrapper-option-not-allowed"),
    ('u="DOCKER_HOST rm"; env -u $u docker ps', "wrapper-option-not-allowed"),
    # environment that reroutes an engine client
    ("export DOCKER_CONTEXT=prod\ndocker ps", "unsupported"),
    ("DOCKER_CONTEXT=prod\ndocker ps", "sensitive-variable"),
    ("DOCKER_CONTEXT=prod bash -c 'docker ps'", "sensitive-variable"),
    ("DOCKER_CONTEXT=prod eval 'docker ps'", "sensitive-variable"),
    ("DOCKER_CONTEXT=prod command eval 'docker ps'", "sensitive-variable"),
    ("DOCKER_CONTEXT=prod timeout 3 docker ps", "engine-config-unproven"),
    ("http_proxy=http://example.com:80\ncurl -q http://127.0.0.1:2375/_ping", "sensitive-variable"),
    ("KUBECONFIG=./k kubectl get pods", "sensitive-variable"),
    ("XDG_CONFIG_HOME=./x docker ps", "sensitive-variable"),
    ("FOO=1 docker ps", "sensitive-variable"),
    ("f() { docker ps; }\nDOCKER_CONTEXT=prod f", "unsupported"),
    ("printf '%s\\n' '{\"credsStore\":\"x\"}' > ./no-docker-c/config.json\n"
     "DOCKER_CONFIG=./no-docker-c docker ps", "engine-config-unproven"),
    ("printf '%s\\n' '{}' > ./no-docker-c/plugins.json\nDOCKER_CONFIG=./no-docker-c docker ps",
     "engine-config-unproven"),
    # constructs outside the subset
    ("select x in a; do :; done", "unsupported"),
    ("coproc docker ps", "command-not-allowed"),
    ("cd /tmp", "command-not-allowed"),
    ("hash -p /tmp/x docker", "command-not-allowed"),
    ("type docker", "unsupported"),
    ("PATH=/tmp docker ps", "sensitive-variable"),
    ("Out=1", "unsupported"),
]

ACCEPTED = [
    "x=1\n[[ 1 -eq 1 ]]",
    '[ "$?" = 0 ]',
    '[ -n "$x" ]',
    "test -e ./no-docker-x",
    '[[ -n $x && ( $y == a* || ! -e f ) ]]',
    'd=${x:0:160}; echo "${d//$\'\\n\'/ } ${d%%$\'\\r\'*} ${#d} ${d:+ $d} ${3:-}"',
    "cat <<'EOF'\nanything $(docker rm -f c) `here` is literal\nEOF",
    "exec 3</dev/tcp/127.0.0.1/2375\nprintf 'GET /_ping HTTP/1.0\\r\\n\\r\\n' >&3\nhead -n 1 <&3",
    "(docker ps > /dev/null 2>&1 < /dev/null) &\nwait \"$!\"",
    "set +e +u +o pipefail",
    "printf '%s attempted %s%s\\n' a b c >> \"${NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log}\"",
    "xargs docker ps --filter label=x < /dev/null",
    "kubectl get pods -o json -n default",
    "docker --context default ps -a --filter label=x --format '{{.ID}}'",
    "docker inspect -f '{{.Id}}' -- c",
    "crictl --runtime-endpoint unix:///run/containerd/containerd.sock ps -a",
    "printf '%s\\n' 'docker ps' > ./no-docker-e.sh\nBASH_ENV=./no-docker-e.sh bash -c :",
    "id -un; date +%s; uname -r",
    "f() { local detail=${1:-}; echo \"$detail\"; return 0; }\nf a",
    "for i in a b; do echo \"$i\"; done",
]


def codes(source: str) -> list[str]:
    return [f.code for f in lint_source(source, "t.sh")]


def test_rows_use_known_codes():
    assert {code for _, code in REFUSED} <= set(lint_rules.REASONS)


@pytest.mark.parametrize(("source", "code"), REFUSED, ids=[s[:70] for s, _ in REFUSED])
def test_outside_the_subset_is_refused(source, code):
    got = codes(source)
    assert got, f"ACCEPTED: {source!r}"
    assert code in got, f"{source!r}: got {[str(f) for f in lint_source(source, 't.sh')]}"


@pytest.mark.parametrize("source", ACCEPTED, ids=[s[:70] for s in ACCEPTED])
def test_the_subset_is_accepted(source):
    assert lint_source(source, "t.sh") == [], source


def test_unsupported_finding_format():
    (finding,) = lint_source("echo ok\n  echo \"${x@P}\"\n", "p.sh")
    assert str(finding).startswith("p.sh:2:9: unsupported: ${x@P}")
