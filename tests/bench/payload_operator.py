"""A cosmic-ray operator that makes a payload-bearing mutant: its mutated code tries to reach a
container engine (issue 26 item 2, shown on a real project by bench_real_attempts.py).

Bench and test tree only, never the product. cosmic-ray's own operators change an operator, a
constant, a comparison: on a project whose tests mock the engine (pytest-docker mocks
``subprocess.check_output``) none of them reaches one. A mutation tool can as well produce code
that does (a mutant that bypasses the mock, takes the other branch of a ``dry_run``); this
operator is the model of that mutant, as mutants/payloads/reach-engine.sh is for scripts: at the
start of the function named by its ``function`` argument it inserts read-only tries of the routes
of DESIGN §7 that a Python project has:

* a raw ``connect()`` to the well-known engine sockets (``/var/run/docker.sock``, Podman's
  rootful socket) sending ``GET /_ping``;
* a TCP connect to the engine port 2375 on loopback, the same ping;
* the docker CLI: ``docker version`` (it follows ``DOCKER_HOST`` and the current context).

Read-only questions only, each bounded by a timeout, every failure swallowed: the mutant's
behaviour is otherwise unchanged, so the tests cannot tell (it survives: a missing test too).
Under ``no-docker run`` each try is refused and named in the run's ``engine_attempts``; without
isolation it must only ever run inside an outer guard, against the canary.

Registered as the ``nd-payload`` provider of cosmic-ray's ``cosmic_ray.operator_providers`` entry
point by ``plugin_dir``: a dist-info written into a scratch directory that goes on ``PYTHONPATH``
of the cosmic-ray processes (nothing installed). One mutation per configured function::

    [cosmic-ray.operators]
    "nd-payload/ReachEngine" = [{function = "execute"}]
"""

from __future__ import annotations

import shutil
from pathlib import Path

PROVIDER = "nd-payload"
OPERATOR = f"{PROVIDER}/ReachEngine"
MARK = "# no-docker bench payload"  # on every inserted line: a diff shows what is the payload

# Read-only and bounded (each connect 2 s, the CLI 10 s); names prefixed so that they shadow
# nothing of the function they are inserted into.
PAYLOAD = '''\
import socket as _nd_socket, subprocess as _nd_subprocess
for _nd_target in ("/var/run/docker.sock", "/run/podman/podman.sock", ("127.0.0.1", 2375)):
    try:
        _nd_family = _nd_socket.AF_INET if isinstance(_nd_target, tuple) else _nd_socket.AF_UNIX
        with _nd_socket.socket(_nd_family) as _nd_s:
            _nd_s.settimeout(2)
            _nd_s.connect(_nd_target)
            _nd_s.sendall(b"GET /_ping HTTP/1.0\\r\\n\\r\\n")
    except OSError:
        pass
try:
    _nd_subprocess.run(["docker", "version"], capture_output=True, timeout=10)
except (OSError, _nd_subprocess.SubprocessError):
    pass
'''


def payload_lines(indent: str) -> list[str]:
    """The payload's lines at INDENT, each marked (pure)."""
    return [f"{indent}{line}  {MARK}\n" for line in PAYLOAD.splitlines()]


def with_payload(function_code: str, body_line: int, indent: str) -> str:
    """FUNCTION_CODE (a ``def`` and its body, as parso gives it) with the payload inserted before
    its body's line BODY_LINE (0-based within FUNCTION_CODE) at INDENT (pure)."""
    lines = function_code.splitlines(keepends=True)
    return "".join(lines[:body_line] + payload_lines(indent) + lines[body_line:])


def _operator_class() -> type:
    """The operator class; cosmic-ray and parso are imported only when cosmic-ray loads it."""
    import parso
    from cosmic_ray.operators.operator import Argument, Example, Operator

    class ReachEngine(Operator):
        """Insert the engine-reaching payload at the start of the function named ``function``."""

        def __init__(self, function: str) -> None:
            self.function = function

        @classmethod
        def arguments(cls) -> tuple:
            return (Argument("function", "the name of the function that gets the payload"),)

        def _body_start(self, node: object) -> object | None:
            """The first statement of NODE's body when NODE is the function to mutate, else None:
            a docstring stays first (it is the function's documentation, not code)."""
            if getattr(node, "type", None) != "funcdef" or node.name.value != self.function:
                return None
            suite = node.children[-1]
            if suite.type != "suite":  # `def f(): return 1`, on one line: not this operator's
                return None
            statements = [c for c in getattr(suite, "children", []) if c.type != "newline"]
            if statements and statements[0].type == "simple_stmt" and \
                    statements[0].children[0].type == "string":
                statements = statements[1:]
            return statements[0] if statements else None

        def mutation_positions(self, node: object):
            first = self._body_start(node)
            if first is not None:
                yield (first.start_pos, first.end_pos)

        def mutate(self, node: object, index: int) -> object:
            first = self._body_start(node)
            assert first is not None and index == 0
            code = node.get_code(include_prefix=False)  # starts on the line of `def`
            new = with_payload(code, first.start_pos[0] - node.start_pos[0], " " * first.start_pos[1])
            mutated = parso.parse(new).children[0]
            assert mutated.type == "funcdef", mutated.type
            mutated.get_first_leaf().prefix = node.get_first_leaf().prefix  # the lines before `def` stay
            return mutated

        @classmethod
        def examples(cls) -> tuple:
            return (Example("def f():\n    return 1\n",
                            "def f():\n" + "".join(payload_lines("    ")) + "    return 1\n",
                            operator_args={"function": "f"}),)

    return ReachEngine


class Provider:
    """cosmic-ray's operator provider protocol: iterate names, index a name to its class."""

    def __iter__(self):
        return iter(["ReachEngine"])

    def __getitem__(self, name: str) -> type:
        if name != "ReachEngine":
            raise KeyError(name)
        return _operator_class()


ENTRY_POINTS = f"[cosmic_ray.operator_providers]\n{PROVIDER} = payload_operator:Provider\n"
METADATA = "Metadata-Version: 2.1\nName: nd-bench-payload\nVersion: 0\n"


def plugin_dir(into: Path) -> Path:
    """A directory to put on PYTHONPATH that registers the provider (this module and a
    dist-info with its entry point; importlib.metadata finds a dist-info on any sys.path entry)."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__), into / "payload_operator.py")
    info = into / "nd_bench_payload-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(METADATA)
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return into
