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

from tree_sitter import Language, Parser, Tree

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
