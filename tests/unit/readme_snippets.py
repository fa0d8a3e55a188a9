"""The snippets of the README's "Using it in a project" section, for the tests that run them.

Each fenced block there follows a ``<!-- readme-test: NAME -->`` line; a block without one is an
error, so a snippet cannot be added without a test noticing."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Using it in a project"
EXPECTED = {"install", "wheel", "config", "pytest", "action", "mutation"}


def section(text: str | None = None) -> str:
    text = README.read_text() if text is None else text
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:] if end < 0 else text[start:end]


def snippets(text: str | None = None) -> dict[str, str]:
    """{name: the block's text}; ValueError for a block without its marker."""
    body = section(text)
    found: dict[str, str] = {}
    for match in re.finditer(r"(?:<!-- readme-test: ([a-z-]+) -->\n)?```[a-z]*\n(.*?)```", body, re.S):
        name, code = match.group(1), match.group(2)
        if name is None:
            raise ValueError(f"a README snippet without a readme-test marker: {code[:60]!r}")
        found[name] = code
    return found


def lines(name: str) -> list[str]:
    """The commands of a shell snippet, one per line, comments removed."""
    out = []
    for line in snippets()[name].splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out
