"""Smoke test of the benchmark entry point ``python -m tests.bench`` (issue 8).

It runs every part in ``--quick`` mode and checks that one valid JSON document comes out, with
every part present and the targets evaluated. No timing is asserted: a slow machine must not
fail the suite. Also checks that a saved document renders again (``--from``) with its plot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nonroot import pids_limit_unavailable

REPO = Path(__file__).resolve().parents[2]
PARTS = ("startup", "ending", "bomb", "proof", "canary", "scaling")


@pytest.fixture(scope="module")
def quick_doc(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    tmp = tmp_path_factory.mktemp("bench")
    out, state = tmp / "quick.json", tmp / "state"
    state.mkdir(mode=0o700)  # module scope: conftest's per-test private state dir is not set yet
    done = subprocess.run([sys.executable, "-m", "tests.bench", "--quick", "--no-install", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "NO_DOCKER_STATE_DIR": str(state)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), out, done.stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_quick_run_emits_one_json_document_with_every_part(quick_doc):
    doc, out, stderr = quick_doc
    assert doc["quick"] is True
    assert json.loads(out.read_text()) == doc  # --out holds the same document
    for part in PARTS:
        assert part in doc, f"part {part} missing; stderr: {stderr[-1000:]}"
    assert all("error" not in doc[part] for part in ("startup", "ending", "bomb", "scaling")), (
        {part: doc[part].get("error") for part in PARTS if isinstance(doc[part], dict)})
    unbounded = pids_limit_unavailable()
    if unbounded is None:
        assert doc["ending"]["sweep"]["rows"], "the sweep (what the plot draws) is empty"
    else:  # an ordinary user: the parts that need a pids cgroup say so, none fails
        # (each part's probe is its own process's: the reasons differ only in the probe's name)
        said = [doc["ending"]["skipped"], doc["bomb"]["skipped"],
                *(part["skipped"] for part in doc["proof"].values())]
        assert all(s.startswith("this user cannot make a cgroup with --max-pids") for s in said), said
    assert {"1", "5"} <= set(doc["canary"])
    names = {row["target"] for row in doc["targets"]}
    assert any("no-docker run -- true" in name for name in names)
    assert any(name.startswith("proof pass per process") for name in names)
    assert all(row["met"] in (True, False, None) for row in doc["targets"])
    assert "Targets (DESIGN §10, issue 8)" in stderr  # the readable table
    if unbounded is not None:
        pytest.skip(f"the ending, bomb and proof parts need a pids cgroup: {unbounded}")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_saved_document_renders_table_markdown_and_plot(quick_doc, tmp_path):
    pytest.importorskip("matplotlib")
    _, out, _ = quick_doc
    png, md = tmp_path / "plot.png", tmp_path / "table.md"
    done = subprocess.run([sys.executable, "-m", "tests.bench", "--from", str(out), "--plot", str(png),
                           "--markdown", str(md)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    if pids_limit_unavailable() is not None:  # no sweep to draw: said, and the table still made
        assert "no sweep in the document: no plot" in done.stderr + done.stdout, done.stderr[-2000:]
        assert "| measure | value | target | met |" in md.read_text()
        pytest.skip("the plot draws the ending sweep, which needs a pids cgroup")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| measure | value | target | met |" in md.read_text()
    assert json.loads(done.stdout)["quick"] is True


def test_unknown_part_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "tests.bench", "--only", "startup,nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--only: unknown part(s) nope" in done.stderr
