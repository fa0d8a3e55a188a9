"""After a refusal, what the run left is moved aside and what it replaced put back
(supervisor/isolation/quarantine.py): the fingerprint round trip, and the undo on real files."""

from __future__ import annotations

import os
import time

from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor import run
from no_docker.supervisor.isolation import later_code, quarantine


@given(st.binary(max_size=2000), st.sampled_from([0o644, 0o600, 0o755]))
def test_a_kept_file_comes_back_byte_for_byte(tmp_path_factory, data, mode):
    root = tmp_path_factory.mktemp("q")
    path = root / "pytest.ini"
    path.write_bytes(data)
    path.chmod(mode)
    before = later_code._entry_kind(str(path))
    how = quarantine.restorable(before)
    assert how is not None and how[0] == "file" and int(how[1], 8) == mode
    path.write_bytes(b"[pytest]\naddopts = -p no:no_docker\n")
    undo = quarantine.put_back({str(path): (before, later_code._entry_kind(str(path)))}, [str(root)], "r1")
    assert undo.failed == [] and path.read_bytes() == data and (path.stat().st_mode & 0o777) == mode
    assert later_code._entry_kind(str(path)) == before
    assert (undo.quarantines[0] + "/pytest.ini").startswith(f"{root}/{quarantine.QUARANTINE}-r1-")
    with open(undo.quarantines[0] + "/pytest.ini", "rb") as f:
        assert f.read().startswith(b"[pytest]")


def test_restorable_says_what_cannot_come_back():
    assert quarantine.restorable("absent") == ("absent",)
    assert quarantine.restorable("dir") == ("dir",)
    assert quarantine.restorable("symlink:../x") == ("symlink", "../x")
    assert quarantine.restorable("special:10000 ctime=1") is None
    assert quarantine.restorable("file:x (70000 bytes) ino=1 ctime=2\0644 0 0\0xx") is None
    assert quarantine.restorable("file:x (1 bytes)\0garbage\0x") is None


def test_a_new_file_is_moved_aside_at_its_relative_path(tmp_path):
    (tmp_path / "sub").mkdir()
    new = tmp_path / "sub" / "pyproject.toml"
    new.write_text("[tool.no-docker]\nquiet = true\n")
    changed = {str(new): ("absent", later_code._entry_kind(str(new)))}
    undo = quarantine.put_back(changed, [str(tmp_path)], "r2")
    assert not new.exists() and undo.moved == [str(new)] and undo.restored == []
    where = undo.quarantines[0]
    kept = tmp_path / where / "sub" / "pyproject.toml"
    assert kept.read_text().startswith("[tool.no-docker]")
    assert (os.stat(where).st_mode & 0o777) == 0o700
    assert quarantine.describe(undo) == f"moved aside to {where} (1)"


def test_the_undo_goes_through_no_link(tmp_path):
    # The run turned sub/ into a link to a directory outside the root: nothing is moved there.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pytest.ini").write_text("outside's own\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "sub").symlink_to(outside)
    undo = quarantine.put_back({str(root / "sub" / "pytest.ini"): ("absent", "file:x")}, [str(root)], "r3")
    assert undo.failed and (outside / "pytest.ini").read_text() == "outside's own\n", undo.failed


def test_a_path_outside_every_root_is_never_touched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    undo = quarantine.put_back({str(victim): ("absent", "file:x")}, [str(tmp_path / "root")], "r4")
    assert victim.read_text() == "mine\n" and undo.failed


def test_the_line_says_what_was_undone_or_what_is_left():
    undo = quarantine.Undo()
    undo.moved, undo.quarantines = ["/w/pytest.py"], ["/w/.no-docker-quarantine-r"]
    assert run.undo_words(undo, []) == (
        "moved aside to /w/.no-docker-quarantine-r (1): none of it runs later (look at it there)")
    left = run.undo_words(undo, ["/w/big.bin: its earlier content was not kept"])
    assert "NOT undone: /w/big.bin" in left
    assert "inspect it before running git, pytest, pip or a shell" in left
    assert run.undo_words(None, []).startswith("inspect it")


def test_a_copy_of_an_existing_config_is_not_a_change(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = true\n")
    audit = later_code.LaterCodeAudit()
    audit.start([str(tmp_path)], [])
    (tmp_path / "mutants").mkdir()
    (tmp_path / "mutants" / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = true\n")
    assert audit.changes() == []
    (tmp_path / "mutants" / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = false\n")
    assert [c.split(":")[0] for c in audit.changes()] == [f"{tmp_path}/mutants/pyproject.toml"]


def test_a_copy_with_a_no_docker_table_is_a_change(tmp_path):
    text = '[tool.no-docker]\nrw = ["../data"]\n'
    (tmp_path / "pyproject.toml").write_text(text)
    audit = later_code.LaterCodeAudit()
    audit.start([str(tmp_path)], [])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text(text)
    assert audit.changes() != []


def test_what_python_imports_from_a_root_counts_whatever_its_name(tmp_path):
    # The root is sys.path[0] of `python -m` there: every importable entry is a source.
    (tmp_path / "mymod_t25.py").write_text("x = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helper_t25.py").write_text("")
    audit = later_code.LaterCodeAudit()
    audit.start([str(tmp_path)], [])
    (tmp_path / "mymod_t25.py").write_text("x = 2  # a mutant\n")
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "__init__.py").write_text("")  # pickle tries org.python.core
    (tmp_path / "pluggy").mkdir()
    (tmp_path / "pluggy" / "__init__.pyc").write_bytes(b"")  # sourceless
    (tmp_path / "e-1.0.dist-info").mkdir()
    (tmp_path / "e-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\ne = evilmod\n")
    (tmp_path / "tests" / "helper_t25.py").write_text("changed = 1\n")  # the project's, below the root
    (tmp_path / "tests" / "pytest.py").write_text("")  # a tool's name, anywhere
    (tmp_path / "tests" / "mutants_t25").mkdir()
    assert sorted(c.split(":")[0] for c in audit.changes()) == [
        f"{tmp_path}/e-1.0.dist-info/entry_points.txt", f"{tmp_path}/mymod_t25.py",
        f"{tmp_path}/org/__init__.py",
        f"{tmp_path}/pluggy/__init__.pyc", f"{tmp_path}/tests/pytest.py"]


def test_a_path_a_venv_adds_is_an_import_root_too(tmp_path):
    # An editable install's .pth names W/src: its sitecustomize.py runs at every start.
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "src").mkdir()
    (site / "__editable__.proj-0.1.pth").write_text(f"{tmp_path}/src\n")
    audit = later_code.LaterCodeAudit()
    audit.start([str(tmp_path)], [])
    (tmp_path / "src" / "sitecustomize.py").write_text("import os\n")
    assert [c.split(":")[0] for c in audit.changes()] == [f"{tmp_path}/src/sitecustomize.py"]


def test_a_planted_quarantine_name_does_not_stop_the_undo(tmp_path):
    # The run can learn its id (/proc/self/mountinfo), never the random bits after it; a
    # directory it made under a name of ours is never adopted.
    (tmp_path / f"{quarantine.QUARANTINE}-r5").mkdir(mode=0o700)
    (tmp_path / f"{quarantine.QUARANTINE}-r5" / "HEAD").write_text("ref: refs/heads/main\n")
    new = tmp_path / "pytest.py"
    new.write_text("x")
    undo = quarantine.put_back({str(new): ("absent", "file:x")}, [str(tmp_path)], "r5")
    assert undo.failed == [] and not new.exists(), undo.failed
    (where,) = undo.quarantines
    assert where.startswith(f"{tmp_path}/{quarantine.QUARANTINE}-r5-") and len(where) == len(
        f"{tmp_path}/{quarantine.QUARANTINE}-r5-") + 16
    assert (tmp_path / where / "pytest.py").read_text() == "x"


def test_what_the_run_did_not_touch_is_never_moved(tmp_path):
    # A planted git config that includes ../.venv names it as a source only after the run.
    venv = tmp_path / ".venv"
    venv.mkdir()
    started = time.time_ns()
    undo = quarantine.put_back({str(venv): ("absent", "dir")}, [str(tmp_path)], "r7", started)
    assert venv.is_dir() and undo.moved == []


def test_what_cannot_be_put_back_is_still_moved_aside(tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 70000)
    before = later_code._entry_kind(str(big))
    big.write_bytes(b"import os\n" + b"#" * 70000)
    undo = quarantine.put_back({str(big): (before, later_code._entry_kind(str(big)))}, [str(tmp_path)], "r6")
    assert not big.exists() and undo.lost and undo.failed == []
    assert "NOT put back" in run.undo_words(undo, []) and "none of it runs later" in run.undo_words(undo, [])


def test_a_file_under_a_renamed_directory_is_the_runs_and_its_old_place_comes_back(tmp_path):
    # rt4 B2b: `mv examples/demo sub` keeps the ctime of the files below the directory.
    demo = tmp_path / "examples" / "demo"
    demo.mkdir(parents=True)
    (demo / "pytest.ini").write_text("[pytest]\n")
    audit = later_code.LaterCodeAudit()
    audit.start([str(tmp_path)], [])
    demo.rename(tmp_path / "sub")
    changed = audit.changed()
    assert set(changed) == {str(demo / "pytest.ini"), str(tmp_path / "sub" / "pytest.ini")}
    undo = quarantine.put_back(changed, [str(tmp_path)], "r9", audit.started_ns, walked=audit.walked)
    assert undo.failed == [] and not (tmp_path / "sub" / "pytest.ini").exists()
    assert (demo / "pytest.ini").read_text() == "[pytest]\n" and (os.stat(demo).st_mode & 0o777) == 0o755
    # What is left to see is the quarantine's own copy (run.py leaves it out, as its own).
    assert all(p.startswith(undo.quarantines[0] + "/") for p in audit.changed())
