"""What a refused run could not undo stops the next run there until the user has looked.

(In the ending room: it lives in the state dir beside the run markers, and ``runs`` and
``end`` read it; run.py writes it from the isolation room's undo.)

A run refused for code it left to run later (P4) whose undo failed (``NOT undone``: a path it
could not move aside, a place it could not restore) leaves that code in place. A 125 alone is
walked past: a mutation tool scores it as killed and starts the next run, and the next
``python -m pytest`` runs what was left (red-team round 4, B2/B2b). So the supervisor writes a
record, ``STATE/left-RUN_ID.json``, in the state dir (which no run can write:
``markers.refuse_writable_state``), and every later run whose writable roots overlap the
recorded ones (the same work dir, a subdirectory of it, a parent) refuses before its command
starts, naming the paths and what to do. ``no-docker runs`` lists the record; ``no-docker end
RUN_ID`` says what is left and removes it. A record that cannot be read stops every run (fail
closed).
"""

from __future__ import annotations

import os

from ..errors import NotProven
from .markers import from_json_text, to_json_text  # not `import json`: every run reads the records

PREFIX = "left-"


def record_path(state: str, run_id: str) -> str:
    return os.path.join(state, f"{PREFIX}{run_id}.json")


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaps(a: list[str], b: list[str]) -> bool:
    """Does any root of A hold or lie in one of B (pure)? (Resolved paths, as the audit's.)"""
    return any(_is_under(x, y) or _is_under(y, x) for x in a for y in b)


def write(state: str, run_id: str, roots: list[str], paths: list[str], quarantines: list[str]) -> None:
    """Write the record (new file, then renamed in place: never half a record). OSError is the
    caller's to report."""
    doc = {"run_id": run_id, "roots": list(roots), "not_undone": list(paths),
           "quarantine": list(quarantines)}
    final = record_path(state, run_id)
    tmp = final + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        data = to_json_text(doc).encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, final)


def read_all(state: str) -> list[dict]:
    """Every record in STATE; one that cannot be read is returned as {"run_id", "error"}."""
    try:
        names = sorted(n for n in os.listdir(state) if n.startswith(PREFIX) and n.endswith(".json"))
    except FileNotFoundError:
        return []
    except OSError as err:
        return [{"run_id": "?", "error": f"{state}: {err.strerror}"}]
    out = []
    for name in names:
        run_id = name[len(PREFIX):-len(".json")]
        try:
            fd = os.open(os.path.join(state, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                doc = from_json_text(os.read(fd, 1 << 20))
            finally:
                os.close(fd)
            if not (isinstance(doc, dict) and all(isinstance(doc.get(k), list)
                                                  for k in ("roots", "not_undone", "quarantine"))):
                raise ValueError("not a record")
            doc["run_id"] = run_id
            out.append(doc)
        except (OSError, ValueError) as err:
            out.append({"run_id": run_id, "error": f"{name}: {getattr(err, 'strerror', None) or err}"})
    return out


def refusal(doc: dict, state: str) -> NotProven:
    """The line that stops a run (pure but for the path)."""
    rid = doc["run_id"]
    if "error" in doc:
        return NotProven("P4", f"an earlier run's record of code it could not undo cannot be read "
                         f"({doc['error']})", f"inspect it, then remove {record_path(state, rid)}")
    paths = doc["not_undone"]
    more = f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""
    aside = f"; what was moved aside is in {', '.join(doc['quarantine'])}" if doc["quarantine"] else ""
    return NotProven("P4", f"run {rid} left code that runs later and could NOT undo it: "
                     f"{paths[0] if paths else '?'}{more}{aside}",
                     f"inspect and restore it yourself, e.g. with git status and git checkout, then "
                     f"run: no-docker end {rid}")


def refuse_if_left(state: str, roots: list[str]) -> None:
    """Before a run: refuse while a record names a root that overlaps ROOTS."""
    for doc in read_all(state):
        if "error" in doc or overlaps([r for r in doc["roots"] if isinstance(r, str)], roots):
            raise refusal(doc, state)


def words(doc: dict) -> str:
    """What is left, for ``runs`` and ``end`` (pure)."""
    if "error" in doc:
        return f"its record cannot be read ({doc['error']})"
    paths = doc["not_undone"]
    aside = f"; moved aside: {', '.join(doc['quarantine'])}" if doc["quarantine"] else ""
    return (f"left code it could NOT undo in {', '.join(doc['roots'])}: {'; '.join(paths[:5])}"
            f"{f' (+{len(paths) - 5} more)' if len(paths) > 5 else ''}{aside}")


def clear(state: str, run_id: str) -> bool:
    try:
        os.unlink(record_path(state, run_id))
    except FileNotFoundError:
        return False
    return True
