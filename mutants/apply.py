"""Write a mutant: a copy of a target script with a pinned, lint-clean payload inserted.

Only a payload whose bytes match its pin and that the lint accepts is ever inserted; the bytes
inserted are the verified bytes, not a second read of the file. Targets:

* bash scripts: the payload runs inline in a subshell with ``set +e +u +o pipefail``, so the
  target's strict mode neither stops the payload early nor is changed by it, and its variables
  and functions do not leak into the target;
* POSIX sh scripts: the payload is fed to ``bash`` as a quoted here-document (it is bash code);
* Python files: a call that runs the payload with bash through subprocess.

MARKER (``--at``) is a substring of the line after which the payload goes; by default it goes
after the shebang (shell) or after the module's top-level imports (Python).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from no_docker.supervisor.errors import NoDockerError, UsageError

from .lint import lint_source
from .pins import helper_hashes, name_of, read_verified, sha256_bytes

BEGIN = "# >>> no-docker mutant: {name} sha256 {digest}"
END = "# <<< no-docker mutant"
HEREDOC_END = "NO_DOCKER_MUTANT_PAYLOAD"


class ApplyError(NoDockerError):
    """The payload may not be inserted (unpinned, tampered, not lint-clean)."""

    exit_status = 1


@dataclass(frozen=True)
class Mutant:
    text: str
    line: int  # 1-based line of the target after which the payload was inserted (0: top)
    language: str


def target_language(path: Path, text: str) -> str:
    first = text.split("\n", 1)[0]
    if path.suffix == ".py" or (first.startswith("#!") and "python" in first):
        return "python"
    if first.startswith("#!") and re.search(r"\b(bash)\b", first):
        return "bash"
    if path.suffix == ".bash":
        return "bash"
    posix_shebang = first.startswith("#!") and re.search(r"/(sh|dash|ash)\b|env (sh|dash)\b", first)
    if posix_shebang or path.suffix == ".sh":
        return "sh" if not (path.suffix == ".sh" and "bash" in first) else "bash"
    raise UsageError(f"{path}: cannot tell a bash, sh or Python target (no shebang, no .sh/.py suffix)")


def insertion_line(lines: list[str], language: str, marker: str | None, path: Path) -> int:
    """Index of the line after which the payload goes (0 = before the first line)."""
    if marker is not None:
        hits = [i for i, line in enumerate(lines) if marker in line]
        if not hits:
            raise UsageError(f"--at {marker!r}: not found in {path}")
        if len(hits) > 1:
            lines_hit = [h + 1 for h in hits]
            raise UsageError(f"--at {marker!r}: found on lines {lines_hit} of {path}; make it unique")
        return hits[0] + 1
    if language == "python":
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError as err:
            raise UsageError(f"{path}: not valid Python: {err.msg} (line {err.lineno})") from err
        last = 0
        for node in tree.body:
            is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
                node.value.value, str)
            if isinstance(node, ast.Import | ast.ImportFrom) or (is_doc and last == 0):
                last = node.end_lineno or node.lineno
            else:
                break
        return last
    return 1 if lines and lines[0].startswith("#!") else 0


def shell_block(payload: str, name: str, digest: str, language: str, indent: str) -> str:
    body = payload.split("\n", 1)[1] if payload.startswith("#!") else payload
    if not body.endswith("\n"):
        body += "\n"
    head = BEGIN.format(name=name, digest=digest)
    if language == "bash":
        # Not indented: the payload's here-documents need their delimiters at column 0.
        return f"{indent}{head}\n( set +e +u +o pipefail\n{body}) || true\n{indent}{END}\n"
    if HEREDOC_END in body:
        raise ApplyError(f"{name}: the payload contains {HEREDOC_END}; cannot quote it for sh")
    return f"{indent}{head}\nbash <<'{HEREDOC_END}' || true\n{body}{HEREDOC_END}\n{indent}{END}\n"


def python_block(payload: str, name: str, digest: str, indent: str) -> str:
    lines = [
        BEGIN.format(name=name, digest=digest),
        "import subprocess as _no_docker_subprocess",
        f"_no_docker_subprocess.run(['bash', '-c', {payload!r}], check=False)",
        END,
    ]
    return "".join(f"{indent}{line}\n" for line in lines)


def make_mutant(payload: str, payload_name: str, target_text: str, target: Path,
                marker: str | None = None) -> Mutant:
    """The mutant text (pure: no pin or lint checks here, see `apply`)."""
    language = target_language(target, target_text)
    lines = target_text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    at = insertion_line(lines, language, marker, target)
    anchor = lines[at - 1] if at > 0 else ""
    indent = re.match(r"[ \t]*", anchor).group() if marker is not None and anchor else ""  # type: ignore[union-attr]
    if language == "python" and marker is not None and anchor.rstrip().endswith(":"):
        indent += "    "
    digest = sha256_bytes(payload.encode())
    block = (python_block(payload, payload_name, digest, indent) if language == "python"
             else shell_block(payload, payload_name, digest, language, indent))
    return Mutant("".join(lines[:at]) + block + "".join(lines[at:]), at, language)


def apply(payload: Path, target: Path, out: Path, marker: str | None = None, *, name: str | None = None,
          pins_file: Path | None = None) -> Mutant:
    """Check the payload (pin, lint), then write the mutant of ``target`` to ``out``.

    ``name`` is the payload's pin name; by default its path in the tree (a copy elsewhere
    names the pin it claims to match).
    """
    name = name or name_of(payload)
    data = read_verified(payload, name, pins_file)  # raises PinError: unpinned or tampered
    findings = lint_source(data, str(payload), helper_hashes(pins_file))
    if findings:
        raise ApplyError(f"{payload}: not lint-clean, refusing to insert it: {findings[0]}"
                         + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""))
    try:
        target_text = target.read_bytes().decode()
    except OSError as err:
        raise UsageError(f"{target}: cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"{target}: not a UTF-8 text file (byte {err.start})") from None
    if out.resolve() == target.resolve():
        raise UsageError(f"--out {out} is the target itself; write the mutant elsewhere")
    try:
        payload_text = data.decode()
    except UnicodeDecodeError as err:
        raise ApplyError(f"{payload}: not UTF-8 (byte {err.start}); cannot insert it") from None
    mutant = make_mutant(payload_text, name, target_text, target, marker)
    try:
        out.write_text(mutant.text)
        os.chmod(out, target.stat().st_mode & 0o777)
    except OSError as err:
        raise UsageError(f"--out {out}: cannot write: {err.strerror or err}") from err
    return mutant
