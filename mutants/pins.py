"""sha256 pins of everything that runs outside the isolation: payloads, helpers, the canary entry.

`mutants/pins.json` maps a name (the file's path from the repository root, e.g.
``mutants/payloads/reach-engine.sh``) to its sha256. The T-series calls `verify_copy` on each
copy right before it uses it; `no-docker mutants verify` checks every pinned file in place.
A pin changes only through `no-docker mutants review FILE --accept` (docs/mutants.md).

Names resolve against the parent of this package's directory, which is the repository root in
a source tree and ``site-packages/no_docker`` in an installed one: the top-level folders are
installed under the same names (pyproject's package-dir), so both layouts hold
``mutants/...`` and ``canary/...`` side by side.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from no_docker.supervisor.errors import NoDockerError

ROOT = Path(__file__).resolve().parent.parent
PINS_FILE = Path(__file__).resolve().parent / "pins.json"
FORMAT_VERSION = 1


class PinError(NoDockerError):
    """A file is not what its pin says (or has no pin): it must not run."""

    exit_status = 1


@dataclass(frozen=True)
class PinCheck:
    name: str
    ok: bool
    detail: str


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    return sha256_bytes(Path(path).read_bytes())


def kind_of(name: str) -> str:
    if name.startswith("mutants/payloads/"):
        return "payload"
    if name.startswith("mutants/helpers/"):
        return "helper"
    return "entry"


def load_pins(pins_file: Path | None = None) -> dict[str, str]:
    """name -> sha256 from pins.json; a missing file is no pins, a malformed one an error."""
    path = pins_file or PINS_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise PinError(f"{path}: unreadable pins file: {err}") from err
    well_formed = isinstance(doc, dict) and doc.get("version") == FORMAT_VERSION
    if not well_formed or not isinstance(doc.get("pins"), dict):
        raise PinError(f"{path}: not a version-{FORMAT_VERSION} pins file")
    pins: dict[str, str] = {}
    for name, entry in doc["pins"].items():
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or len(digest) != 64:
            raise PinError(f"{path}: pin {name!r} has no sha256")
        pins[name] = digest
    return pins


def write_pin(name: str, digest: str, pins_file: Path | None = None) -> None:
    """Set one pin, atomically (a reader never sees a half-written pins.json)."""
    path = pins_file or PINS_FILE
    pins = load_pins(path)
    pins[name] = digest
    doc = {"version": FORMAT_VERSION,
           "pins": {n: {"sha256": d, "kind": kind_of(n)} for n, d in sorted(pins.items())}}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pins.", suffix=".json")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(doc, out, indent=2)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def pinned_path(name: str) -> Path:
    return ROOT / name


def name_of(path: Path) -> str:
    """The pin name of a file inside the tree (its path from ROOT)."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError as err:
        raise PinError(f"{path}: outside {ROOT}; pins name files of this tree") from err


def read_verified(path: Path, name: str, pins_file: Path | None = None) -> bytes:
    """The bytes of ``path`` if they match the pin of ``name``; raises PinError otherwise.

    Prefer running what this returns (write it to a private copy, pipe it to bash) over
    running ``path`` again: a file checked and then re-read can change in between.
    """
    pins = load_pins(pins_file)
    if name not in pins:
        raise PinError(f"{name}: no pin (review it: no-docker mutants review FILE --accept)")
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise PinError(f"{path}: cannot read: {err.strerror or err}") from err
    digest = sha256_bytes(data)
    if digest != pins[name]:
        raise PinError(f"{path}: sha256 {digest[:16]}... does not match the pin of {name} "
                       f"({pins[name][:16]}...): refusing to run it")
    return data


def verify_copy(path: Path, name: str, pins_file: Path | None = None) -> None:
    """Raise PinError unless the file at ``path`` is byte for byte the pinned ``name``."""
    read_verified(path, name, pins_file)


def verified_copy(name: str, dest_dir: Path, root: Path | None = None, pins_file: Path | None = None) -> Path:
    """A private, read-only copy of the pinned file ``name`` in ``dest_dir``, made from bytes
    that were checked against the pin: the way to run a helper outside the isolation.

    The copy is written from the verified bytes, never re-read from the source, so a change to
    the source after the check cannot reach what runs.
    """
    data = read_verified((root or ROOT) / name, name, pins_file)
    dest = Path(dest_dir) / Path(name).name
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(dest, 0o500 if data.startswith(b"#!") else 0o400)
    return dest


def verify_all(pins_file: Path | None = None, root: Path | None = None) -> list[PinCheck]:
    """Check every pinned file in place; one PinCheck per pin."""
    base = root or ROOT
    out = []
    for name, digest in sorted(load_pins(pins_file).items()):
        path = base / name
        try:
            found = sha256_file(path)
        except OSError as err:
            out.append(PinCheck(name, False, f"cannot read {path}: {err.strerror or err}"))
            continue
        ok = found == digest
        out.append(PinCheck(name, ok, "ok" if ok else f"sha256 {found} != pinned {digest}"))
    return out


def helper_hashes(pins_file: Path | None = None) -> frozenset[str]:
    """The sha256 of every pinned helper: the only programs the lint lets python run."""
    return frozenset(d for n, d in load_pins(pins_file).items() if kind_of(n) == "helper")
