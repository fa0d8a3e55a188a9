"""The layout of DESIGN §2 and its dependency rules, read from the code itself.

Two views, so that neither can be fooled alone:
- the static import graph (every ``import`` statement of every module, including the lazy ones
  inside functions, resolved to a module of this distribution or a top-level package);
- what a real ``no-docker run -- true`` has in ``sys.modules`` when it is done.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = {"supervisor": "no_docker.supervisor", "canary": "no_docker.canary",
         "mutants": "no_docker.mutants", "ci": "no_docker.ci"}
ROOMS = ("isolation", "ending", "proving")


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PARTS[parts[0]].rsplit(".", 1)[0], *parts])


def modules() -> dict[str, Path]:
    found = {}
    for part in PARTS:
        for path in sorted((REPO / part).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path) -> set[str]:
    """Every module NAME's source imports (absolute names; ``from X import y`` gives X and X.y)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "__import__" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return out


GRAPH = {name: imports_of(name, path) for name, path in modules().items()}


def offending(prefix: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for name, deps in GRAPH.items():
        if name == prefix or name.startswith(prefix + "."):
            bad += [f"{name} imports {dep}" for dep in sorted(deps)
                    if any(dep == f or dep.startswith(f + ".") for f in forbidden)]
    return bad


def test_the_three_rooms_exist_each_with_a_docstring_naming_its_doc_page():
    for room, doc in (("isolation", "docs/isolation.md"), ("ending", "docs/supervision.md"),
                      ("proving", "docs/regression-cases.md")):
        init = REPO / "supervisor" / room / "__init__.py"
        text = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert doc in text, f"{init} does not name {doc}"
        assert (REPO / doc).is_file()
    top = sorted(p.name for p in (REPO / "supervisor").glob("*.py"))
    assert top == ["__init__.py", "cli.py", "errors.py", "record.py", "run.py"], top


@pytest.mark.parametrize("room", ["isolation", "ending"])
def test_isolation_and_ending_import_no_canary_mutants_ci_or_proving(room):
    forbidden = ("no_docker.canary", "no_docker.mutants", "no_docker.ci", "no_docker.supervisor.proving",
                 "aiohttp", "tree_sitter", "tree_sitter_bash")
    assert offending(f"no_docker.supervisor.{room}", forbidden) == []


def test_isolation_and_ending_do_not_import_each_other():
    # run.py is where they meet; neither room needs the other.
    assert offending("no_docker.supervisor.isolation", ("no_docker.supervisor.ending",)) == []
    assert offending("no_docker.supervisor.ending", ("no_docker.supervisor.isolation",)) == []


def test_the_canary_is_a_neutral_witness():
    assert offending("no_docker.canary", ("no_docker.supervisor", "no_docker.mutants")) == []


def test_the_static_run_path_reaches_neither_aiohttp_nor_tree_sitter():
    # Everything `run` can import, transitively, lazily or not.
    seen, todo = set(), ["no_docker.supervisor.cli", "no_docker.supervisor.run"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        deps = GRAPH.get(name, set())
        todo += [d for d in deps if d in GRAPH]
    # cli dispatches every subcommand by name (strings, not imports): only `run` and what it
    # imports are on the run path, which the walk above follows.
    reached = {d for name in seen for d in GRAPH.get(name, set())}
    bad = sorted(d for d in reached if d.split(".")[0] in ("aiohttp", "tree_sitter", "tree_sitter_bash")
                 or d.startswith(("no_docker.canary", "no_docker.mutants", "no_docker.supervisor.proving")))
    assert bad == [], bad


def test_the_walk_above_can_see_a_forbidden_import(tmp_path):
    # The checker itself: a module that imports aiohttp inside a function is caught.
    fake = tmp_path / "supervisor" / "isolation" / "leaky.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    import aiohttp\n    from ...canary import engine\n")
    deps = imports_of("no_docker.supervisor.isolation.leaky", fake)
    assert "aiohttp" in deps and "no_docker.canary.engine" in deps


@pytest.mark.needs_bwrap
def test_a_real_run_never_imports_aiohttp_or_tree_sitter(tmp_path):
    code = ("import sys\n"
            "from no_docker.supervisor import cli\n"
            "status = cli.main(['run', '--quiet', '--', 'true'])\n"
            "print(' '.join(sorted(sys.modules)))\n"
            "sys.exit(status)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    if out.returncode == 125 and "bwrap" in out.stderr:
        pytest.skip(f"no working bubblewrap here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert "no_docker.supervisor.run" in loaded  # the run really happened in this interpreter
    heavy = ("aiohttp", "tree_sitter", "tree_sitter_bash", "yaml")
    bad = sorted(m for m in loaded if m.split(".")[0] in heavy
                 or m.startswith(("no_docker.canary", "no_docker.mutants", "no_docker.ci",
                                  "no_docker.supervisor.proving")))
    assert bad == [], bad
