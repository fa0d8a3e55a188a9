"""The lint's model of bash, measured against bash and dash (issue 27).

Hypothesis writes programs of (and around) the accepted subset: assignments in every position
(plain, in the background, in a pipeline, in a subshell, in a group, in a function; `local`
with and without a value), words quoted every way (single, double with literal newlines and
CRs and backslash escapes, `$'...'`), `bash -c` and `sh -c` nesting (dash runs the latter here),
constant `eval`, here-documents, constant requests piped to `nc`, and the pinned raw-socket
helper with arbitrary arguments. For every program the lint accepts, bash runs it against
recording stubs (tests/mutants_recording.py: nothing connects anywhere) and every engine
command line, every byte given to a raw client and every helper call that ran must be one the
lint predicted (``lint.lint_model``); any difference fails with hypothesis's shrunk program.

Bounded in the suite (``DIFFERENTIAL_EXAMPLES``, about 20 s on two shared cores); with
``NO_DOCKER_SLOW=1`` it tries ``SLOW_EXAMPLES``. Run with ``--hypothesis-show-statistics`` for
how many programs were accepted (and so compared) and how many refused.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from mutants_recording import TcpRecorder, compare, run_recorded
from no_docker.mutants import pins
from no_docker.mutants.lint import lint_model

REPO = Path(__file__).resolve().parents[2]
RAWSOCK = (REPO / "mutants" / "helpers" / "rawsock.py").read_text()
HASHES = pins.helper_hashes()
SLOW = os.environ.get("NO_DOCKER_SLOW") == "1"
DIFFERENTIAL_EXAMPLES = 150
SLOW_EXAMPLES = 3000

NAMES = ("a", "b", "opt")
# raw text pieces: what a quoted word or a value holds (engine words, blanks, line ends, quotes)
PIECES = ("ps", "rm", "-f", "-a", "-l", "inspect", "web", " ", "\n", "\r", "\t", "\\", '"', "'", "$",
          "#", "db", "docker ", ";", "x")
CONSTANT_WORDS = ("ps", "rm", "inspect", "images", "-a", "-l", "-q", "-f", "--filter", "label=x", "web",
                  "db", "''", '""', "-la", "--format", "{{.ID}}", "info", "insp\\\nect", "web\r", "$'a\\0b'",
                  "$'\\777'")


def single(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def double(text: str, continuation: bool) -> str:
    body = "".join("\\" + c if c in '"\\$`' else c for c in text)
    if continuation:
        body = body.replace(" ", "\\\n ", 1)  # a backslash-newline: removed by bash
    return '"' + body + '"'


def ansi_c(text: str, octal: bool) -> str:
    table = {"\n": "\\n", "\r": "\\r" if not octal else "\\015", "\t": "\\t", "\\": "\\\\", "'": "\\'"}
    return "$'" + "".join(table.get(c, c) for c in text) + "'"


@st.composite
def quoted(draw: st.DrawFn) -> str:
    text = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=5)))
    how = draw(st.sampled_from(("single", "double", "double-continued", "ansi", "ansi-octal")))
    if how == "single":
        return single(text)
    if how.startswith("double"):
        return double(text, how.endswith("continued"))
    return ansi_c(text, how.endswith("octal"))


def expansion(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from((f"${name}", f'"${name}"', f"${{{name}:-ps}}", f'"${{{name}}}"', f"${{{name}-}}"))


WORD = st.one_of(st.sampled_from(CONSTANT_WORDS), quoted(), st.sampled_from(NAMES).flatmap(expansion))
# values that make a read-only-looking command when they are what the lint thinks they are
VALUE = st.one_of(st.sampled_from(("ps", "-a", "-l", "-q", "images", "'ps -a'", '"-a"', "''", "web", "rm",
                                   "inspect", "'-l rm'")), quoted())
GLOBALS = ("", "", "-D ", "-l info ", "--log-level info ")
SUBCOMMANDS = ("ps", "ps", "images", "version", "info", "inspect", "container ls")
ARGUMENTS = ("-a", "-q", "--filter label=x", "--format '{{.ID}}'", "--no-trunc", "web", "-s")


@st.composite
def assignment(draw: st.DrawFn) -> str:
    name, value = draw(st.sampled_from(NAMES)), draw(VALUE)
    where = draw(st.sampled_from(("plain", "background", "pipeline", "subshell", "group", "and")))
    return {"plain": f"{name}={value}", "background": f"{name}={value} &", "pipeline": f"{name}={value} | :",
            "subshell": f"( {name}={value} )", "group": f"{{ {name}={value}; }}",
            "and": f"true && {name}={value}"}[where]


@st.composite
def engine(draw: st.DrawFn) -> str:
    """docker [GLOBAL] SUBCOMMAND [ARGS], each part a constant of the allowlists or any word."""
    some_word = st.one_of(WORD, st.sampled_from(NAMES).flatmap(expansion))

    def mostly(constants: tuple[str, ...]) -> st.SearchStrategy[str]:
        return st.integers(0, 4).flatmap(lambda k: some_word if k == 0 else st.sampled_from(constants))

    glob = draw(mostly(GLOBALS))
    sub = draw(mostly(SUBCOMMANDS))
    args = draw(st.lists(mostly(ARGUMENTS), max_size=3))
    prefix = draw(st.sampled_from(("", "", "timeout 5 ", "env ", "command ")))
    return prefix + "docker " + glob + " ".join([sub, *args])


REQUESTS = ("GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n",
            "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\nDELETE /x HTTP/1.1\r\n\r\n",
            "GET /version HTTP/1.0\r\n\r\n",
            # printable in bash; dash's echo decodes \0NNN into CR LF (issue 27 #5)
            "HEAD /info HTTP/1.1\r\nX-No-Docker-Route: a\\0015\\0012\\0015\\0012\r\n\r\n",
            "GET /_ping HTTP/1.1\r\nX-No-Docker-Route: a\\r\\n\\r\\nb\r\n\r\n")
SENDS = ("printf-escapes", "printf-literal", "echo")


def raw_program(request: str, how: str) -> str:
    if how == "printf-escapes":
        fmt = double(request.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n"), False)
        return f"printf {fmt} | nc -U /run/docker.sock"
    if how == "printf-literal":  # literal CR LF inside the double quotes
        return f"printf {double(request, False)} | nc -U /run/docker.sock"
    return f"echo {single(request[:-1])} | nc -U /run/docker.sock"  # echo adds the last \n


@st.composite
def raw_client(draw: st.DrawFn) -> str:
    return raw_program(draw(st.sampled_from(REQUESTS)), draw(st.sampled_from(SENDS)))


SHELL_WRAPS = {"none": lambda t: t, "bash-single": lambda t: f"bash -c {single(t)}",
               "bash-double": lambda t: f"bash -c {double(t, False)}",
               "bash-ansi": lambda t: f"bash -c {ansi_c(t, False)}",
               "sh-single": lambda t: f"sh -c {single(t)}",
               "sh-double": lambda t: f"sh -c {double(t, False)}", "eval": lambda t: f"eval {single(t)}",
               "sh-in-bash": lambda t: f"bash -c {single('sh -c ' + single(t))}"}


HELPER_DEF = ("rawsock() {\n  python3 -I -S - \"$@\" <<'NO_DOCKER_HELPER'\n" + RAWSOCK
              + "NO_DOCKER_HELPER\n}")
HELPER_WORD = st.one_of(st.sampled_from(("--route", "--unix", "--proto", "--tcp", "--timeout", "http", "h2",
                                         "route-1", "/run/docker.sock", "127.0.0.1:2375", "1")), quoted(),
                        st.sampled_from(NAMES).flatmap(expansion))


@st.composite
def helper_call(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return "rawsock " + " ".join(draw(st.lists(HELPER_WORD, min_size=2, max_size=6)))
    route = draw(st.one_of(st.sampled_from(("route-1", "a.b_c")), quoted(),
                           st.sampled_from(NAMES).flatmap(expansion)))
    proto = draw(st.sampled_from(("", " --proto http", " --proto tls", " --proto $a")))
    return f"rawsock --route {route} --unix /run/docker.sock{proto}"


def statement(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(assignment(), engine(), engine(), raw_client(),
                       st.sampled_from(("wait", ":", "true")))
    if depth <= 0:
        return leaves
    inner = st.lists(statement(depth - 1), min_size=1, max_size=3).map("\n".join)
    return st.one_of(
        leaves, leaves,
        inner.map(lambda t: f"bash -c {single(t)}"),
        inner.map(lambda t: f"sh -c {single(t)}"),
        inner.map(lambda t: f"bash -c {double(t, False)}"),
        inner.map(lambda t: f"sh -c {ansi_c(t, False)}"),
        st.lists(engine(), min_size=1, max_size=2).map(lambda c: "eval " + single("; ".join(c))),
        inner.map(lambda t: f"( {t}\n)"),
    )


SCOPING_VALUES = ("-l", "-D", "ps", "-a", "''", "'-l info'", "web", "$'-l\\n'", '"-l\r"')
# `docker $v ps images`: with v=-l the lint reads `-l ps` then `images`; bash, with v empty,
# runs `docker ps images`: any such difference is a failure
SCOPING_USES = ("docker $v ps images", "docker $v ps -a", "docker ps $v -a", 'docker inspect "$v"',
                "docker ${v:-ps} -a", "bash -c 'docker $v ps images'", "eval 'docker $v ps images'",
                "docker inspect $v web")
SCOPING_PLACES = ("plain", "background", "pipeline", "subshell", "group", "local", "local-value",
                  "function", "function-background", "sh-c")


def scoping_program(value: str, use: str, where: str, var: str = "opt") -> str:
    """One variable assigned in one position, then used in an engine command: where the lint's
    idea of a constant meets bash's scoping (issue 27 #1, #2)."""
    use = use.replace("$v", f"${var}").replace("{v:", f"{{{var}:").replace('"$v"', f'"${var}"')
    if where == "local":
        return f"{var}={value}\ng() {{ {use}; }}\nf() {{ local {var}; g; }}\nf"
    if where == "local-value":
        return f"{var}={value}\ng() {{ {use}; }}\nf() {{ local {var}=ps; g; }}\nf"
    if where == "function":
        return f"f() {{ {var}={value}; {use}; }}\nf"
    if where == "function-background":
        return f"f() {{ {var}={value} & {use}; }}\nf"
    if where == "sh-c":
        return f"sh -c {single(f'{var}={value}; {use}')}"
    assign = {"plain": f"{var}={value}", "background": f"{var}={value} &", "pipeline": f"{var}={value} | :",
              "subshell": f"( {var}={value} )", "group": f"{{ {var}={value}; }}"}[where]
    return f"{assign}\n{use}"


@st.composite
def scenario(draw: st.DrawFn) -> str:
    return scoping_program(draw(st.one_of(st.sampled_from(SCOPING_VALUES), quoted())),
                           draw(st.sampled_from(SCOPING_USES)), draw(st.sampled_from(SCOPING_PLACES)),
                           draw(st.sampled_from(NAMES)))


@st.composite
def program(draw: st.DrawFn) -> str:
    lines = draw(st.lists(statement(2), min_size=0, max_size=3))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(scenario()))
    if draw(st.booleans()):  # functions: dynamic scoping of `local`, calls after the definitions
        var = draw(st.sampled_from(NAMES))
        local = draw(st.sampled_from((f"local {var}", f"local {var}={draw(VALUE)}", ":")))
        lines.insert(draw(st.integers(0, len(lines))),
                     f"g() {{ {draw(engine())}; }}\nf() {{ {local}; g; }}\nf")
    if draw(st.integers(0, 3)) == 0:
        lines.append(HELPER_DEF)
        lines.extend(draw(st.lists(helper_call(), min_size=1, max_size=2)))
    if draw(st.booleans()):
        body = draw(st.sampled_from(("docker rm -f db", "$(docker rm x)", "x")))
        lines.append("cat <<'EOF'\n" + body + "\nEOF")
    return "\n".join(lines) + "\n"


def differences(text: str) -> tuple[bool, list[str]]:
    """(accepted, what ran that the lint did not predict) for one program."""
    findings, model = lint_model(text, "generated.sh", HASHES)
    if findings:
        return False, []
    with tempfile.TemporaryDirectory(prefix="no-docker-differential-") as tmp:
        ran = run_recorded(text.encode("utf-8", "surrogateescape"), Path(tmp))
    return True, compare(model, ran)


def test_every_assignment_place_against_bash(capsys):
    """The whole grid of scoping programs (values x uses x places), not a sample of it."""
    tried = accepted = 0
    failures = []
    for value in SCOPING_VALUES:
        for use in SCOPING_USES:
            for where in SCOPING_PLACES:
                text = scoping_program(value, use, where) + "\n"
                ok, problems = differences(text)
                tried, accepted = tried + 1, accepted + ok
                if problems:
                    failures.append("program:\n" + text + "\n".join(problems))
    shown = "\n\n".join(failures[:5])
    assert not failures, f"{len(failures)} of {accepted} accepted programs differ:\n{shown}"
    with capsys.disabled():
        print(f"\nscoping grid: {tried} programs, {accepted} accepted and run by bash")
    assert accepted >= 20, f"only {accepted} of {tried} grid programs accepted: the grid compares nothing"


# Words where the parser, the lint and bash could part: escapes of every kind, line ends inside
# and outside quotes, empty values, NUL and bytes >= 0x80 from $'...' (each found a difference).
TRICKY_WORDS = ("insp\\\nect", "web\r", "'we\rb'", '"we\rb"', "$'a\\0b'", "$'\\777'", "$'\\xff'", "$'\\x41'",
                "$'a\\\nb'", '"a\\\nb"', "a\\ b", "\\w\\e\\b", "''", '""', "$'\\e'", "'a'\"b\"$'c'",
                "w\\\\\neb", "$'\\u0041'", '"\\$x"', "'\\'", "we\fb", "$'\\101'",
                "'tcp://127.0.0.1:2375'", '"unix:///run/docker.sock\n"', "$'tcp://localhost:1\\r'")
WORD_PLACES = ("docker inspect {w} web", "docker {w} ps", "docker ps --filter {w}", "docker inspect web {w}",
               "DOCKER_HOST=unix://{w} docker ps", "env DOCKER_HOST=unix:///{w} docker ps",
               "DOCKER_HOST={w} timeout 5 docker ps", "DOCKER_HOST=tcp://127.0.0.1:2375{w} docker ps")


def test_every_tricky_word_against_bash_and_dash(capsys):
    tried = accepted = 0
    failures = []
    for word in TRICKY_WORDS:
        for place in WORD_PLACES:
            # (bash -c around each word is in the slow mode only: the suite's time on two cores)
            for wrap in ("none", "sh-single", *(("bash-single", "bash-double") if SLOW else ())):
                text = SHELL_WRAPS[wrap](place.replace("{w}", word)) + "\n"
                ok, problems = differences(text)
                tried, accepted = tried + 1, accepted + ok
                if problems:
                    failures.append("program:\n" + text + "\n".join(problems))
    shown = "\n\n".join(failures[:5])
    assert not failures, f"{len(failures)} of {accepted} accepted programs differ:\n{shown}"
    with capsys.disabled():
        print(f"\ntricky word grid: {tried} programs, {accepted} accepted and run")
    assert accepted >= 20, f"only {accepted} of {tried} programs accepted: the grid compares nothing"


def test_every_request_bash_writes_to_dev_tcp_is_the_one_predicted(capsys):
    """bash's own `printf ... > /dev/tcp/127.0.0.1/PORT`: a real loopback listener records the
    bytes (no stub can stand for a device bash opens itself)."""
    tried = accepted = 0
    failures = []
    with TcpRecorder() as rec:
        for request in REQUESTS:
            for how in ("printf-escapes", "printf-literal"):
                for wrap in ("none", "bash-single", "bash-double", "eval"):
                    text = raw_program(request, how).replace("| nc -U /run/docker.sock",
                                                             f"> /dev/tcp/127.0.0.1/{rec.port}")
                    text = SHELL_WRAPS[wrap](text) + "\n"
                    findings, model = lint_model(text, "generated.sh", HASHES)
                    tried += 1
                    if findings:
                        continue
                    accepted += 1
                    before = len(rec.got)
                    with tempfile.TemporaryDirectory(prefix="no-docker-dev-tcp-") as tmp:
                        ran = run_recorded(text.encode(), Path(tmp))
                    got = rec.wait_for(before + 1, timeout=5)[before:]
                    ran.raw += [("/dev/tcp", [], data) for data in got]
                    problems = compare(model, ran) + ([] if got else ["nothing reached the listener"])
                    if problems:
                        failures.append("program:\n" + text + "\n".join(problems))
    shown = "\n\n".join(failures[:5])
    assert not failures, f"{len(failures)} of {accepted} accepted programs differ:\n{shown}"
    with capsys.disabled():
        print(f"\n/dev/tcp grid: {tried} programs, {accepted} accepted and run")
    assert accepted >= 5, f"only {accepted} of {tried} programs accepted: the grid compares nothing"


def test_every_raw_request_form_against_bash_and_dash(capsys):
    """Every request x every way to send it x every shell around it: the bytes nc got must be
    the bytes the lint computed."""
    tried = accepted = 0
    failures = []
    for request in REQUESTS:
        for how in SENDS:
            for wrap in SHELL_WRAPS.values():
                text = wrap(raw_program(request, how)) + "\n"
                ok, problems = differences(text)
                tried, accepted = tried + 1, accepted + ok
                if problems:
                    failures.append("program:\n" + text + "\n".join(problems))
    shown = "\n\n".join(failures[:5])
    assert not failures, f"{len(failures)} of {accepted} accepted programs differ:\n{shown}"
    with capsys.disabled():
        print(f"\nraw request grid: {tried} programs, {accepted} accepted and run")
    assert accepted >= 10, f"only {accepted} of {tried} raw programs accepted: the grid compares nothing"


@settings(max_examples=SLOW_EXAMPLES if SLOW else DIFFERENTIAL_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program())
def test_what_bash_runs_is_what_the_lint_predicted(text):
    findings, model = lint_model(text, "generated.sh", HASHES)
    if findings:
        event("refused by the lint")
        return
    event("accepted: compared with bash")
    note(text)
    with tempfile.TemporaryDirectory(prefix="no-docker-differential-") as tmp:
        ran = run_recorded(text.encode("utf-8", "surrogateescape"), Path(tmp))
    event(f"engine commands run: {min(len(ran.engine), 3)}{'+' if len(ran.engine) >= 3 else ''}")
    problems = compare(model, ran)
    assert not problems, "\n".join(problems) + "\nprogram:\n" + text
