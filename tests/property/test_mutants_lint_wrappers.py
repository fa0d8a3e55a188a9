"""Property: no composition of wrappers around a destructive command is ever accepted.

The strategy wraps a destructive core in up to four layers drawn from the ways a script can
hide what it runs: ``bash -c``, ``sh -c``, ``env``, ``command``, ``exec``, ``timeout``, ``sudo``,
``nohup``, ``$(...)``, backticks, quote-split names ("dock"er), a variable holding the name,
``xargs``, a pipe into bash, ``eval`` of constant or computed text. The control property runs the
*see-through* layers around read-only cores and expects acceptance, so the first property can
never pass by rejecting everything.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from no_docker.mutants.lint import lint_source

DESTRUCTIVE = [
    "docker rm -f x", "docker rmi -f img", "docker system prune -af", "docker image prune -a",
    "docker container rm x", "docker compose down", "docker run --rm alpine true", "docker kill x",
    "podman rm -f x", "nerdctl rm x", "ctr images rm x", "crictl rmi x", "kubectl delete pod x",
    "rm -rf ./build", "curl -q -X DELETE --unix-socket /run/docker.sock http://d/containers/x",
    "curl -q -d @- --unix-socket /run/docker.sock http://d/containers/create",
]
READ_ONLY = ["docker ps", "docker images", "docker version", "docker info", "podman ps",
             "kubectl get pods", "curl -q -sS --unix-socket /run/docker.sock http://d/_ping"]


def split_name(cmd: str, style: int) -> str:
    """Rewrite the first word with quote tricks bash removes: "dock"er, 'd'ocker, d\\ocker."""
    name, _, rest = cmd.partition(" ")
    if len(name) < 2 or not name.isalnum():
        return cmd
    head, tail = name[:2], name[2:]
    forms = [f'"{head}"{tail}', f"'{head}'{tail}", f"{name[0]}\\{name[1:]}", f'"{name}"']
    return f"{forms[style % len(forms)]} {rest}".rstrip()


# (layer name, see-through?, function of (command text, simple?) -> (text, simple?))
Layer = tuple[str, bool, Callable[[str, bool], tuple[str, bool]]]


def argv_layer(prefix: str) -> Callable[[str, bool], tuple[str, bool]]:
    def wrap(cmd: str, simple: bool) -> tuple[str, bool]:
        inner = cmd if simple else f"bash -c {shlex.quote(cmd)}"
        return f"{prefix} {inner}", True
    return wrap


LAYERS: list[Layer] = [
    ("bash -c", True, lambda c, s: (f"bash -c {shlex.quote(c)}", True)),
    ("sh -c", True, lambda c, s: (f"sh -c {shlex.quote(c)}", True)),
    ("env", True, argv_layer("env")),
    ("env -u", True, argv_layer("env -u DOCKER_CONTEXT")),
    ("command", True, argv_layer("command")),
    ("timeout", True, argv_layer("timeout -k 1 3")),
    ("sudo", True, argv_layer("sudo -n")),
    ("nohup", True, argv_layer("nohup")),
    ("exec", True, lambda c, s: (f"(exec {c if s else 'bash -c ' + shlex.quote(c)})", False)),
    ("$()", True, lambda c, s: (f"out=$( {c} )", False)),
    ("echo $()", True, lambda c, s: (f'echo "$( {c} )"', True)),
    ("backticks", True, lambda c, s: (f"out=`{c}`", False) if "`" not in c and "\\" not in c
     else (f"out=$( {c} )", False)),
    ("quote split", True, lambda c, s: (split_name(c, len(c)), True) if s else (c, s)),
    # One name per layer (the text grows with each): a name assigned twice is never constant.
    ("variable name", True, lambda c, s: (f'v{len(c)}={c.partition(" ")[0]}\n"$v{len(c)}" '
                                          f'{c.partition(" ")[2]}', False)
     if s and c.partition(" ")[0].isalnum() else (c, s)),
    ("eval", True, lambda c, s: (f"eval {shlex.quote(c)}", False)),  # a builtin: not for env/xargs
    # xargs may append arguments: the lint sees through it only to engine CLIs, never to curl.
    ("xargs", True, lambda c, s: (f"xargs {c} < /dev/null", True) if s else (c, s)),
    ("subshell &", True, lambda c, s: (f"( {c} ) &\nwait", False)),
    ("pipe into bash", False, lambda c, s: (f"printf '%s\\n' {shlex.quote(c)} | bash", False)),
    ("eval computed", False, lambda c, s: (f"eval \"$(printf '%s' {shlex.quote(c)})\"", True)),
    ("computed name", False, lambda c, s: (f'"$(printf {c.partition(" ")[0]})" {c.partition(" ")[2]}', True)
     if s and c.partition(" ")[0].isidentifier() else (f"bash -c \"$X\" {shlex.quote(c)}", True)),
    ("xargs appends", False, lambda c, s: (f"echo {c.partition(' ')[2]} | xargs {c.partition(' ')[0]}", False)
     if s and " " in c and c.partition(" ")[0].isidentifier()
     else (f"sh -c \"$CMD\" {shlex.quote(c)}", True)),
]
SEE_THROUGH = [layer for layer in LAYERS if layer[1]]


def compose(core: str, layers: list[Layer]) -> str:
    text, simple = core, True
    for _, _, wrap in layers:
        text, simple = wrap(text, simple)
    return text


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DESTRUCTIVE), st.lists(st.sampled_from(LAYERS), max_size=4))
def test_no_wrapped_destructive_command_is_accepted(core, layers):
    text = compose(core, layers)
    note(f"layers={[name for name, _, _ in layers]}\n{text}")
    findings = lint_source(text, "composed.sh")
    assert findings, f"ACCEPTED a destructive composition:\n{text}"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(READ_ONLY), st.lists(st.sampled_from(SEE_THROUGH), max_size=3))
def test_see_through_layers_around_read_only_commands_are_accepted(core, layers):
    assume(not (core.startswith("curl") and any(name == "xargs" for name, _, _ in layers)))
    # eval runs its text in the caller's shell, where the subset refuses assignments (issue 17):
    # eval of a text that assigns (a variable name, out=$(...)) is refused by design.
    names = [name for name, _, _ in layers]
    assume(not any(n == "eval" and {"variable name", "$()", "backticks"} & set(names[:i])
                   for i, n in enumerate(names)))
    text = compose(core, layers)
    note(f"layers={[name for name, _, _ in layers]}\n{text}")
    findings = lint_source(text, "composed.sh")
    assert findings == [], "\n".join(map(str, findings)) + f"\n{text}"
