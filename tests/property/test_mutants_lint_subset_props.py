"""Property (issue 17 A): payloads generated from the accepted subset pass; mutations leave it.

The generator builds payloads only from the subset docs/mutants.md writes down (read-only
engine commands with allowlisted arguments, constant printf into run-dir files, lower-case
constants, if/for/subshell/$(...)/bash -c/timeout around them). Every one must be accepted,
so the refusals below cannot come from refusing everything. Each mutation then plants one
construct outside the subset (an arithmetic context over a value, indirection, a
name-assigning builtin, an odd here-document, fd duplication onto a socket, an escape printf
would decode, an argument after an allowed subcommand, environment that reroutes a client)
at a random statement: the result must be refused.
"""

from __future__ import annotations

import shlex

from hypothesis import given, note, settings
from hypothesis import strategies as st
from no_docker.mutants.lint import lint_source

NAMES = st.sampled_from(["a", "b", "out", "route", "n1"])
SAFE_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.=", min_size=1, max_size=8)

ENGINE = st.sampled_from([
    "docker ps", "docker ps -a --filter label=no-docker-route=x", "docker images -q",
    "docker version --format '{{.Server.Version}}'", "docker info", "docker system df",
    "docker -H unix:///run/docker.sock ps", "docker --context default ps -q",
    "podman --remote ps", "crictl --runtime-endpoint unix:///run/crio/crio.sock version",
    "kubectl get pods -o json", "ctr --address /run/containerd/containerd.sock version",
    "curl -q -sS -o /dev/null --unix-socket /run/docker.sock 'http://d/_ping?route=x'",
])


@st.composite
def simple(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(ENGINE) + " > /dev/null 2>&1 < /dev/null"
    if kind == 1:
        return f"printf '%s\\n' {shlex.quote(draw(SAFE_WORD))} > ./no-docker-{draw(NAMES)}.txt"
    if kind == 2:
        return f"echo {shlex.quote(draw(SAFE_WORD))}"
    if kind == 3:
        return f"timeout -k 1 3 {draw(ENGINE)} < /dev/null"
    if kind == 4:
        return f"xargs {draw(ENGINE.filter(lambda e: not e.startswith('curl')))} < /dev/null"
    return ": >> \"$HOME/.bashrc\""


@st.composite
def statement(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 6 if depth < 2 else 0))
    if kind <= 1:
        return draw(simple())
    inner = draw(statement(depth + 1))
    if kind == 2:
        return f"out=$( {inner} )"
    if kind == 3:
        return f"if [ \"$?\" = 0 ]; then\n  {inner}\nfi"
    if kind == 4:
        return f"for i in a b; do\n  {inner}\ndone"
    if kind == 5:
        return f"( {inner} ) &\nwait \"$!\""
    return f"bash -c {shlex.quote(inner)} < /dev/null"


PAYLOADS = st.lists(statement(), min_size=1, max_size=5).map("\n".join)

# Each mutation is one line outside the subset; each would change state or run code if the
# lint let it through (see tests/unit/test_mutants_lint_subset.py for the classes).
EVIL_LINES = [
    "x='a[$(docker rm -f c)]'; [[ 1 -eq x ]]",
    "x='a[$(docker rm -f c)]'; echo \"${@:x}\"",
    "x='a[$(docker rm -f c)]'; test -v \"$x\"",
    "p='$(docker rm -f c)'; echo \"${p@P}\"",
    "y=p; echo \"${!y}\"",
    "v=ps; printf -v v rm; docker $v -f c",
    "v=ps; command unset v; docker \"${v:-rm}\" c",
    "v=ps; command eval 'v=rm'; docker \"$v\" c",
    "cat <<EOF\n$(docker rm -f c)\nEOF",
    "set -k; bash -c true BASH_ENV=./no-docker-x",
    "exec 3</dev/tcp/127.0.0.1/2375; exec 1<&3; echo 'POST /containers/c/kill HTTP/1.0'",
    "nc -U /run/docker.sock < /dev/null 0<&3",
    "printf 'GET /_ping HTTP/1.0\\u000d\\u000aPOST /containers/c/kill HTTP/1.0\\r\\n\\r\\n'"
    " | nc -N -U /run/docker.sock",
    "kubectl get pods --kubeconfig=./no-docker-k",
    "export DOCKER_CONTEXT=prod; docker ps",
    "DOCKER_CONTEXT=prod bash -c 'docker ps'",
    "docker rm -f c",
    "sort -o ./no-docker-x y",
]
# Argument mutations of an allowed engine command: a flag the read-only allowlist does not hold.
EVIL_ARGS = ["--kubeconfig=./k", "--token=x", "-o go-template-file=./t", "--unknown", "\"$opts\"",
             "$(docker rm -f c)"]


@settings(max_examples=120, deadline=None)
@given(PAYLOADS)
def test_payloads_from_the_subset_are_accepted(payload):
    note(payload)
    findings = lint_source(payload, "gen.sh")
    assert findings == [], "\n".join(map(str, findings)) + "\n" + payload


@settings(max_examples=150, deadline=None)
@given(st.lists(statement(), min_size=1, max_size=4), st.sampled_from(EVIL_LINES), st.data())
def test_a_line_outside_the_subset_is_refused_wherever_it_stands(statements, evil, data):
    at = data.draw(st.integers(0, len(statements)), label="at")
    wrap = data.draw(st.sampled_from(["{}", "( {} )", "out=$( {} )", "if true; then\n{}\nfi"]), label="wrap")
    lines = [*statements[:at], wrap.format(evil), *statements[at:]]
    payload = "\n".join(lines)
    note(payload)
    assert lint_source(payload, "gen.sh"), f"ACCEPTED:\n{payload}"


@settings(max_examples=100, deadline=None)
@given(ENGINE.filter(lambda e: not e.startswith("curl")), st.sampled_from(EVIL_ARGS), st.data())
def test_every_engine_argument_is_checked_to_the_last(engine, evil, data):
    words = engine.split(" ")
    at = data.draw(st.integers(len(words) - 1 if words[0] != "kubectl" else 2, len(words)), label="at")
    payload = " ".join([*words[:at], evil, *words[at:]])
    note(payload)
    assert lint_source(payload, "gen.sh"), f"ACCEPTED: {payload}"
