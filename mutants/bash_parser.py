"""The one way into tree-sitter-bash, shared by the read-only lint and the CI guard (``no_docker.ci``).

tree-sitter-bash 0.25.1 reads out of bounds on some characters beyond U+FFFF and the process
dies with SIGSEGV: a crash no ``except`` can catch. Measured: ``a{`` followed by U+E0100 is a
segfault, while 20,000 generated BMP-only scripts and invalid UTF-8 bytes (which the lexer
reads as U+FFFD) parse fine. Neither caller may be crashable by the text it judges, so no
text holding such a character reaches the parser: ``parse`` refuses it with the character's
position (the lint turns that into a finding), and ``mask_unsafe`` replaces it (the guard,
whose workflows may well echo an emoji).
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from tree_sitter import Language, Node, Parser, Tree

# A 4-byte UTF-8 sequence starts with one of these; without one, the bytes hold nothing beyond
# U+FFFF and the (rare) decode below is skipped.
_FOUR_BYTE_LEAD = re.compile(rb"[\xf0-\xf4]")
_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")
# For text (not bytes): also lone surrogates, which cannot be encoded for the parser at all.
_UNSAFE_IN_TEXT = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


class UnsafeCharacter(NamedTuple):
    row: int  # 0-based, as tree-sitter counts
    column: int  # 0-based byte offset within the row, as tree-sitter counts
    char: str


class UnsafeForParser(ValueError):
    """The source holds a character that could crash tree-sitter-bash; it was not parsed."""

    def __init__(self, where: UnsafeCharacter) -> None:
        super().__init__(f"character U+{ord(where.char):04X} is beyond U+FFFF, where tree-sitter-bash "
                         "can crash; not parsed")
        self.where = where


@cache
def _parser() -> Parser:
    import tree_sitter_bash  # loads the grammar's shared library: only when something is parsed

    return Parser(Language(tree_sitter_bash.language()))


def first_unsafe(source: bytes) -> UnsafeCharacter | None:
    """Where the first character beyond U+FFFF is in ``source`` (UTF-8), or None."""
    if _FOUR_BYTE_LEAD.search(source) is None:
        return None
    # surrogateescape keeps invalid bytes one-for-one, so offsets below are those of `source`.
    text = source.decode("utf-8", "surrogateescape")
    found = _BEYOND_BMP.search(text)
    if found is None:
        return None
    before = text[: found.start()].encode("utf-8", "surrogateescape")
    row_start = before.rfind(b"\n") + 1
    return UnsafeCharacter(before.count(b"\n"), len(before) - row_start, found.group())


def parse(source: bytes) -> Tree:
    """Parse ``source``; raise ``UnsafeForParser`` rather than hand the parser a crashing character."""
    unsafe = first_unsafe(source)
    if unsafe is not None:
        raise UnsafeForParser(unsafe)
    return _parser().parse(source)


def mask_unsafe(text: str) -> str:
    """``text`` with lone surrogates and characters beyond U+FFFF replaced by U+FFFD.

    One character for one, so rows and the other characters stay where they were; the result
    always encodes to UTF-8 and ``parse`` accepts it.
    """
    return _UNSAFE_IN_TEXT.sub("\ufffd", text)


# Here-documents: only a single-quoted identifier delimiter (the body is literal, and bash and
# tree-sitter-bash agree on where it ends); `<<-`, unquoted, `$'EOF'`, `$"EOF"`, `"EOF"`... refused.
HEREDOC_DELIMITER = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


class HeredocRefused(ValueError):
    """A here-document whose end bash and tree-sitter-bash might see differently."""

    def __init__(self, message: str, node: Node) -> None:
        super().__init__(message)
        self.node = node


def heredoc_body(node: Node, source: bytes) -> str:
    """The body bash reads for this here-document, proven to be the one tree-sitter saw.

    Accepted: ``<<'NAME'`` (single-quoted identifier, so the body is literal), alone on its
    line, not inside ``$(...)``, with nothing after it on the line that could span lines. The
    body is computed here the way bash reads it (the lines after the command line, up to the
    first line that is exactly NAME) and must be byte for byte tree-sitter's; no body line
    may merely start with NAME (bash versions differ on ``NAME)`` inside ``$(...)``).
    """
    ops = [c for c in node.children if not c.is_named]
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    body = next((c for c in node.children if c.type == "heredoc_body"), None)
    end = next((c for c in node.children if c.type == "heredoc_end"), None)
    if not ops or ops[0].type != "<<" or start is None:
        raise HeredocRefused("here-document: only <<'NAME' (not <<-)", node)
    m = HEREDOC_DELIMITER.fullmatch(_text(start))
    if m is None:
        raise HeredocRefused(f"here-document delimiter {_text(start)!r}: only a "
                       "single-quoted identifier, <<'NAME' (bash and the parser may disagree "
                       "on any other, and an unquoted body is expanded)", start)
    parent = node.parent
    while parent is not None:
        if parent.type in ("command_substitution", "process_substitution"):
            raise HeredocRefused("here-document inside $(...)", node)
        parent = parent.parent
    named = [c for c in node.children if c.is_named and c.type not in ("heredoc_start", "heredoc_body",
                                                                         "heredoc_end")]
    if named:
        raise HeredocRefused("here-document with more on its redirection", named[0])
    delim = m.group(1).encode()
    src = source
    line_end = src.find(b"\n", start.end_byte)
    if line_end < 0:
        raise HeredocRefused("here-document without a body", node)
    rest = src[start.end_byte:line_end]
    if re.search(rb"[^A-Za-z0-9_./:=@%+,\t <>&|;-]", rest) or b"<<" in rest:
        raise HeredocRefused("here-document line continues with quoting or another "
                       "here-document", node)
    body_start, pos = line_end + 1, line_end + 1
    while True:
        nl = src.find(b"\n", pos)
        line = src[pos:] if nl < 0 else src[pos:nl]
        if line == delim:
            body_end = pos
            break
        if line.startswith(delim):
            raise HeredocRefused(f"here-document line {line[:40]!r} starts with its "
                           "delimiter (bash versions disagree where it ends)", node)
        if nl < 0:
            raise HeredocRefused("here-document never ends", node)
        pos = nl + 1
    seen_start = body.start_byte if body is not None else (end.start_byte if end is not None else -1)
    seen_body = src[body.start_byte:body.end_byte] if body is not None else b""
    if (seen_start != body_start or seen_body != src[body_start:body_end] or end is None
            or end.start_byte != body_end or _text(end).encode() != delim):
        raise HeredocRefused("here-document ends where the parser and bash disagree", node)
    return src[body_start:body_end].decode("utf-8", "surrogateescape")
