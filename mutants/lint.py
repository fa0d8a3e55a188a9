"""The read-only lint: accept a bash payload only when every command in it is provably harmless.

The payload is parsed with tree-sitter-bash (a real bash grammar) and walked like an abstract
interpreter: each word is evaluated to a `Val` whose parts are constant text or *opaque* values
(an environment variable, a command substitution). Commands are then checked against the data
tables of `lint_rules`; wrappers (`bash -c`, `sh -c`, `eval`, `$(...)`, backticks, `xargs`,
`exec`, `env`, `command`, `sudo`, `timeout`, `nohup`) are followed into what they run. Anything
the walker does not model is rejected: the lint fails closed, so an unknown construct costs a
false rejection, never a false acceptance. What it models is a *defined subset* of bash,
written down in docs/mutants.md ("The accepted subset", issue 17); a construct outside it is
``unsupported``, and where tree-sitter-bash and bash may read the same text differently
(here-document ends, quoting, escapes) the text is refused rather than guessed.

Why variables are resolved so narrowly: a name is constant only when it is assigned exactly
once in the whole program, at top level (not inside an if, a loop, a function, a list or a
subshell) and before the use. Every other assignment could have run, or not, on some path, so
the value is opaque; an opaque value can never be a command name or an engine subcommand.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from . import lint_rules as R
from .bash_parser import HeredocRefused, UnsafeForParser, heredoc_body, parse

# Statement lists that run start to end: an assignment directly in one runs before every later
# statement of the same list (an if/case branch is not one: its sibling branch may run instead).
BLOCKS = frozenset({"program", "subshell", "compound_statement", "do_group", "command_substitution",
                    "process_substitution"})
# Test operators of the subset (`-v`, `-R`, `-o` are not: -v and -R evaluate a subscript).
TEST_UNARY = frozenset({"-e", "-f", "-d", "-r", "-w", "-x", "-s", "-n", "-z", "-L", "-h", "-p", "-S",
                        "-t", "-b", "-c"})
TEST_BINARY = frozenset({"=", "==", "!=", "=~", "<", ">", "-nt", "-ot", "-ef"})
TEST_INTEGER = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM = r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9])"
EXPANSION_FORMS = (
    re.compile(rf"{_PARAM}|[?!#$@*]"),                 # ${name} ${1} ${?} ${@}
    re.compile(rf"#{_PARAM}"),                         # ${#name}
    re.compile(rf"{_PARAM}:?[-+].*", re.S),            # ${name:-word} ${name+word}
    re.compile(rf"{_PARAM}(?:%%?|##?).*", re.S),       # ${name%word} ${name##word}
    re.compile(rf"{_PARAM}//?.*", re.S),               # ${name/pat/rep} ${name//pat/rep}
    re.compile(rf"{_PARAM}:[0-9]+(?::[0-9]+)?"),       # ${name:0:160}: literal offsets only
)
GLOB_CHARS = re.compile(r"[*?\[]")


# ---- findings --------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Finding:
    """One rejection: ``file:line:col: code: message`` (line and column 1-based)."""

    path: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code}: {self.message}"


class Rejected(Exception):
    """Raised inside the walker to abandon one command; becomes a Finding."""

    def __init__(self, code: str, message: str, node: Node | None = None) -> None:
        assert code in R.REASONS, code
        super().__init__(message)
        self.code = code
        self.message = message
        self.node = node


# ---- values ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Opaque:
    """A part of a value the lint cannot know (an environment variable, $(...), $1...)."""

    name: str


@dataclass(frozen=True)
class Val:
    """An evaluated word: constant text and opaque parts, and whether it may split or glob."""

    parts: tuple[str | Opaque, ...]
    split: bool = False

    @property
    def exact(self) -> bool:
        return not self.split and all(isinstance(p, str) for p in self.parts)

    @property
    def text(self) -> str:
        """Constant parts as they are, opaque parts as ``\\0NAME\\0`` (see lint_rules)."""
        return "".join(p if isinstance(p, str) else f"\0{p.name}\0" for p in self.parts)

    @property
    def shown(self) -> str:
        return "".join(p if isinstance(p, str) else f"${{{p.name}}}" for p in self.parts)

    @property
    def prefix(self) -> str:
        """The constant text before the first opaque part."""
        out = []
        for p in self.parts:
            if not isinstance(p, str):
                break
            out.append(p)
        return "".join(out)


def const(text: str) -> Val:
    return Val((text,))


def concat(vals: Iterable[Val]) -> Val:
    parts: list[str | Opaque] = []
    split = False
    for v in vals:
        parts.extend(v.parts)
        split = split or v.split
    merged: list[str | Opaque] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        elif p != "":
            merged.append(p)
    return Val(tuple(merged) or ("",), split)


@dataclass
class Stdin:
    """What a command reads on stdin, as far as the lint knows."""

    kind: str = "inherit"  # inherit | null | heredoc | content
    text: str | None = None  # heredoc body or piped constant content
    quoted: bool = False  # heredoc delimiter quoted: the body is literal


# ---- small pure helpers ------------------------------------------------------------------------

class Unsupported(ValueError):
    """Text outside the accepted subset, found by a pure helper; the walker reports it."""


_C_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
              "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v", "?": "?"}


def ansi_c_decode(body: str) -> str:
    """Decode the inside of $'...' (bash ANSI-C quoting)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _C_ESCAPES:
            out.append(_C_ESCAPES[n])
            i += 2
        elif n == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            out.append(_byte(int(m.group(), 16)) if m else "\\x")
            i += 2 + (len(m.group()) if m else 0)
        elif n in "uUc":
            raise Unsupported(f"the escape \\{n} in $'...'")
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m is not None
            out.append(_byte(int(m.group(), 8)))
            i += 1 + len(m.group())
        else:
            out.append("\\" + n)
            i += 2
    return "".join(out)


def _byte(value: int) -> str:
    """The character an ``\\xHH``/``\\NNN`` escape of ``$'...'`` makes, when the lint models it.

    Not NUL: bash's strings end at a NUL (``$'a\\0b'`` is ``a``); not 0x80 and up: bash makes one
    raw byte of it (``\\777`` and ``\\400`` wrap modulo 256), not the code point. Both were found
    by the differential check (issue 27).
    """
    if value == 0 or value >= 0x80:
        raise Unsupported(f"the escape for byte {value:#x} in $'...' (only 0x01-0x7f)")
    return chr(value)


def printf_format(fmt: str, escapes: dict[str, str] | None = None) -> list[str | None]:
    """The pieces of a printf FORMAT: literal text, None for each %s; Unsupported otherwise.

    Only %s, %% and the escapes of ``PRINTF_ESCAPES`` are modelled: with any other (\\u000d,
    \\x0a, \\015, %b, %d...) printf writes bytes the lint did not compute.
    """
    escapes = R.PRINTF_ESCAPES if escapes is None else escapes
    pieces: list[str | None] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%":
            directive = fmt[i:i + 2]
            if directive not in R.PRINTF_DIRECTIVES:
                raise Unsupported(f"printf directive {directive!r} (only %s and %%)")
            pieces.append(None if directive == "%s" else "%")
            i += 2
        elif c == "\\":
            escape = fmt[i + 1:i + 2]
            if escape not in escapes:
                raise Unsupported(f"printf escape \\{escape} (only {' '.join(escapes)})")
            pieces.append(escapes[escape])
            i += 2
        else:
            pieces.append(c)
            i += 1
    return pieces


def printf_output(args: list[Val], escapes: dict[str, str] | None = None) -> str | None:
    """What ``printf FORMAT ARG...`` prints, for constant arguments; else None."""
    if not args or not all(a.exact for a in args) or args[0].text.startswith("-"):
        return None
    try:
        pieces = printf_format(args[0].text, escapes)
    except Unsupported:
        return None
    rest = [a.text for a in args[1:]]
    slots = pieces.count(None)
    if slots == 0:
        return "".join(p for p in pieces if p is not None) if not rest else None
    out: list[str] = []
    while True:  # printf reuses the format until the arguments are used up
        chunk, rest = rest[:slots], rest[slots:]
        chunk.reverse()
        out.extend(p if p is not None else (chunk.pop() if chunk else "") for p in pieces)
        if not rest:
            return "".join(out)


def endpoint_ok(v: Val) -> bool:
    """An engine endpoint: a unix socket path, or a loopback tcp/ssh/http address."""
    text = v.text if v.exact else v.prefix
    if text.startswith("/"):
        return True
    scheme, sep, rest = text.partition("://")
    rule = R.ENDPOINT_SCHEMES.get(scheme)
    if not sep or rule is None:
        return False
    if rule == "any":
        return True
    if not v.exact and not re.match(r"^[^/]*[/?]", rest):
        return False  # the host part itself is opaque
    hostport = re.split(r"[/?]", rest, maxsplit=1)[0].rpartition("@")[2]
    host = hostport[: hostport.find("]") + 1] if hostport.startswith("[") else hostport.partition(":")[0]
    return host in R.LOOPBACK_HOSTS


def read_only_path(path: str) -> bool:
    return R.API_VERSION_PREFIX.sub("", path) in R.READ_ONLY_PATHS


def request_ok(content: str) -> bool:
    """A constant HTTP/1.x GET or HEAD of a read-only path, known headers, no body."""
    head, sep, body = content.partition("\r\n\r\n")
    if not sep or body:
        return False
    lines = head.split("\r\n")
    m = re.fullmatch(r"(GET|HEAD) (/[^ ?]*)(\?[^ ]*)? HTTP/1\.[01]", lines[0])
    if not m or not read_only_path(m.group(2)):
        return False
    for line in lines[1:]:
        name, colon, _ = line.partition(":")
        if not colon or name.strip().lower() not in R.REQUEST_HEADERS:
            return False
    # Every line is plain printable ASCII: a lone CR or LF, or any other control byte, is a line
    # break to some servers and could start a second request.
    return all(" " <= ch <= "~" for line in lines for ch in line)


def normalize_rel(text: str) -> str:
    """One spelling per run-dir path: ``./a//b/./c`` is ``a/b/c`` (the write counts and the
    BASH_ENV/config checks key on it; ``..`` never gets here, see ``run_dir_path``)."""
    if text.startswith("/"):
        return text
    return "/".join(part for part in text.split("/") if part not in ("", "."))


def run_dir_path(v: Val) -> bool:
    """A path in the run directory whose first component carries the no-docker- prefix."""
    if not v.exact:
        return False
    text = v.text
    if not text or text.startswith(("/", "~", "-")):
        return False
    parts = normalize_rel(text).split("/")
    return ".." not in parts and parts[0].startswith(R.RUN_DIR_PREFIX)


def route_log_target(v: Val) -> bool:
    """``${NO_DOCKER_ROUTE_LOG}`` or ``${NO_DOCKER_ROUTE_LOG:-DEFAULT}`` with a run-dir default."""
    if len(v.parts) != 1 or not isinstance(v.parts[0], Opaque) or v.split:
        return False
    name, sep, default = v.parts[0].name.partition(":-")
    if name != R.ROUTE_LOG_VARIABLE:
        return False
    return not sep or run_dir_path(const(default))


def tcp_device(text: str) -> tuple[str, str] | None:
    """(host, port) of bash's /dev/tcp/HOST/PORT or /dev/udp/HOST/PORT, else None."""
    m = re.fullmatch(r"/dev/(?:tcp|udp)/([^/]+)/([^/]+)", text)
    return (m.group(1), m.group(2)) if m else None


def split_options(arg: str, flags: set[str] | frozenset[str], values: set[str] | frozenset[str]
                  ) -> list[tuple[str, str | None]] | None:
    """Split ``-abc`` / ``-oVALUE`` / ``--name=value`` into options; None if one is unknown.

    The second element is the attached value ('' when the value is the next argument,
    None for a flag).
    """
    if arg.startswith("--"):
        name, eq, val = arg.partition("=")
        if name in values:
            return [(name, val if eq else "")]
        return [(name, None)] if name in flags and not eq else None
    out: list[tuple[str, str | None]] = []
    for i, ch in enumerate(arg[1:], start=1):
        opt = "-" + ch
        if opt in values:
            out.append((opt, arg[i + 1:]))
            return out
        if opt not in flags:
            return None
        out.append((opt, None))
    return out


def option_value(args: list[Val], i: int, attached: str, code: str, option: str, node: Node
                 ) -> tuple[Val, int]:
    """The value of a value-taking option and the index after it: attached (``-oVALUE``) or
    the next argument. A value that may split is refused: its extra words could be options."""
    if attached:
        val = const(attached)
    elif i < len(args):
        val, i = args[i], i + 1
    else:
        raise Rejected(code, f"{option} without a value", node)
    if val.split:
        raise Rejected(code, f"{option} {val.shown!r} may split", node)
    return val, i


# ---- the walker --------------------------------------------------------------------------------

@dataclass
class Shared:
    """What every nested text of one payload shares: the run-dir files it writes and reads."""

    files: dict[str, str | None] = field(default_factory=dict)  # run-dir path -> content (None: unknown)
    # run-dir path -> one entry per write anywhere in the payload: True when that write is a
    # statement directly in the top-level program (runs once, in order).
    writes: dict[str, list[bool]] = field(default_factory=dict)
    # BASH_ENV files used: (run-dir path, report point, label) - checked once the whole payload is
    # linted, against every write to that path (a later write in a loop or a function called
    # later would change the file after the lint read it).
    startup_uses: list[tuple[str, tuple[int, int], str]] = field(default_factory=list)
    # The lint's prediction of what runs (issue 27's differential check compares it with what
    # bash and dash do): every engine command line, every constant a raw client sends, every
    # pinned helper's arguments, as the lint evaluated them (opaque parts stand for any text).
    engine_calls: list[tuple[Val, ...]] = field(default_factory=list)
    engine_envs: list[dict[str, Val]] = field(default_factory=list)  # what each call's prefix set
    raw_sends: list[tuple[str, tuple[Val, ...], str]] = field(default_factory=list)  # tool, args, bytes
    helper_calls: list[tuple[str, tuple[Val, ...]]] = field(default_factory=list)  # helper kind, args


@dataclass
class Scope:
    """What one shell knows: constant variables, defined functions, files it wrote."""

    assignments: dict[str, list[Node]] = field(default_factory=dict)
    blocks: dict[int, Node] = field(default_factory=dict)  # assignment id -> block it runs in
    functions: dict[str, list[Node]] = field(default_factory=dict)  # name -> its definitions
    cache: dict[str, Val | None] = field(default_factory=dict)


class Linter:
    """Lints one program text; nested programs (bash -c, eval, BASH_ENV files) recurse."""

    def __init__(self, path: str, helper_hashes: frozenset[str], shared: Shared,
                 findings: list[Finding], anchor: tuple[Node, str] | None = None, depth: int = 0,
                 shares_shell: bool = False, dialect: str = "bash") -> None:
        self.path = path
        self.helper_hashes = helper_hashes
        self.shared = shared
        self.files = shared.files  # run-dir path -> content (None when not constant)
        self.findings = findings
        # eval text runs in the caller's shell: it may not assign variables or define functions
        # (the caller's constants and functions are proven against the caller's text only).
        self.shares_shell = shares_shell
        self.source = b""
        self.heredocs: dict[int, tuple[str, bool]] = {}  # heredoc_redirect id -> (body, ok)
        self.anchor = anchor  # (outer node, label) for nested programs
        self.depth = depth
        # "bash", or "dash" for `sh -c` text: /bin/sh is dash here (Debian), and the subset of
        # a dash text is smaller (``DASH_REFUSED``, ``echo``/``printf`` escapes), issue 27 #5.
        self.dialect = dialect
        self.printf_escapes = R.PRINTF_ESCAPES if dialect == "bash" else R.DASH_PRINTF_ESCAPES
        self.functions_entered: list[str] = []  # names of the function bodies being linted
        # function name -> the pinned helper it runs with "$@" (its calls' arguments are checked)
        self.helper_functions: dict[str, str | None] = {}
        self.scope = Scope()
        self.seen: set[int] = set()

    # -- reporting --
    def reject(self, err: Rejected, fallback: Node) -> None:
        node = err.node or fallback
        self.report(err.code, err.message, (node.start_point.row, node.start_point.column))

    def report(self, code: str, message: str, point: tuple[int, int]) -> None:
        """A finding at ``point`` (0-based row, byte column) of this text, or at the anchor."""
        if self.anchor is not None:
            node, label = self.anchor
            point, message = (node.start_point.row, node.start_point.column), f"in {label}: {message}"
        self.findings.append(Finding(self.path, point[0] + 1, point[1] + 1, code, message))

    # -- entry --
    def lint_text(self, source: bytes) -> None:
        try:
            tree = parse(source)
        except UnsafeForParser as err:
            self.report("parse-error", str(err), (err.where.row, err.where.column))
            return
        root = tree.root_node
        if root.has_error:
            bad = next((n for n in walk(root) if n.is_error or n.is_missing), root)
            self.reject(Rejected("parse-error", f"cannot parse near {snippet(bad)!r}", bad), bad)
            return
        self.source = source
        hazard = unquoted_hazard(root, source)
        if hazard is not None:
            row, col, why = hazard
            self.report("unsupported", why, (row, col))
            return
        if self.dialect == "dash":
            for node in walk(root):
                why = dash_refusal(node)
                if why is not None:
                    self.reject(Rejected("unsupported", f"sh -c text: {why} (dash and bash differ; "
                                         "docs/mutants.md)", node), node)
                    return
        for node in walk(root):
            if node.type == "heredoc_redirect":
                try:
                    self.heredocs[node.id] = (self.heredoc_body(node), True)
                except Rejected as err:
                    self.reject(err, node)
                    return
        self.prepass(root)
        self.statements(root.children, Stdin())

    def heredoc_body(self, node: Node) -> str:
        """The body bash reads for this here-document (``bash_parser.heredoc_body``)."""
        try:
            return heredoc_body(node, self.source)
        except HeredocRefused as err:
            raise Rejected("unsupported", str(err), err.node) from err

    def prepass(self, root: Node) -> None:
        for node in walk(root):
            if node.type == "variable_assignment":
                name = node.child_by_field_name("name")
                if name is not None:
                    self.scope.assignments.setdefault(text_of(name).split("[")[0], []).append(node)
            elif node.type == "function_definition":
                name = node.child_by_field_name("name")
                if name is not None:
                    self.scope.functions.setdefault(text_of(name), []).append(node)
            elif node.type in ("for_statement", "unset_command"):
                for var in node.children:
                    if var.type in ("variable_name", "word"):
                        self.scope.assignments.setdefault(text_of(var), []).extend([node, node])
            elif node.type == "command":
                self.prepass_command(node)
            elif node.type == "expansion" and re.search(r"^\$\{[^}]*?:?=", text_of(node)):
                inner = text_of(node)[2:]
                name = re.split(r"[^A-Za-z0-9_]", inner, maxsplit=1)[0]
                self.scope.assignments.setdefault(name, []).extend([node, node])
        for node in walk(root):
            if node.type == "variable_assignment" and node.parent is not None and node.parent.type in BLOCKS:
                # `opt=-l &` runs in a background subshell: the caller's opt never changes
                # (bash(1), Lists: "executed asynchronously in a subshell"), issue 27 #1.
                after = node.next_sibling
                if after is None or after.type != "&":
                    self.scope.blocks[node.id] = node.parent
            if node.type == "declaration_command":
                # `local opt` without a value hides the caller's opt from every function it calls
                # (dynamic scoping, bash(1) FUNCTIONS), issue 27 #2: a name ever declared
                # local is never a constant, wherever it is used.
                for c in node.named_children:
                    if c.type == "variable_name":
                        self.scope.assignments.setdefault(text_of(c), []).extend([node, node])
            if node.type == "command" and text_of(node).startswith("eval"):
                # Names an eval'd text mentions may be assigned when it runs: never constant.
                for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text_of(node)):
                    self.scope.assignments.setdefault(name, []).extend([node, node])

    def prepass_command(self, node: Node) -> None:
        """read NAME / printf -v NAME assign opaque values: mark those names as not constant."""
        words = [text_of(c) for c in node.children_by_field_name("argument")]
        name_node = node.child_by_field_name("name")
        cmd = text_of(name_node) if name_node is not None else ""
        names: list[str] = []
        if cmd == "read":
            names = [w for w in words if not w.startswith("-")]
        elif cmd == "printf" and "-v" in words[:-1]:
            names = [words[words.index("-v") + 1]]
        for name in names:
            self.scope.assignments.setdefault(name, []).extend([node, node])

    # -- statements --
    def statements(self, nodes: Iterable[Node], stdin: Stdin) -> None:
        for node in nodes:
            if not node.is_named or node.type in ("comment", "heredoc_body"):
                continue
            try:
                self.statement(node, stdin)
            except Rejected as err:
                self.reject(err, node)

    def statement(self, node: Node, stdin: Stdin) -> None:
        t = node.type
        if t == "command":
            self.command(node, [], stdin)
        elif t == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects = [c for c in node.children if c.type.endswith("redirect")]
            self.attach(body, redirects, stdin)
        elif t == "pipeline":
            self.pipeline(node, stdin)
        elif t in ("list", "negated_command", "subshell", "do_group", "else_clause", "elif_clause",
                   "if_statement", "while_statement", "case_item", "program"):
            self.compound(node, stdin)
        elif t == "compound_statement":
            if node.children and node.children[0].type == "((":
                raise Rejected("arithmetic-unprovable", "(( )) evaluates its text arithmetically", node)
            self.compound(node, stdin)
        elif t == "for_statement":
            var = node.child_by_field_name("variable")
            if var is None or self.shares_shell or node.children[0].type != "for":
                raise Rejected("unsupported", "for loop: only `for name in WORDS` outside eval", node)
            self.check_name(text_of(var), var)
            for c in node.children_by_field_name("value"):
                self.value(c)
            self.compound(node, stdin)
        elif t == "case_statement":
            value = node.child_by_field_name("value")
            if value is not None:
                self.value(value)
            self.compound(node, stdin)
        elif t == "function_definition":
            if self.shares_shell:
                raise Rejected("unsupported", "a function defined in eval text", node)
            redirect = next((c for c in node.children if c.type.endswith("redirect")), None)
            if redirect is not None:
                # `f() { ...; } > /dev/tcp/...` redirects every call; the calls are not checked
                raise Rejected("unsupported", "a redirection on a function definition (it applies at "
                               "every call)", redirect)
            body = node.child_by_field_name("body")
            name_node = node.child_by_field_name("name")
            if body is not None:
                self.functions_entered.append(text_of(name_node) if name_node is not None else "")
                try:
                    self.statement(body, Stdin())
                finally:
                    self.functions_entered.pop()
        elif t in ("variable_assignment", "variable_assignments"):
            if self.shares_shell:
                raise Rejected("unsupported", "an assignment in eval text", node)
            for c in ([node] if t == "variable_assignment" else node.named_children):
                name, _ = self.assignment(c)
                self.check_name(name, c)
        elif t == "declaration_command":
            self.declaration(node)
        elif t == "unset_command":
            for c in node.named_children:
                if re.fullmatch(r"-\w*f\w*", text_of(c)):
                    raise Rejected("command-not-allowed", "unset -f changes what a name runs", c)
            raise Rejected("unsupported", "unset: the lint's constants are proven against "
                           "assignments only", node)
        elif t == "test_command":
            self.test(node)
        elif t in ("c_style_for_statement", "arithmetic_expansion"):
            raise Rejected("arithmetic-unprovable", f"{t} evaluates text arithmetically", node)
        else:
            raise Rejected("unsupported-syntax", f"{t} is not modelled by the lint", node)

    def attach(self, body: Node | None, redirects: list[Node], stdin: Stdin) -> None:
        """Run ``body`` with ``redirects``, attached where bash attaches them.

        tree-sitter-bash parses ``a && b >f`` as a redirected *list*, but in bash a redirection
        after a list binds to its last simple command; so does a redirection after a pipeline.
        Only a group ({ }, ( ), if, while...) takes a redirection as a whole.
        """
        if body is None:
            self.check_redirects(redirects, None, [])
        elif body.type == "command":
            self.command(body, redirects, stdin)
        elif body.type in ("list", "pipeline"):
            parts = [c for c in body.children if c.is_named and c.type != "comment"]
            upstream = stdin
            for part in parts[:-1]:
                self.statement(part, upstream if body.type == "pipeline" else stdin)
                if body.type == "pipeline":
                    upstream = self.produced(part)
            last = parts[-1] if parts else None
            if last is not None and last.type == "redirected_statement":
                inner = last.child_by_field_name("body")
                inner_redirects = [c for c in last.children if c.type.endswith("redirect")]
                feed = upstream if body.type == "pipeline" else stdin
                self.attach(inner, inner_redirects + redirects, feed)
            else:
                self.attach(last, redirects, upstream if body.type == "pipeline" else stdin)
        elif body.type == "negated_command":
            inner = next((c for c in body.children if c.is_named), None)
            self.attach(inner, redirects, stdin)
        else:
            self.check_redirects(redirects, None, [])
            self.statement(body, self.stdin_from(redirects, stdin))

    def compound(self, node: Node, stdin: Stdin) -> None:
        for c in node.children:
            if c.type in ("variable_name",):
                continue
            if c.is_named and c.type not in ("comment", "heredoc_body"):
                if c.type in ("word", "string", "raw_string", "concatenation", "extglob_pattern", "number",
                              "simple_expansion", "expansion", "regex"):
                    self.value(c)  # case patterns and the like: evaluate for $(...) inside
                else:
                    self.statement(c, stdin)

    def pipeline(self, node: Node, stdin: Stdin) -> None:
        elements = [c for c in node.children if c.is_named]
        upstream = stdin
        for element in elements:
            self.statement(element, upstream)
            upstream = self.produced(element)

    def produced(self, node: Node) -> Stdin:
        """What a pipeline element writes to the next one, when it is a constant printf/echo."""
        cmd = node.child_by_field_name("body") if node.type == "redirected_statement" else node
        if cmd is None or cmd.type != "command":
            return Stdin()
        try:
            argv = self.argv(cmd)
        except Rejected:
            return Stdin()
        if not argv or not argv[0].exact:
            return Stdin()
        if argv[0].text == "printf":
            out = printf_output(argv[1:], self.printf_escapes)
            return Stdin("content", out) if out is not None else Stdin()
        if argv[0].text == "echo" and all(a.exact and not a.text.startswith("-") for a in argv[1:]) and (
                self.dialect == "bash" or not any("\\" in a.text for a in argv[1:])):
            return Stdin("content", " ".join(a.text for a in argv[1:]) + "\n")
        return Stdin()

    # -- assignments and declarations --
    def assignment(self, node: Node) -> tuple[str, Val]:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        name = text_of(name_node) if name_node is not None else ""
        if not IDENTIFIER.match(name):
            raise Rejected("arithmetic-unprovable",
                           f"assignment to {name!r} (a subscript is arithmetic)", node)
        val = self.value(value_node, quoted=True) if value_node is not None else const("")
        val = Val(val.parts, split=False) if value_node is None or value_node.type != "array" else val
        self.check_variable(name, val, node)
        return name, val

    def declaration(self, node: Node) -> None:
        keyword = node.children[0].type if node.children else ""
        if keyword in ("declare", "typeset"):
            raise Rejected("sensitive-variable", f"{keyword} can make namerefs and attributes", node)
        if keyword != "local":
            for c in node.named_children:
                if c.type == "variable_assignment":
                    self.assignment(c)  # a sensitive name is reported as such first
            # export/readonly: a name the lint would have to follow into every later child
            raise Rejected("unsupported", f"{keyword}: only `local name[=value]` declares", node)
        if self.shares_shell:
            raise Rejected("unsupported", "local in eval text", node)
        for c in node.named_children:
            if c.type == "variable_assignment":
                name, _ = self.assignment(c)
                self.check_name(name, c)
            elif c.type == "variable_name":
                self.check_name(text_of(c), c)
            else:
                raise Rejected("sensitive-variable", f"{keyword} {text_of(c)!r}: only NAME or NAME=VALUE", c)

    def check_name(self, name: str, node: Node) -> None:
        """A name a plain assignment, ``local`` or ``for`` may set: lower case, and not one that
        curl or an engine client reads (the caller may have exported it)."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name in R.LOWERCASE_ENVIRONMENT:
            raise Rejected("sensitive-variable" if name.upper() == name or name in R.LOWERCASE_ENVIRONMENT
                           else "unsupported",
                           f"assignment to {name!r}: only lower-case names that no tool reads from "
                           "the environment (an exported name would change what later commands do)",
                           node)

    def check_variable(self, name: str, val: Val | None, node: Node) -> None:
        if name in R.SENSITIVE_VARIABLES or name.startswith(R.SENSITIVE_PREFIXES):
            raise Rejected("sensitive-variable", f"{name} changes what later commands run", node)
        if val is None:
            return
        if name in R.ENDPOINT_VARIABLES and not endpoint_ok(val):
            raise Rejected("engine-host-not-loopback", f"{name}={val.shown}", node)
        if name in R.CONFIG_VARIABLES:
            self.check_config(val, node)
        if name in R.STARTUP_FILE_VARIABLES:
            self.check_startup_file(name, val, node)

    def check_startup_file(self, name: str, val: Val, node: Node) -> None:
        key = normalize_rel(val.text) if run_dir_path(val) else None
        content = self.files.get(key) if key is not None else None
        if content is None:
            raise Rejected("sensitive-variable", f"{name}={val.shown}: not a file this payload wrote", node)
        assert key is not None
        point = (node.start_point.row, node.start_point.column)
        if self.anchor is not None:
            point = (self.anchor[0].start_point.row, self.anchor[0].start_point.column)
        self.shared.startup_uses.append((key, point, f"{name}={val.text}"))
        self.nested(content, node, f"{name} file {val.text}")

    def check_config(self, val: Val, node: Node) -> None:
        if not run_dir_path(val):
            raise Rejected("engine-config-unproven",
                           f"config dir {val.shown} is not in the run directory", node)
        prefix = normalize_rel(val.text).rstrip("/") + "/"
        contents = {k: v for k, v in self.files.items() if k.startswith(prefix)}
        if not contents or any(v is None for v in contents.values()):
            raise Rejected("engine-config-unproven",
                           f"config dir {val.shown} holds files of unknown content", node)
        point = (node.start_point.row, node.start_point.column)
        if self.anchor is not None:
            point = (self.anchor[0].start_point.row, self.anchor[0].start_point.column)
        for key, content in sorted(contents.items()):
            assert content is not None
            relative = key[len(prefix):]
            self.shared.startup_uses.append((key, point, f"docker config file {key}"))
            try:
                data = json.loads(content)
            except ValueError as err:
                raise Rejected("engine-config-unproven", f"{key} is not JSON", node) from err
            if relative == "config.json":
                if not isinstance(data, dict) or not set(data) <= R.DOCKER_CONFIG_KEYS or not all(
                        isinstance(v, str) for v in data.values()):
                    raise Rejected("engine-config-unproven", f"{key}: only the keys "
                                   f"{sorted(R.DOCKER_CONFIG_KEYS)} (credsStore, proxies, plugins... "
                                   "run or reroute things)", node)
            elif R.DOCKER_CONTEXT_META.fullmatch(relative):
                self.check_context_meta(key, data, node)
            else:
                raise Rejected("engine-config-unproven", f"{key}: not a config.json or a context's "
                               "meta.json", node)

    def check_context_meta(self, key: str, data: object, node: Node) -> None:
        """A context meta.json: Name, empty Metadata, one docker endpoint on a local address."""
        ok = (isinstance(data, dict) and set(data) <= {"Name", "Metadata", "Endpoints"}
              and data.get("Metadata", {}) == {} and isinstance(data.get("Endpoints"), dict)
              and set(data["Endpoints"]) == {"docker"} and isinstance(data["Endpoints"]["docker"], dict)
              and set(data["Endpoints"]["docker"]) <= {"Host", "SkipTLSVerify"}
              and isinstance(data["Endpoints"]["docker"].get("Host"), str)
              and isinstance(data["Endpoints"]["docker"].get("SkipTLSVerify", False), bool))
        if not ok:
            raise Rejected("engine-config-unproven", f"{key}: only Name, Metadata {{}} and "
                           "Endpoints.docker.{Host, SkipTLSVerify}", node)
        assert isinstance(data, dict)
        host = data["Endpoints"]["docker"]["Host"]
        if not endpoint_ok(const(host)):
            raise Rejected("engine-host-not-loopback", f"config endpoint {host}", node)

    def test(self, node: Node) -> None:
        """``[[ ]]`` and ``[ ]``: only the operators of ``TEST_UNARY``/``TEST_BINARY``.

        ``[[ -eq ]]`` (and the other integer comparisons) evaluates both sides arithmetically,
        where a value such as ``a[$(cmd)]`` runs cmd: its operands must be integer literals. In
        ``[ ]`` every operand must be one word (no splitting), or a value could become ``-v``.
        """
        double = bool(node.children) and node.children[0].type == "[["
        inner = [c for c in node.children if c.is_named and c.type != "comment"]
        if len(inner) != 1:
            raise Rejected("unsupported", "a test with other than one expression", node)
        self.test_expr(inner[0], double)

    def test_expr(self, n: Node, double: bool) -> None:
        t = n.type
        if t == "parenthesized_expression" and double:
            for c in n.named_children:
                self.test_expr(c, double)
            return
        if t == "unary_expression":
            op = n.children[0]
            rest = [c for c in n.children[1:] if c.is_named]
            if text_of(op) == "!" and len(rest) == 1:
                return self.test_expr(rest[0], double)
            if op.type != "test_operator" or text_of(op) not in TEST_UNARY or len(rest) != 1:
                raise Rejected("unsupported", f"test operator {text_of(op)!r}", op)
            return self.test_operand(rest[0], double)
        if t == "binary_expression":
            if len(n.children) != 3:
                raise Rejected("unsupported", "a test expression of unknown shape", n)
            left, op, right = n.children
            op_text = text_of(op)
            if double and op_text in ("&&", "||"):
                self.test_expr(left, double)
                self.test_expr(right, double)
                return
            if op_text in TEST_INTEGER:
                for side in (left, right):
                    val = self.test_operand(side, double)
                    if double and not (val.exact and re.fullmatch(r"-?[0-9]+", val.text)):
                        raise Rejected("arithmetic-unprovable",
                                       f"[[ {op_text} ]] evaluates {text_of(side)!r} arithmetically: "
                                       "only integer literals", side)
                return
            if op_text not in TEST_BINARY or (not double and op_text in ("=~", "<", ">")):
                raise Rejected("unsupported", f"test operator {op_text!r}", op)
            self.test_operand(left, double)
            self.test_operand(right, double)
            return
        self.test_operand(n, double)

    def test_operand(self, n: Node, double: bool) -> Val:
        if n.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            raise Rejected("unsupported", "a nested test expression", n)
        val = self.value(n, quoted=double)
        if val.split and not double:  # [[ ]] neither splits nor globs its operands
            raise Rejected("unsupported", f"test operand {text_of(n)!r} may split into several words "
                           "(quote it)", n)
        return val

    # -- words --
    def argv(self, cmd: Node) -> list[Val]:
        name = cmd.child_by_field_name("name")
        out = [self.value(name)] if name is not None else []
        out += [self.value(a) for a in cmd.children_by_field_name("argument")]
        return out

    def value(self, node: Node, quoted: bool = False) -> Val:
        t = node.type
        if t == "command_name":
            return concat(self.value(c) for c in node.children)
        if t in ("word", "number", "extglob_pattern", "regex"):
            if "$[" in text_of(node) or "$((" in text_of(node):
                raise Rejected("arithmetic-unprovable", "$[ ] evaluates its text arithmetically", node)
            unescaped = re.sub(r"\\.", "", text_of(node), flags=re.S)
            if t != "regex" and re.search(r"\$[({]|`", unescaped):
                # bash would expand this; the parser kept it as a plain word: they disagree
                raise Rejected("unsupported", f"{text_of(node)[:40]!r}: an expansion the parser "
                               "read as plain text", node)
            return self.word(text_of(node))
        if t == "raw_string":
            return const(text_of(node)[1:-1])
        if t == "ansi_c_string":
            try:
                return const(ansi_c_decode(text_of(node)[2:-1]))
            except Unsupported as err:
                raise Rejected("unsupported", str(err), node) from err
        if t == "translated_string":
            raise Rejected("unsupported", '$"..." (locale translation)', node)
        if t == "string":
            return self.dquoted(node)
        if t == "concatenation":
            return concat(self.value(c) for c in node.children)
        if t == "simple_expansion":
            return self.variable(text_of(node)[1:], node, quoted)
        if t == "expansion":
            return self.expansion(node, quoted)
        if t in ("command_substitution", "process_substitution"):
            self.substitution(node)
            return Val((Opaque(text_of(node)),), split=not quoted)
        if t == "arithmetic_expansion":
            raise Rejected("arithmetic-unprovable", "$(( )) evaluates its text arithmetically", node)
        if t == "array":
            raise Rejected("unsupported", "arrays (an index is evaluated arithmetically)", node)
        if t == "$":
            following = node.next_sibling
            if following is not None and following.start_byte == node.end_byte and following.type == "string":
                raise Rejected("unsupported", '$"..." (locale translation)', node)
            return const("$")
        raise Rejected("unsupported-syntax", f"{t} in a word is not modelled by the lint", node)

    def word(self, raw: str) -> Val:
        """An unquoted word: backslashes quote, ~ is $HOME, globs and braces may expand."""
        split = bool(GLOB_CHARS.search(raw.replace("\\*", "").replace("\\?", "").replace("\\[", "")))
        split = split or "{" in raw or "}" in raw
        parts: list[str | Opaque] = []
        if raw == "~" or raw.startswith("~/"):
            parts.append(Opaque("HOME"))
            raw = raw[1:]
        elif raw.startswith("~"):
            return Val((Opaque(raw),), split=True)
        # backslash-newline is a line continuation, removed; any other backslash quotes the next
        # character (bash(1), QUOTING)
        parts.append(re.sub(r"\\(.)", lambda m: "" if m.group(1) == "\n" else m.group(1), raw, flags=re.S))
        return Val(tuple(parts), split)

    def dquoted(self, node: Node) -> Val:
        """A double-quoted string as bash reads it.

        tree-sitter-bash leaves the newlines and CRs between two ``string_content`` pieces out
        of every child (issue 27 #3, #4: ``"# note<LF>docker rm"`` read as one comment), so the
        literal text is taken from the source bytes between the children, and the escapes are
        applied to each whole literal run: in double quotes a backslash quotes only the dollar,
        the backtick, the double quote, the backslash and a newline; backslash-newline is removed
        (bash(1), QUOTING).
        """
        vals: list[Val] = []
        raw = node.text or b""
        literal: list[bytes] = []
        pos = None

        def flush() -> None:
            text = b"".join(literal).decode("utf-8", "surrogateescape")
            literal.clear()
            if not text:
                return
            if re.search(r"\$[({\[]|`", re.sub(r"\\.", "", text, flags=re.S)):
                # bash would expand this; the parser kept it as text: they disagree
                raise Rejected("unsupported", f"{text[:40]!r}: an expansion the parser read "
                               "as plain text", node)
            vals.append(const(re.sub(r'\\([$`"\\\n])',
                                     lambda m: "" if m.group(1) == "\n" else m.group(1), text)))

        for c in node.children:
            start, end = c.start_byte - node.start_byte, c.end_byte - node.start_byte
            if pos is not None and start > pos:
                literal.append(raw[pos:start])  # what the parser left between two children
            pos = end
            if c.type in ('"', "$\""):
                continue
            if c.type == "string_content":
                literal.append(raw[start:end])
            elif c.type == "$":
                literal.append(b"$")
            else:
                flush()
                vals.append(self.value(c, quoted=True))
        flush()
        return concat(vals) if vals else const("")

    def variable(self, name: str, node: Node, quoted: bool) -> Val:
        if not IDENTIFIER.match(name):
            return Val((Opaque(name),), split=not quoted)
        val = self.constant(name, node)
        if val is None:
            return Val((Opaque(name),), split=not quoted)
        # unquoted, a constant with blanks or glob characters becomes several words, and an empty
        # one none at all (`v=''; docker inspect $v web` runs `docker inspect web`: found by the
        # differential check, issue 27)
        splits = not quoted and (not val.exact or val.text == ""
                                 or re.search(r"[ \t\n*?\[]", val.text) is not None)
        return Val(val.parts, split=val.split or splits)

    def constant(self, name: str, use: Node) -> Val | None:
        nodes = self.scope.assignments.get(name, [])
        if len(nodes) != 1 or nodes[0].id not in self.scope.blocks:
            return None
        assign, block = nodes[0], self.scope.blocks[nodes[0].id]
        # Only uses after the assignment and inside the block it runs in unconditionally.
        if use.start_byte < assign.end_byte or use.end_byte > block.end_byte:
            return None
        if name not in self.scope.cache:
            self.scope.cache[name] = None  # guards self-reference
            value = assign.child_by_field_name("value")
            val = self.value(value, quoted=True) if value is not None else const("")
            self.scope.cache[name] = Val(val.parts) if value is None or value.type != "array" else val
        return self.scope.cache[name]

    def expansion(self, node: Node, quoted: bool) -> Val:
        """``${...}``: only the forms of ``EXPANSION_FORMS``, and words inside them of the subset.

        Refused: indirection ``${!x}``, ``@`` transformations (``${x@P}`` expands a prompt, which
        runs command substitutions), assignment ``${x:=v}``, subscripts and non-literal offsets
        (both arithmetic), and ``$(...)``/backticks inside the operator word (tree-sitter-bash and
        bash may split such words differently).
        """
        opener, closer = node.children[0], node.children[-1]
        if not opener.type == "${" or closer.type != "}" or not text_of(opener).endswith("${"):
            raise Rejected("unsupported", f"expansion {text_of(node)!r} of unknown shape", node)
        # tree-sitter-bash 0.25 folds whitespace before ${ into the token (" ${out}" in "a ${out}")
        lead = text_of(opener)[:-2]
        if lead.strip():
            raise Rejected("unsupported", f"expansion {text_of(node)!r} of unknown shape", node)
        raw = node.text or b""
        inner = raw[opener.end_byte - node.start_byte:closer.start_byte - node.start_byte].decode(
            "utf-8", "surrogateescape")
        for n in walk(node):
            if n is node:
                continue
            if n.type == "subscript":
                raise Rejected("arithmetic-unprovable", f"subscript in ${{{inner}}}", n)
            if n.type in ("command_substitution", "process_substitution", "arithmetic_expansion"):
                raise Rejected("unsupported", f"$(...), backticks or $(( )) inside ${{{inner}}}", n)
            if n.type == "expansion":
                self.expansion(n, quoted=True)  # nested: the same forms
            if n.type == "ansi_c_string":
                self.value(n)
            if n.type == "translated_string":
                raise Rejected("unsupported", '$"..." (locale translation)', n)
        if "`" in inner or "$(" in inner or "$[" in inner:
            raise Rejected("unsupported", f"$(...), backticks or $[ ] inside ${{{inner}}}", node)
        form = next((f for f in EXPANSION_FORMS if f.fullmatch(inner)), None)
        if form is None and re.fullmatch(rf"{_PARAM}:[^-=?+].*|[@*]:.*", inner, flags=re.S):
            raise Rejected("arithmetic-unprovable", f"substring offset in ${{{inner}}}: only literal "
                           "digits (an offset is evaluated arithmetically)", node)
        if form is None:
            raise Rejected("unsupported", f"${{{inner}}}: only $name, ${{name}}, ${{#name}}, "
                           "${name:-word}, ${name-word}, ${name:+word}, ${name+word}, ${name%word}, "
                           "${name#word}, ${name/word/word}, ${name:N[:N]} with literal N".replace(
                               "{{", "{"), node)
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*|[0-9])", inner)
        val = self.variable(m.group(1), node, quoted) if m else Val((Opaque(inner),), split=not quoted)
        return concat([const(lead), val]) if lead else val

    def substitution(self, node: Node) -> None:
        if node.id in self.seen:
            return
        self.seen.add(node.id)
        self.statements(node.named_children, Stdin())

    # -- commands --
    def command(self, node: Node, redirects: list[Node], stdin: Stdin) -> None:
        env: dict[str, Val] = {}
        for c in node.children:
            if c.type == "variable_assignment":
                name, val = self.assignment(c)
                if name not in R.PREFIX_VARIABLES:
                    raise Rejected("sensitive-variable", f"{name}=... before a command: only "
                                   f"{', '.join(sorted(R.PREFIX_VARIABLES))} may be set for one", c)
                env[name] = val
        for c in node.children:  # herestrings and redirects tree-sitter keeps inside the command
            if c.type.endswith("redirect"):
                redirects = [*redirects, c]
        argv = self.argv(node)
        stdin = self.stdin_from(redirects, stdin)
        self.check_redirects(redirects, node, argv)
        if argv:
            self.run(argv, env, stdin, node, open_tail=False, functions=True)

    def stdin_from(self, redirects: list[Node], stdin: Stdin) -> Stdin:
        """What the command reads on fd 0 after its redirections, applied in order."""
        for r in redirects:
            if r.type == "heredoc_redirect":
                body, ok = self.heredocs.get(r.id, ("", False))
                if not ok:
                    raise Rejected("unsupported", "here-document not proven", r)
                stdin = Stdin("heredoc", body, True)
            elif r.type == "herestring_redirect":
                val = concat(self.value(c) for c in r.named_children)
                stdin = Stdin("content", val.text + "\n") if val.exact else Stdin("unknown")
            elif r.type == "file_redirect":
                op = redirect_operator(r)
                dest = r.child_by_field_name("destination")
                fd = redirect_fd(r)
                if fd not in ("", "0"):
                    continue  # not stdin
                if fd in ("", "0") and op in ("<", "<&", "<>"):
                    target = self.value(dest) if dest is not None else const("")
                    if op == "<" and target.exact and target.text == "/dev/null":
                        stdin = Stdin("null")
                    elif op == "<&" and target.exact and target.text == "-":
                        stdin = Stdin("null")  # closed: reads fail
                    else:
                        stdin = Stdin("unknown")  # a file, a socket, a duplicated fd
        return stdin

    def check_redirects(self, redirects: list[Node], cmd: Node | None, argv: list[Val]) -> None:
        """Every redirection is one of the subset's forms (docs/mutants.md), else refused.

        Writes: ``>``, ``>>``, ``>|``, ``&>``, ``&>>`` on fd 1 or 2 to a provable target.
        Reads: ``<`` on fd 0. Duplication: between fds 1 and 2, ``<&N`` on fd 0 (stdin is then
        unknown), ``>&N`` (N >= 3) only for printf of a constant read-only request. ``N<&-``
        closes. ``exec N</dev/tcp/LOOPBACK/PORT`` (N >= 3) opens a socket; any other
        redirection of ``exec`` alone (``exec 1<&3``, ``exec >file``) would redirect every later
        command and is refused.
        """
        exec_only = len(argv) == 1 and argv[0].exact and argv[0].text == "exec"
        for r in redirects:
            if r.type == "heredoc_redirect":
                if exec_only:
                    raise Rejected("unsupported", "exec with a here-document", r)
                continue
            if r.type == "herestring_redirect":
                if exec_only:
                    raise Rejected("unsupported", "exec with a here-string", r)
                continue
            if r.type != "file_redirect":
                raise Rejected("unsupported", f"redirection {text_of(r)!r}", r)
            op = redirect_operator(r)
            dest_node = r.child_by_field_name("destination")
            dest = self.value(dest_node) if dest_node is not None else const("")
            fd = redirect_fd(r)
            if fd and not re.fullmatch(r"[0-9]", fd):
                raise Rejected("unsupported", f"redirection of fd {fd!r}", r)
            if op in ("<&", ">&", "<&-", ">&-") and dest.exact and dest.text == "-" or op in ("<&-", ">&-"):
                continue  # closing an fd
            if exec_only:
                if not dest.exact and dest.prefix.startswith(("/dev/tcp", "/dev/udp")):
                    raise Rejected("redirect-target-unprovable", f"network device {dest.shown}", r)
                dev = tcp_device(dest.text) if dest.exact else None
                if not (op == "<" and fd and int(fd) >= 3 and dev is not None):
                    raise Rejected("unsupported", f"exec {text_of(r)}: exec without a command may only "
                                   "open a loopback /dev/tcp socket on fd 3-9 or close an fd", r)
                if dev[0] not in R.LOOPBACK_HOSTS:
                    raise Rejected("engine-host-not-loopback", f"/dev/tcp to {dev[0]}", r)
                continue
            if op in ("<&", ">&") and dest.exact and dest.text.isdigit():
                target = int(dest.text)
                if op == ">&" and fd in ("", "1", "2") and target in (1, 2):
                    continue
                if op == ">&" and fd in ("", "1") and target >= 3:
                    self.check_socket_write(argv, r)
                    continue
                if op == "<&" and fd in ("", "0") and target >= 3:
                    continue  # stdin becomes the fd: stdin_from makes it unknown
                raise Rejected("unsupported", f"fd duplication {text_of(r)!r}", r)
            if op in ("<&", ">&") and not dest.exact:
                raise Rejected("redirect-target-unprovable", f"fd duplication onto {dest.shown}", r)
            if op == ">&":
                op = "&>"  # `>&file` is `&>file`
            if fd not in ("", "0", "1", "2"):
                raise Rejected("unsupported", f"redirection of fd {fd} (only 0, 1 and 2; "
                               "`exec N</dev/tcp/...` opens a socket)", r)
            dev = tcp_device(dest.text) if dest.exact else None
            if dev is not None:
                if dev[0] not in R.LOOPBACK_HOSTS:
                    raise Rejected("engine-host-not-loopback", f"/dev/tcp to {dev[0]}", r)
                if op != "<" or fd not in ("", "0"):
                    self.check_socket_write(argv, r)
                continue
            if dest.prefix.startswith(("/dev/tcp", "/dev/udp")):  # a socket to a host not known
                raise Rejected("redirect-target-unprovable", f"network device {dest.shown}", r)
            if op == "<":
                if not dest.exact:  # could be /dev/tcp/ANY-HOST/PORT
                    raise Rejected("redirect-target-unprovable", f"input from {dest.shown}", r)
                continue
            if op not in (">", ">>", ">|", "&>", "&>>"):
                raise Rejected("unsupported", f"redirection {op!r}", r)
            self.check_write(dest, op, argv, r)

    def record_write(self, key: str, node: Node | None) -> None:
        """Count one write to the run-dir file ``key`` (see ``Shared.writes``)."""
        top = False
        if node is not None and self.depth == 0:
            parent = node.parent
            while parent is not None and parent.type in ("command", "redirected_statement", "file_redirect"):
                parent = parent.parent
            top = parent is not None and parent.type == "program"
        self.shared.writes.setdefault(key, []).append(top)

    def check_socket_write(self, argv: list[Val], node: Node) -> None:
        """Bytes written to a socket fd: only printf of a constant read-only request."""
        is_printf = bool(argv) and argv[0].exact and argv[0].text == "printf"
        content = printf_output(argv[1:], self.printf_escapes) if is_printf else None
        if content is None or not request_ok(content):
            raise Rejected("network-input-unprovable",
                           "only printf of a constant GET/HEAD may write to a socket", node)
        self.shared.raw_sends.append(("/dev/tcp", (), content))

    def check_write(self, dest: Val, op: str, argv: list[Val], node: Node) -> None:
        if dest.exact and dest.text in R.HARMLESS_WRITE_TARGETS:
            return
        if route_log_target(dest):
            return
        if run_dir_path(dest):
            content = None
            if argv and argv[0].exact and argv[0].text == "printf" and op in (">", ">|"):
                content = printf_output(argv[1:], self.printf_escapes)
            key = normalize_rel(dest.text)
            self.files[key] = content if op in (">", ">|") or self.files.get(key, "") is None else None
            self.record_write(key, node)
            return
        is_probe = (op == ">>" and len(argv) == 1 and argv[0].exact and argv[0].text in R.PROBE_COMMANDS)
        if is_probe and normalize_rel(dest.text) in R.PERSISTENCE_FILES:
            return
        outside = dest.prefix.startswith("/") or dest.parts[0] == Opaque("HOME")
        if not dest.exact and not is_probe and not outside:
            raise Rejected("redirect-target-unprovable", f"write to {dest.shown}", node)
        raise Rejected("write-outside-run-dir", f"write to {dest.shown}", node)

    # -- what a command line runs --
    def run(self, argv: list[Val], env: dict[str, Val], stdin: Stdin, node: Node, open_tail: bool,
            functions: bool) -> None:
        head = argv[0]
        if not head.exact:
            raise Rejected("dynamic-command-name", f"command name {head.shown!r} is not a constant", node)
        name = head.text
        if functions and self.defined_function(name, node):
            if env:
                raise Rejected("unsupported", f"{name}: a function call with environment assignments", node)
            if name in self.helper_functions:
                self.helper_arguments(self.helper_functions[name], argv[1:], node)
            return  # the body is linted where it is defined
        if "/" in name:
            directory, _, base = name.rpartition("/")
            if directory not in R.SYSTEM_DIRS:
                raise Rejected("command-path-not-allowed", f"{name}: not in {sorted(R.SYSTEM_DIRS)}", node)
            name = base
        args = argv[1:]
        passes_env = name in R.WRAPPERS or name == "xargs" or name in R.ENGINES
        for var in env:
            if var != "BASH_ENV" and not passes_env:
                # DOCKER_CONTEXT=prod bash -c 'docker ps' (or eval '...'): the engine CLI must be
                # checked with the variables it gets, so they may only go straight to one.
                raise Rejected("sensitive-variable", f"{var} set for {name}, which is not an engine CLI",
                               node)
        if name == "eval":
            if open_tail:  # `xargs eval`: the appended text would be evaluated
                raise Rejected("xargs-open-command", "xargs eval", node)
            return self.eval(args, node)
        if name in R.REJECTED_BUILTINS:
            raise Rejected(R.REJECTED_BUILTINS[name], f"{name} is not allowed", node)
        if name in R.SHELLS:
            return self.shell(name, args, node)
        if name in R.WRAPPERS:
            return self.wrapper(name, args, env, stdin, node, open_tail)
        if name == "xargs":
            return self.xargs(args, env, node, open_tail, stdin)
        if name in R.ENGINES:
            self.shared.engine_calls.append(tuple(argv))
            self.shared.engine_envs.append(dict(env))
            return self.engine(name, args, env, node, open_tail)
        if name == "curl":
            return self.curl(args, node, open_tail)
        if name in ("socat", "nc", "netcat", "ncat"):
            return self.socket_tool(name, args, stdin, node, open_tail)
        if name in R.PYTHONS:
            return self.python(args, stdin, node, open_tail)
        if name == "mkdir":
            return self.mkdir(args, node, open_tail)
        if name == "ln":
            return self.ln(args, node, open_tail)
        if name in R.ALLOWED_BUILTINS:
            return self.builtin(name, args, node, open_tail)
        if name in R.EXTERNAL_TOOLS:
            return self.external(name, args, node)
        if name in R.BASH_BUILTINS:
            raise Rejected("unsupported", f"the builtin {name} (the subset allows only "
                           f"{' '.join(sorted(R.ALLOWED_BUILTINS))})", node)
        if name in R.DESTRUCTIVE_TOOLS or name.startswith("mkfs"):
            raise Rejected("destructive-command", f"{name} changes files or processes", node)
        raise Rejected("command-not-allowed", f"{name} is not on the allowlist", node)

    def defined_function(self, name: str, call: Node) -> bool:
        """True when ``name`` surely names the payload's function at ``call``.

        Only a single definition directly in the script, before the call, counts: a function
        defined in an if branch, twice, or later may not exist when the call runs, and then the
        name runs whatever command has it (`if false; then rm() { :; }; fi; rm -rf x`).
        """
        defs = self.scope.functions.get(name, [])
        if len(defs) != 1:
            return False
        definition = defs[0]
        parent = definition.parent
        return parent is not None and parent.type == "program" and call.start_byte > definition.end_byte

    def builtin(self, name: str, args: list[Val], node: Node, open_tail: bool) -> None:
        """The allowed builtins, each with the only argument forms the subset accepts."""
        if open_tail and name not in (":", "true", "false", "echo"):
            raise Rejected("xargs-open-command", f"xargs {name}: appended arguments", node)
        if any(a.split for a in args) and name not in (":", "true", "false", "echo"):
            raise Rejected("unsupported", f"{name} with an argument that may split into several words",
                           node)
        if name == "echo" and self.dialect == "dash" and any("\\" in a.text for a in args):
            # dash's echo decodes \n, \c and \0NNN in every argument (dash(1), echo): a printable
            # `\0015\0012` becomes CR LF, a second request on a socket
            # (an opaque argument may hold backslashes too, but then what echo prints is unknown to
            # the lint, `produced`, and never reaches a socket)
            raise Rejected("unsupported", "echo with a backslash in sh -c text (dash decodes it)", node)
        if name in (":", "true", "false", "echo"):
            return  # arguments are data (their expansions are checked where they are evaluated)
        if name == "pwd":
            if any(not (a.exact and a.text in ("-L", "-P")) for a in args):
                raise Rejected("unsupported", "pwd takes only -L or -P", node)
        elif name == "printf":
            if not args or not args[0].exact or args[0].text.startswith("-"):
                raise Rejected("unsupported", "printf: the format must be a constant that is not an "
                               "option (printf -v assigns a variable)", node)
            try:
                printf_format(args[0].text, self.printf_escapes)
            except Unsupported as err:
                raise Rejected("unsupported", str(err), node) from err
        elif name in ("test", "["):
            operands = args
            if name == "[":
                if not args or not (args[-1].exact and args[-1].text == "]"):
                    raise Rejected("unsupported", "[ without ]", node)
                operands = args[:-1]
            self.test_words(name, operands, node)
        elif name == "wait":
            for a in args:
                if not (a.parts == (Opaque("!"),) or a.exact and a.text.isdigit()):
                    raise Rejected("unsupported", f"wait {a.shown}: only wait, wait \"$!\" or a pid "
                                   "(wait -p assigns a variable)", node)
        elif name in ("return", "exit", "shift", "break", "continue"):
            if len(args) > 1 or args and not (args[0].parts == (Opaque("?"),)
                                              or args[0].exact and args[0].text.isdigit()):
                raise Rejected("unsupported", f"{name}: only an integer literal or \"$?\"", node)
        elif name == "set":
            i = 0
            while i < len(args):
                a = args[i]
                if a.exact and a.text in R.SET_FLAGS:
                    i += 1
                elif (a.exact and a.text in ("-o", "+o") and i + 1 < len(args) and args[i + 1].exact
                      and args[i + 1].text in R.SET_OPTIONS):
                    i += 2
                else:
                    raise Rejected("unsupported", f"set {a.shown}: only {' '.join(sorted(R.SET_FLAGS))} "
                                   f"and -o/+o {'/'.join(sorted(R.SET_OPTIONS))} (set -k makes later "
                                   "arguments environment)", node)
        else:  # local reached through command/exec: never a declaration there
            raise Rejected("unsupported", f"{name} outside its own statement", node)

    def test_words(self, name: str, words: list[Val], node: Node) -> None:
        """``test``/``[`` as a command: bash picks the operators by the number of words, so
        every word an operator could stand at must be a constant operator of the subset."""
        ops = TEST_UNARY | TEST_BINARY | TEST_INTEGER | {"!", "(", ")", "-a", "-o", "-v", "-R"}
        if len(words) == 1:
            return
        if len(words) == 2 and words[0].exact and words[0].text in TEST_UNARY | {"!"}:
            if words[0].text == "!" and words[1].exact and words[1].text in ops:
                raise Rejected("unsupported", f"{name} ! {words[1].text}", node)
            return
        if (len(words) == 3 and words[1].exact and words[1].text in TEST_BINARY | TEST_INTEGER
                and words[1].text not in ("=~",)):
            return
        shown = " ".join(w.shown for w in words)
        raise Rejected("unsupported", f"{name} {shown}: only one word, UNARY-OP word or word OP word "
                       "with a constant operator", node)

    def external(self, name: str, args: list[Val], node: Node) -> None:
        """A read-only external tool: only the options of ``EXTERNAL_TOOLS``, and positional
        arguments that cannot be read as options."""
        rule = R.EXTERNAL_TOOLS[name]
        flags, values = set(rule["flags"]), set(rule["values"])  # type: ignore[call-overload]
        positional: list[Val] = []
        i, options_done = 0, False
        while i < len(args):
            a = args[i]
            i += 1
            if a.split:
                raise Rejected("unsupported", f"{name} argument {a.shown!r} may split", node)
            if not options_done and a.exact and a.text == "--":
                options_done = True
                continue
            # `''` is an empty positional argument, not an option
            if not options_done and (a.prefix.startswith("-") or not a.prefix) and a.text not in ("-", ""):
                if not a.exact:
                    raise Rejected("unsupported", f"{name} argument {a.shown!r} could be an option", node)
                opts = split_options(a.text, flags, values)
                if opts is None:
                    raise Rejected("unsupported", f"{name} option {a.text!r} is not in the subset", node)
                if opts[-1][1] == "":
                    _, i = option_value(args, i, "", "unsupported", f"{name} {opts[-1][0]}", node)
                continue
            positional.append(a)
        kind = rule["positional"]
        if kind == "none" and positional:
            raise Rejected("unsupported", f"{name} takes no arguments here", node)
        if kind == "format" and (len(positional) > 1
                                 or positional and not positional[0].text.startswith("+")):
            raise Rejected("unsupported", f"{name}: only +FORMAT", node)

    def eval(self, args: list[Val], node: Node) -> None:
        if not all(a.exact for a in args):
            shown = " ".join(a.shown for a in args)
            raise Rejected("eval-non-constant", f"eval of {shown!r}", node)
        self.nested(" ".join(a.text for a in args), node, "eval")

    def shell(self, name: str, args: list[Val], node: Node) -> None:
        i = 0
        while i < len(args):
            a = args[i]
            if not a.exact:
                raise Rejected("shell-string-non-constant", f"{name} argument {a.shown!r}", node)
            t = a.text
            if t in R.SHELL_VALUE_FLAGS:
                option = args[i + 1] if i + 1 < len(args) else None
                if option is None or not option.exact or option.text not in R.SET_OPTIONS:
                    raise Rejected("shell-option-not-allowed", f"{name} {t} {option.shown if option else ''}",
                                   node)
                i += 2
                continue
            if t in R.SHELL_FLAGS:
                i += 1
                continue
            if t.startswith("-") and len(t) > 1 and "c" in t[1:] and not t.startswith("--"):
                others = {"-" + ch for ch in t[1:] if ch != "c"}
                if not others <= R.SHELL_FLAGS:
                    raise Rejected("shell-option-not-allowed", f"{name} {t}", node)
                if i + 1 >= len(args):
                    raise Rejected("shell-reads-stdin", f"{name} -c without a string", node)
                script = args[i + 1]
                if not script.exact:
                    raise Rejected("shell-string-non-constant", f"{name} -c {script.shown!r}", node)
                if name not in R.SHELL_DIALECTS:
                    # zsh's echo decodes escapes and its unquoted $x does not split: not bash
                    raise Rejected("unsupported", f"{name} -c: only bash -c and sh -c/dash -c text "
                                   "is modelled", node)
                self.nested(script.text, node, f"{name} -c string", R.SHELL_DIALECTS[name])
                return
            if t.startswith("-") and t != "-":
                code = "shell-reads-stdin" if t in ("-s",) else "shell-option-not-allowed"
                raise Rejected(code, f"{name} {t}", node)
            raise Rejected("shell-reads-stdin", f"{name} runs the file {t!r}", node)
        raise Rejected("shell-reads-stdin", f"{name} reads its program from stdin", node)

    def nested(self, text: str, node: Node, label: str, dialect: str | None = None) -> None:
        if self.depth > 8:
            raise Rejected("unsupported-syntax", "nesting deeper than 8 levels", node)
        anchor = self.anchor or (node, label)
        if self.anchor is not None:
            anchor = (self.anchor[0], f"{self.anchor[1]}: {label}")
        child = Linter(self.path, self.helper_hashes, self.shared, self.findings, anchor, self.depth + 1,
                       shares_shell=label == "eval", dialect=dialect or self.dialect)
        # Every nested text gets a scope of its own. For bash -c and BASH_ENV files that is what
        # runs; eval shares the shell, so there the caller's variables are opaque in the text
        # and the names the text mentions are never constant for the caller (prepass): neither
        # side can resolve a value the other may change.
        child.lint_text(text.encode("utf-8", "surrogateescape"))  # text_of's bytes, exactly

    def wrapper(self, name: str, args: list[Val], env: dict[str, Val], stdin: Stdin, node: Node,
                open_tail: bool) -> None:
        rule = R.WRAPPERS[name]
        flags, values = set(rule["flags"]), set(rule["values"])  # type: ignore[call-overload]
        env = dict(env)
        i = 0
        while i < len(args):
            a = args[i]
            if not a.exact:
                raise Rejected("wrapper-option-not-allowed", f"{name} argument {a.shown!r}", node)
            t = a.text
            if t == "--":
                i += 1
                break
            if name == "command" and t in rule.get("query", set()):  # type: ignore[operator]
                return
            if rule.get("assignments") and "=" in t and IDENTIFIER.match(t.split("=")[0]):
                var, _, value = t.partition("=")
                self.check_variable(var, const(value), node)
                if var not in R.PREFIX_VARIABLES:
                    raise Rejected("sensitive-variable", f"env {var}=...: only "
                                   f"{', '.join(sorted(R.PREFIX_VARIABLES))}", node)
                env[var] = const(value)
                i += 1
                continue
            if t.startswith("-") and t != "-":
                opts = split_options(t, flags, values)
                if opts is None:
                    raise Rejected("wrapper-option-not-allowed", f"{name} {t}", node)
                i += 1
                if opts[-1][1] == "":  # the value is the next argument: one word, never split
                    _, i = option_value(args, i, "", "wrapper-option-not-allowed", f"{name} {opts[-1][0]}",
                                        node)
                continue
            break
        rest = args[i:]
        if name == "timeout" and rest:
            duration = rest[0]  # `d="3 rm -rf"; timeout $d docker ps` would run rm
            if not (duration.exact and re.fullmatch(r"[0-9]+(\.[0-9]+)?[smhd]?", duration.text)):
                raise Rejected("wrapper-option-not-allowed", f"timeout duration {duration.shown!r}: only "
                               "a number", node)
            rest = rest[1:]
        if not rest:
            if open_tail:  # `xargs env`: the appended arguments would become the command
                raise Rejected("xargs-open-command", f"xargs {name} with no command", node)
            if rule.get("empty_ok") or name in ("env",):
                return
            raise Rejected("wrapper-option-not-allowed", f"{name} without a command", node)
        self.run(rest, env, stdin, node, open_tail, functions=False)

    def xargs(self, args: list[Val], env: dict[str, Val], node: Node, open_tail: bool = False,
              stdin: Stdin | None = None) -> None:
        i = 0
        while i < len(args):
            t = args[i].text
            if not args[i].exact:
                raise Rejected("xargs-open-command", f"xargs argument {args[i].shown!r}", node)
            if t.startswith("-") and t != "-":
                opts = split_options(t, R.XARGS["flags"], R.XARGS["values"])
                if opts is None:
                    raise Rejected("wrapper-option-not-allowed", f"xargs {t}", node)
                i += 1
                if opts[-1][1] == "":
                    _, i = option_value(args, i, "", "wrapper-option-not-allowed", f"xargs {opts[-1][0]}",
                                        node)
                continue
            break
        rest = args[i:]
        if not rest and open_tail:  # `xargs xargs`: the outer one would supply the command
            raise Rejected("xargs-open-command", "xargs with no command under xargs", node)
        if rest:
            # GNU xargs gives the command /dev/null as stdin (without -o/--open-tty)
            self.run(rest, env, Stdin("null"), node, open_tail=True, functions=False)
        if stdin is None or stdin.kind != "null":
            # What xargs reads becomes arguments: only with stdin </dev/null is its command line
            # exactly the one the lint checked (`... | xargs kubectl get pods` could add --kubeconfig).
            raise Rejected("xargs-open-command", "xargs must read </dev/null (its input becomes "
                           "arguments)", node)

    def engine(self, name: str, args: list[Val], env: dict[str, Val], node: Node, open_tail: bool) -> None:
        rule = R.ENGINES[name]
        values, flags = rule["values"], rule["flags"]
        context: Val | None = env.get("DOCKER_CONTEXT") if name == "docker" else None
        config: Val | None = env.get("DOCKER_CONFIG") if name == "docker" else None
        i = 0
        while i < len(args) and args[i].exact and args[i].text.startswith("-"):
            t = args[i].text
            opts = split_options(t, flags, values)  # type: ignore[arg-type]
            if opts is None or len(opts) != 1:
                raise Rejected("engine-option-not-allowed", f"{name} {t}", node)
            opt, attached = opts[0]
            i += 1
            if attached is None:
                continue
            val, i = option_value(args, i, attached, "engine-option-not-allowed", f"{name} {opt}", node)
            if opt in rule["host_options"] and not endpoint_ok(val):  # type: ignore[operator]
                raise Rejected("engine-host-not-loopback", f"{name} {opt} {val.shown}", node)
            if opt in rule["context_options"]:  # type: ignore[operator]
                context = val
            if opt in rule["config_options"]:  # type: ignore[operator]
                config = val
        if config is not None:
            self.check_config(config, node)
        if context is not None and not (context.exact and context.text == "default") and config is None:
            raise Rejected("engine-config-unproven",
                           f"context {context.shown} from a config the lint cannot read",
                           node)
        if i >= len(args):
            if open_tail:
                raise Rejected("xargs-open-command", f"xargs {name} with no subcommand", node)
            return
        if not args[i].exact:
            raise Rejected("dynamic-engine-subcommand", f"{name} {args[i].shown!r}", node)
        path = (args[i].text,)
        if path[0] in rule["groups"]:  # type: ignore[operator]
            if i + 1 >= len(args):
                if open_tail:
                    raise Rejected("xargs-open-command", f"xargs {name} {path[0]} with no subcommand", node)
                return
            second = args[i + 1]
            if not second.exact:
                raise Rejected("dynamic-engine-subcommand", f"{name} {path[0]} {second.shown!r}", node)
            path = (path[0], second.text)
        shown = " ".join((name, *path))
        if path in rule["read_only"]:  # type: ignore[operator]
            return self.engine_arguments(name, path, args[i + len(path):], node)
        if path[-1] in rule["destructive"] or path[0] in rule["destructive"]:  # type: ignore[operator]
            raise Rejected("destructive-engine-command", f"{shown} changes engine state", node)
        raise Rejected("engine-subcommand-not-allowed", f"{shown} is not on the read-only allowlist", node)

    def engine_arguments(self, name: str, path: tuple[str, ...], args: list[Val], node: Node) -> None:
        """Every argument after a read-only subcommand, to the last, against its allowlist."""
        shown = " ".join((name, *path))
        table = R.ENGINE_ARGUMENTS.get(name, {})
        if path not in table:
            raise Rejected("engine-subcommand-not-allowed", f"{shown}: its arguments are not modelled", node)
        flags, values, positional = table[path]
        rule = R.ENGINES[name]
        if name == "kubectl":  # kubectl's global options may follow the subcommand
            flags = flags | set(rule["flags"])  # type: ignore[arg-type]
            values = values | set(rule["values"])  # type: ignore[arg-type]
        i, options_done = 0, False
        while i < len(args):
            a = args[i]
            i += 1
            if a.split:
                raise Rejected("engine-option-not-allowed", f"{shown} argument {a.shown!r} may split", node)
            if not options_done and a.exact and a.text == "--":
                options_done = True
                continue
            empty = a.exact and a.text == ""  # `''`: an empty positional argument, not an option
            if not options_done and (a.prefix.startswith("-") or not a.prefix) and not empty:
                if not a.exact:
                    raise Rejected("engine-option-not-allowed",
                                   f"{shown} argument {a.shown!r} could be an option", node)
                opts = split_options(a.text, flags, values)
                if opts is None:
                    raise Rejected("engine-option-not-allowed",
                                   f"{shown} {a.text}: not on the read-only allowlist", node)
                opt, attached = opts[-1]
                if attached is None:
                    continue
                val, i = option_value(args, i, attached, "engine-option-not-allowed", f"{shown} {opt}", node)
                if opt in rule["host_options"] and not endpoint_ok(val):  # type: ignore[operator]
                    raise Rejected("engine-host-not-loopback", f"{shown} {opt} {val.shown}", node)
                if name == "kubectl" and opt in ("-o", "--output") and not (
                        val.exact and val.text in R.KUBECTL_OUTPUTS):
                    raise Rejected("engine-option-not-allowed", f"{shown} {opt} {val.shown}", node)
                continue
            if positional == "none":
                raise Rejected("engine-option-not-allowed", f"{shown} takes no argument {a.shown!r}", node)

    def curl(self, args: list[Val], node: Node, open_tail: bool) -> None:
        if open_tail:
            raise Rejected("xargs-open-command", "xargs curl: appended arguments could be options", node)
        c = R.CURL
        if not args or not args[0].exact or args[0].text not in ("-q", "--disable"):
            # curl reads ~/.curlrc unless -q comes first: a -X DELETE or data= there would apply.
            raise Rejected("curl-option-not-allowed", "curl must start with -q (ignore ~/.curlrc)", node)
        urls: list[Val] = []
        method, unix_socket = "GET", False
        i = 0
        while i < len(args):
            a = args[i]
            t = a.text
            i += 1
            if a.split:
                raise Rejected("curl-option-not-allowed", f"curl argument {a.shown!r} may split", node)
            if not t.startswith("-"):
                if a.prefix.startswith("-") or not a.prefix:
                    raise Rejected("curl-option-not-allowed",
                                   f"curl argument {a.shown!r} could be an option", node)
                urls.append(a)
                continue
            if not a.exact:
                raise Rejected("curl-option-not-allowed", f"curl option {a.shown!r}", node)
            # Upload options are parsed as value options so `-sd x` and `-XPOST` split right.
            opts = split_options(t, c["flags"], c["values"] | c["upload"])
            if opts is None:
                raise Rejected("curl-option-not-allowed", f"curl {t}", node)
            if any(opt in c["upload"] for opt, _ in opts):
                raise Rejected("curl-upload", f"curl {t} sends a body", node)
            for opt, attached in opts:
                if opt in ("-I", "--head"):
                    method = "HEAD"
                if attached is None:
                    continue
                val, i = option_value(args, i, attached, "curl-option-not-allowed", f"curl {opt}", node)
                method, unix_socket = self.curl_option(opt, val, method, unix_socket, urls, node)
        if method not in c["methods"]:
            raise Rejected("curl-method-not-read-only", f"curl -X {method}", node)
        for url in urls:
            self.curl_url(url, unix_socket, node)

    def curl_option(self, opt: str, val: Val, method: str, unix_socket: bool, urls: list[Val], node: Node
                    ) -> tuple[str, bool]:
        if opt in R.CURL["from_file"] and (val.text.startswith("@") or not val.prefix):
            # curl(1): `@FILE` (`@-`: stdin) reads the value from a file the payload can write:
            # a --write-out format there may hold %output{>>FILE} (curl >= 8.3), a header file
            # any header (rt4 L1). Only a value on the command line, constant from its start.
            code = "write-outside-run-dir" if opt in ("-w", "--write-out") else "curl-option-not-allowed"
            raise Rejected(code, f"curl {opt} {val.shown}: curl may read it from a file", node)
        if opt in ("-X", "--request"):
            if not val.exact or val.text.upper() not in R.CURL["methods"]:
                raise Rejected("curl-method-not-read-only", f"curl {opt} {val.shown}", node)
            return val.text.upper(), unix_socket
        if opt in ("-o", "--output"):
            if not (val.exact and val.text in R.HARMLESS_WRITE_TARGETS) and not run_dir_path(val):
                raise Rejected("write-outside-run-dir", f"curl {opt} {val.shown}", node)
            if run_dir_path(val):
                self.files[normalize_rel(val.text)] = None
                self.record_write(normalize_rel(val.text), None)
        elif opt in ("-w", "--write-out"):
            # a variable could spell %output{ (`%out${x}put{`): only a constant format
            if not val.exact or "%output{" in val.text or "%{output" in val.text:
                raise Rejected("write-outside-run-dir", f"curl {opt} {val.shown}: a format that is not "
                               "constant or holds %output{} writes a file", node)
        elif opt in ("-H", "--header"):
            header_name, colon, rest = val.text.partition(":")
            if (not colon or not all(isinstance(p, str) for p in const(header_name).parts)
                    or "\0" in header_name or header_name.strip().lower() not in R.CURL["headers"]
                    or "\n" in rest or "\r" in rest):
                raise Rejected("curl-option-not-allowed", f"curl header {val.shown!r}", node)
        elif opt in ("--unix-socket", "--abstract-unix-socket"):
            return method, True
        elif opt == "--url":
            urls.append(val)
        return method, unix_socket

    def curl_url(self, url: Val, unix_socket: bool, node: Node) -> None:
        text = url.text if url.exact else url.prefix
        m = re.match(r"^(https?)://(\[[^\]]*\]|[^/:?#]*)(:\d+)?(/[^?#]*)?(\?|$)", text)
        if not m or (not url.exact and m.group(5) != "?"):
            raise Rejected("curl-url-not-allowed",
                           f"curl {url.shown}: scheme, host and path must be constant", node)
        host, path = m.group(2), m.group(4) or "/"
        if host not in R.CURL["hosts"] or (host in R.CURL["socket_hosts"] and not unix_socket):
            raise Rejected("curl-url-not-allowed", f"curl host {host!r} is not local", node)
        if not read_only_path(path):
            raise Rejected("curl-url-not-allowed", f"curl path {path} is not a read-only endpoint", node)

    def socket_tool(self, name: str, args: list[Val], stdin: Stdin, node: Node, open_tail: bool) -> None:
        if open_tail:
            raise Rejected("xargs-open-command", f"xargs {name}", node)
        if not all(a.exact for a in args):
            raise Rejected("socket-address-not-allowed", f"{name} with non-constant arguments", node)
        constant_request = stdin.kind == "content" and request_ok(stdin.text or "")
        if stdin.kind != "null" and not constant_request:
            raise Rejected("network-input-unprovable",
                           f"{name} sends stdin that is not a constant GET/HEAD", node)
        self.shared.raw_sends.append((name, tuple(args), (stdin.text or "") if constant_request else ""))
        rule = R.SOCAT if name == "socat" else R.NC
        positional: list[str] = []
        i = 0
        unix = False
        while i < len(args):
            t = args[i].text
            i += 1
            if t.startswith("-") and t != "-":
                opts = split_options(t, rule["flags"], rule["values"])  # type: ignore[arg-type]
                if opts is None:
                    raise Rejected("socket-address-not-allowed", f"{name} {t}", node)
                unix = unix or any(o == "-U" for o, _ in opts)
                if opts[-1][1] == "":
                    i += 1
                continue
            positional.append(t)
        if name == "socat":
            self.socat_addresses(positional, node)
        elif unix:
            if len(positional) != 1:
                raise Rejected("socket-address-not-allowed", f"{name} -U needs one socket path", node)
        elif len(positional) != 2 or positional[0] not in R.LOOPBACK_HOSTS or not positional[1].isdigit():
            raise Rejected("socket-address-not-allowed",
                           f"{name} {' '.join(positional)}: not a loopback port", node)

    def socat_addresses(self, addresses: list[str], node: Node) -> None:
        if len(addresses) != 2 or addresses[0] not in R.SOCAT["stdio"]:
            raise Rejected("socket-address-not-allowed", f"socat {' '.join(addresses)}", node)
        kind, colon, rest = addresses[1].partition(":")
        target = R.SOCAT["connect"].get(kind.upper())
        if not colon or target is None or "," in rest:
            raise Rejected("socket-address-not-allowed", f"socat address {addresses[1]!r}", node)
        if target == "tcp":
            host = rest.rpartition(":")[0]
            if host not in R.LOOPBACK_HOSTS:
                raise Rejected("engine-host-not-loopback", f"socat {addresses[1]}", node)

    def python(self, args: list[Val], stdin: Stdin, node: Node, open_tail: bool) -> None:
        i = 0
        flags: set[str] = set()
        while i < len(args) and args[i].exact and args[i].text in R.PYTHON_FLAGS:
            flags.add(args[i].text)
            i += 1
        if open_tail or "-I" not in flags or i >= len(args) or not args[i].exact or args[i].text != "-":
            raise Rejected("python-not-pinned-helper",
                           "python runs only a pinned helper: python3 -I - <<'EOF'", node)
        if stdin.kind != "heredoc" or not stdin.quoted or stdin.text is None:
            raise Rejected("python-not-pinned-helper",
                           "python's program must be a quoted here-document", node)
        digest = hashlib.sha256(stdin.text.encode("utf-8", "surrogateescape")).hexdigest()
        if digest not in self.helper_hashes:
            raise Rejected("python-not-pinned-helper",
                           f"here-document sha256 {digest[:16]}... is not a pinned helper",
                           node)
        kind = next((k for start, k in R.HELPER_KINDS.items() if stdin.text.startswith(start)), None)
        rest = args[i + 1:]
        if rest == [Val((Opaque("@"),))] and self.functions_entered:
            # `name() { python3 -I - "$@" <<'H' ... }`: the helper's arguments are those of each
            # call of the function, checked there (run)
            self.helper_functions[self.functions_entered[-1]] = kind
            return
        self.helper_arguments(kind, rest, node)

    def helper_arguments(self, kind: str | None, args: list[Val], node: Node) -> None:
        """A pinned helper's arguments against its rule (``lint_rules.RAWSOCK``, ``ROUTE_ID``).

        The route id must be a constant of ``ROUTE_ID`` (it goes into request lines); endpoint
        values may be opaque (the helper connects only to local endpoints by itself) but never
        split; every option name is a constant, given once.
        """
        def refuse(why: str) -> Rejected:
            return Rejected("python-not-pinned-helper", f"{kind or 'a pinned helper'}: {why}", node)

        def route_ok(v: Val) -> bool:
            return v.exact and R.ROUTE_ID.fullmatch(v.text) is not None

        if kind == "dockerpy_route":
            if len(args) != 1 or not route_ok(args[0]):
                raise refuse("only one constant route id [A-Za-z0-9._-]")
            self.shared.helper_calls.append((kind, tuple(args)))
            return
        if kind != "rawsock":
            if args:
                raise refuse("takes no arguments")
            return
        if len(args) % 2:
            raise refuse("options come in pairs: --NAME VALUE")
        seen: dict[str, Val] = {}
        for name, value in zip(args[::2], args[1::2], strict=True):
            known = R.RAWSOCK["endpoints"] | {"--route", "--proto", "--timeout"}  # type: ignore[operator]
            if not name.exact or name.text not in known or name.text in seen:
                raise refuse(f"option {name.shown!r}: only {' '.join(sorted(known))}, each once")
            controls = any(isinstance(p, str) and re.search(r"[\x00-\x1f\x7f]", p) for p in value.parts)
            if value.split or controls:
                raise refuse(f"{name.text} {value.shown!r}: one word without control characters")
            seen[name.text] = value
        route, proto, timeout = seen.get("--route"), seen.get("--proto"), seen.get("--timeout")
        if route is None or not route_ok(route):
            raise refuse("--route must be a constant route id [A-Za-z0-9._-] (it goes into the "
                         "request line)")
        if proto is not None and not (proto.exact and proto.text in R.RAWSOCK["protos"]):  # type: ignore[operator]
            raise refuse(f"--proto {proto.shown!r}")
        if timeout is not None and not (timeout.exact and R.RAWSOCK["timeout"].fullmatch(timeout.text)):  # type: ignore[union-attr]
            raise refuse(f"--timeout {timeout.shown!r}")
        if len(set(seen) & R.RAWSOCK["endpoints"]) != 1:  # type: ignore[operator]
            raise refuse("exactly one of --unix --abstract --tcp --url")
        self.shared.helper_calls.append((kind, tuple(args)))

    def mkdir(self, args: list[Val], node: Node, open_tail: bool) -> None:
        if open_tail:
            raise Rejected("mkdir-not-allowed", "xargs mkdir", node)
        for a in args:
            if a.exact and a.text in ("-p", "--parents"):
                continue
            if run_dir_path(a) or normalize_rel(a.text) in R.PERSISTENCE_DIRS:
                continue
            raise Rejected("mkdir-not-allowed", f"mkdir {a.shown}", node)

    def ln(self, args: list[Val], node: Node, open_tail: bool) -> None:
        paths = [a for a in args if not (a.exact and re.fullmatch(r"-[sfnT]+", a.text))]
        if open_tail or len(paths) != 2 or not any(a.text.startswith("-") and "s" in a.text for a in args):
            raise Rejected("link-not-allowed", "ln -s ENGINE-SOCKET ./no-docker-NAME only", node)
        target, link = paths
        if not (target.exact and target.text in R.ENGINE_SOCKETS) or not run_dir_path(link):
            raise Rejected("link-not-allowed", f"ln -s {target.shown} {link.shown}", node)
        self.files[normalize_rel(link.text)] = None
        self.record_write(normalize_rel(link.text), None)


# ---- bytes outside quotes that tree-sitter-bash and bash read differently ------------------------

# Nodes whose bytes are quoted (or not code): a CR or a backslash-newline inside them is the
# string's business (``Linter.dquoted``, ``ansi_c_decode``), never a word boundary.
QUOTED_NODES = frozenset({"string", "raw_string", "ansi_c_string", "translated_string", "heredoc_body",
                          "comment"})


def unquoted_hazard(root: Node, source: bytes) -> tuple[int, int, str] | None:
    """(row, column, why) of the first byte outside quotes that the parser and bash disagree on.

    tree-sitter-bash takes CR, form feed and vertical tab for blanks, where bash (whose blanks
    are space and tab) keeps them in the word (`docker inspect web<CR>` passes `web\\r`); and it
    takes a backslash-newline for a blank, where bash removes it and joins what is around it
    (`docker insp\\<newline>ect` runs `docker inspect`). Both found by the differential check.
    """
    spans: list[tuple[int, int]] = []
    for node in walk(root):
        if node.type in QUOTED_NODES:
            spans.append((node.start_byte, node.end_byte))

    def quoted(pos: int) -> bool:
        return any(start <= pos < end for start, end in spans)

    def where(pos: int) -> tuple[int, int]:
        line_start = source.rfind(b"\n", 0, pos) + 1
        return source.count(b"\n", 0, pos), pos - line_start

    for m in re.finditer(rb"[\r\f\v]", source):
        if not quoted(m.start()):
            return (*where(m.start()), f"a {m.group()!r} outside quotes (bash keeps it in the word, the "
                    "parser takes it for a blank): quote it")
    for m in re.finditer(rb"(\\+)\n", source):
        slash = m.end() - 2
        if len(m.group(1)) % 2 == 0 or quoted(slash):
            continue  # an escaped backslash, then a real newline; or inside a string
        before = source[slash - 1:slash] if slash else b"\n"
        after = source[m.end():m.end() + 1] or b"\n"
        if before not in (b" ", b"\t", b"\n") and after not in (b" ", b"\t", b"\n"):
            return (*where(slash), "a backslash-newline inside a word (bash joins the two halves, the "
                    "parser reads two words)")
    return None


# ---- sh -c text: what dash reads differently ----------------------------------------------------

# Constructs of the bash subset that dash 0.5.12 (/bin/sh here) reads differently or not at all:
# refused in `sh -c` text rather than modelled twice. `$'...'` is a `$` and a quoted string to
# dash; `&>` is `&` then `>`; `[[`, `|&`, `<<<`, `${x/a/b}`, `${x:N}` are bash's; dash does no
# brace expansion and has no /dev/tcp; a backslash inside backticks is not modelled for dash.
DASH_NODES = {"ansi_c_string": "$'...'", "test_command": "[[ ]] (and every test but [ ]/test)",
              "herestring_redirect": "<<<", "command_substitution": None, "brace_expression": "{a,b}",
              "process_substitution": "<(...)"}


def dash_refusal(node: Node) -> str | None:
    """Why ``node`` of ``sh -c`` text is outside the dash subset, or None."""
    t = node.type
    if t in DASH_NODES:
        if t == "command_substitution":
            backticks = text_of(node).startswith("`")
            return "a backslash inside backticks" if backticks and "\\" in text_of(node) else None
        if t == "test_command" and node.children and node.children[0].type == "[":
            return None
        return DASH_NODES[t]
    if not node.is_named and t in ("|&", "&>", "&>>", ";&", ";;&", "function"):
        return t
    if t == "file_redirect" and redirect_operator(node) in (">&", "<&"):
        dest = node.child_by_field_name("destination")
        if dest is None or not re.fullmatch(r"[0-9]|-", text_of(dest)):
            return ">&FILE (bash's &>, an error in dash)"
    if t == "expansion" and re.fullmatch(rf"\$\{{{_PARAM}(?:/|:[0-9]).*\}}", text_of(node).strip(), re.S):
        return "${x/a/b} and ${x:N} (bash only)"
    if t == "word" and re.search(r"[{}]", text_of(node)):
        return "a brace in a word (bash expands it, dash does not)"
    if t in ("word", "string_content", "raw_string") and re.search(r"/dev/(tcp|udp)", text_of(node)):
        return "/dev/tcp (bash only)"
    return None


# ---- tree helpers ------------------------------------------------------------------------------

def walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def snippet(node: Node) -> str:
    return text_of(node)[:40]


def redirect_operator(node: Node) -> str:
    for c in node.children:
        if not c.is_named:
            return c.type
    return ""


def redirect_fd(node: Node) -> str:
    fd = node.child_by_field_name("descriptor")
    return text_of(fd) if fd is not None else ""


# ---- public API --------------------------------------------------------------------------------

def lint_source(source: str | bytes, path: str = "<payload>",
                helper_hashes: Iterable[str] = ()) -> list[Finding]:
    """Every reason ``source`` is not provably read-only; [] means accepted."""
    return lint_model(source, path, helper_hashes)[0]


def lint_model(source: str | bytes, path: str = "<payload>", helper_hashes: Iterable[str] = ()
               ) -> tuple[list[Finding], Shared]:
    """The findings and the lint's prediction of what runs (``Shared.engine_calls``...).

    The prediction is what the differential check (tests/property/test_mutants_lint_differential.py)
    holds against bash and dash: for an accepted text, every engine command line they run must
    be one the lint predicted.
    """
    # surrogatepass: any str has bytes (a lone surrogate parses as an invalid sequence would)
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    findings: list[Finding] = []
    shared = Shared()
    try:
        Linter(path, frozenset(helper_hashes), shared, findings).lint_text(data)
        for key, (row, col), label in shared.startup_uses:
            writes = shared.writes.get(key, [])
            if writes != [True]:
                findings.append(Finding(path, row + 1, col + 1, "sensitive-variable",
                                        f"{label}: the file must be written exactly once, by a "
                                        f"statement of the script itself ({len(writes)} writes; a "
                                        "write in a loop, a function or a nested shell could change "
                                        "it after the lint read it)"))
    except RecursionError:
        # The walker recurses once per nesting level; thousands of ( or $( exhaust Python's stack.
        findings.append(Finding(path, 1, 1, "unsupported-syntax", "nested deeper than the lint can follow"))
    return sorted(set(findings)), shared


def lint_file(path: Path, helper_hashes: Iterable[str] | None = None) -> list[Finding]:
    """Lint one file; the helper hashes default to the pinned helpers of pins.json."""
    if helper_hashes is None:
        from .pins import helper_hashes as pinned

        helper_hashes = pinned()
    return lint_source(path.read_bytes(), str(path), helper_hashes)
