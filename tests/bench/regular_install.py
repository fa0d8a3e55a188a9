"""A regular (non-editable) install of this tree, the way users get it, for the start-up figures.

The repo's own ``.venv`` holds an *editable* install: every interpreter start there runs
setuptools' ``__editable__`` finder and coverage's ``.pth`` hook, which a user's install does
not. The bench times instead a venv of its own: a wheel built from a copy of the tree
(``pip wheel --no-deps``), installed with ``pip --python VENV install --no-deps --no-index``
(pip writes the console script and byte-compiles every module, as for a user), and one
``.pth`` line that appends the repo venv's site-packages to ``sys.path`` for the third-party
dependencies (a path line in a ``.pth`` adds a directory; it does not run the ``.pth`` files
found there, so the editable finder and coverage's hook stay out).

Building costs ~3 s, so the venv is cached under ``$TMPDIR/no-docker-bench-<uid>/`` keyed by a
hash of what goes into the wheel (pyproject.toml, README.md, LICENSE and the package folders),
of the interpreter and of the dependencies' path; the most recently used few are kept.
:func:`inspect` reports what an interpreter start of the venv loads, and :func:`problems` says
what would make it differ from a clean install.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

PACKAGE_PARTS = ("supervisor", "canary", "mutants", "ci")
TOP_FILES = ("pyproject.toml", "README.md", "LICENSE")
DEPS_PTH = "_no_docker_bench_deps.pth"
KEEP = 8  # cached venvs kept, the most recently used (~3 MB each; one per worktree and tree)

# Run by the venv's own interpreter, with site, as a console script starts: what did start-up
# load before no-docker was imported, and where does no-docker come from?
_INSPECT = """
import json, os, sys, sysconfig
at_start = sorted(sys.modules)
finders = [type(f).__module__ + "." + type(f).__qualname__ for f in sys.meta_path]
hooks = [type(h).__qualname__ if not isinstance(h, type) else h.__qualname__ for h in sys.path_hooks]
purelib = sysconfig.get_path("purelib")
import no_docker.supervisor.cli as cli
print(json.dumps({"modules_at_start": at_start, "meta_path": finders, "path_hooks": hooks,
                  "sys_path": sys.path, "no_site": sys.flags.no_site, "purelib": purelib,
                  "pth_files": sorted(n for n in os.listdir(purelib) if n.endswith(".pth")),
                  "no_docker_cli": os.path.realpath(cli.__file__)}))
"""


def source_files(repo: Path) -> list[str]:
    """Relative paths of what goes into the wheel, sorted (byte-code and caches left out)."""
    out = [name for name in TOP_FILES if (repo / name).is_file()]
    for part in PACKAGE_PARTS:
        for top, dirs, files in os.walk(repo / part):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
            out += [os.path.relpath(os.path.join(top, f), repo) for f in files
                    if not f.endswith((".pyc", ".pyo"))]
    return sorted(out)


def content_key(repo: Path, files: list[str], interpreter: str) -> str:
    """sha256 of every file's path, executable bit and bytes, and of the interpreter named."""
    digest = hashlib.sha256(interpreter.encode() + b"\0")
    for rel in files:
        path = repo / rel
        data = path.read_bytes()
        executable = b"x" if os.stat(path).st_mode & 0o111 else b"-"
        digest.update(rel.encode() + b"\0" + executable + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


def base_python() -> str:
    """The interpreter the repo venv was made from (not a pyenv shim, not the venv's own)."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def default_cache_root() -> Path:
    return Path(tempfile.gettempdir()) / f"no-docker-bench-{os.getuid()}"


def _private_dir(path: Path) -> None:
    """Create PATH (0700) or accept it only if it is a real directory of ours that no one else
    may write: a shared temp dir must not let another user plant the interpreter we time."""
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise RuntimeError(f"cache dir {path} is not a private directory of uid {os.getuid()} (a symlink, "
                           "someone else's, or group/world-writable): remove it or pass --cache-dir")


def _run(argv: list[str], what: str, **kwargs: object) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout)[-600:]}")


def _build(repo: Path, files: list[str], venv: Path, builder: str, base: str, deps_sites: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="no-docker-wheel-") as tmp:
        src = Path(tmp) / "src"
        for rel in files:  # a copy: pip builds in place and would leave build/ in the worktree
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, src / rel)
        _run([builder, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(Path(tmp) / "dist"), str(src)],
             "pip wheel")
        wheel = next((Path(tmp) / "dist").glob("no_docker-*.whl"))
        _run([base, "-m", "venv", "--without-pip", str(venv)], "python -m venv")
        _run([builder, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
              "--no-index", "-q", str(wheel)], "pip install of the wheel")
        purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                                  "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        Path(purelib, DEPS_PTH).write_text("".join(f"{d}\n" for d in deps_sites))
        return wheel.name


def _prune(root: Path, keep: int) -> list[str]:
    entries = []
    for child in root.iterdir():
        if child.name.startswith("venv-") and child.is_dir() and not child.is_symlink():
            done = child / ".complete"
            entries.append((done.stat().st_mtime if done.exists() else 0.0, child))
    removed = []
    for _, child in sorted(entries, reverse=True)[keep:]:
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child.name)
    return removed


def ensure(repo: Path, cache_root: Path | None = None, *, builder: str | None = None) -> dict:
    """The cached regular-install venv of REPO's current content, built if missing. Returns where it
    is (``script``, ``python``, ``venv``), its ``key``, ``cached`` and ``build_seconds``."""
    builder = builder or sys.executable
    base = base_python()
    root = cache_root or default_cache_root()
    _private_dir(root)
    files = source_files(repo)
    deps_sites = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    # the dependencies' path is in the key: worktrees with the same tree each get their own venv
    key = content_key(repo, files, f"{base} {sys.version} {' '.join(deps_sites)}")
    venv = root / f"venv-{key[:20]}"
    info = {"venv": str(venv), "script": str(venv / "bin" / "no-docker"),
            "python": str(venv / "bin" / "python"), "key": key, "files_hashed": len(files),
            "base_python": base, "deps_from": deps_sites}
    with open(root / ".lock", "w") as lock:  # two benches at once build the same venv once
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = venv / ".complete"
        if marker.is_file():
            os.utime(marker)
            info.update(json.loads(marker.read_text()), cached=True)
            return info
        shutil.rmtree(venv, ignore_errors=True)  # a build that died half-way
        started = time.monotonic()
        wheel = _build(repo, files, venv, builder, base, deps_sites)
        built = {"wheel": wheel, "build_seconds": round(time.monotonic() - started, 1)}
        marker.write_text(json.dumps(built))
        info.update(built, cached=False, pruned=_prune(root, KEEP))
    return info


def inspect(python: str, cwd: Path) -> dict:
    """What an interpreter start of PYTHON (site included) loads, from a neutral CWD."""
    done = subprocess.run([python, "-c", _INSPECT], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr[-400:]}"}
    return json.loads(done.stdout)


def problems(report: dict, venv: str) -> list[str]:
    """Why REPORT (from :func:`inspect`) is not the start-up of a clean install in VENV; [] if it is."""
    if "error" in report:
        return [f"could not inspect the venv: {report['error']}"]
    found = []
    if report.get("no_site"):
        found.append("site is off (-S): not how a console script starts")
    editable = [m for m in report.get("modules_at_start", []) + report.get("meta_path", [])
                if "editable" in m.lower()]
    if editable:
        found.append(f"an editable finder is loaded at start: {', '.join(sorted(set(editable)))}")
    hooks = [m for m in report.get("modules_at_start", []) if m == "coverage" or m.startswith("coverage.")]
    if hooks:
        found.append(f"coverage is loaded at start: {', '.join(hooks)}")
    extra_pth = [p for p in report.get("pth_files", []) if p != DEPS_PTH]
    if extra_pth:
        found.append(f".pth files other than the dependencies' path: {', '.join(extra_pth)}")
    cli = report.get("no_docker_cli") or ""
    if not cli.startswith(venv.rstrip("/") + "/"):
        found.append(f"no_docker is imported from {cli or 'nowhere'}, not from the venv {venv}")
    return found
