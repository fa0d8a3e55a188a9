"""T-80: pip's and uv's configuration read as pip and uv read it (rt5 #3-#7).

no-docker refuses to make writable what the next ``pip install`` / ``uv`` outside installs
from (caches, find-links directories, local indexes): it finds them in the tools' config files
and variables. Its reading disagreed with pip's: ``--find-links =`` keys (pip drops ``--``),
CR line ends, a ``cache-dir`` with a space, ``file:/P`` and ``file://localhost/P`` URLs, a
symlinked ``pip.conf`` or parent directory, values after 64 KiB, the ``constraint`` /
``requirement`` files pip reads (and what their lines name), a ``PIP_CONFIG_FILE`` inside the
work dir, and uv's ``[[index]]``, ``UV_INDEX``, ``UV_DEFAULT_INDEX``. Each case: the spelling
pip takes, and ``--rw`` of what it names refused; the plain spelling is the control (refused
before too). What cannot be read as the tool reads it (a FIFO, a huge file) is "cannot tell":
refused. ``tests/unit/test_tool_sources.py`` compares the reading with pip's own parser on
generated files. Weakened build: ``weakened/t80-pip-conf-read-as-before.patch`` (main's
reading).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import no_docker_argv
from no_docker.supervisor.isolation import tool_sources as ts


def refusal(path: Path, home: Path, **environ: str) -> str | None:
    return ts.cache_refusal(os.path.realpath(path), str(home), environ)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.mark.parametrize("line", [
    "--find-links = {P}", "--cache-dir = {P}", "Find_Links={P}", "find-links = file:{P}",
    "find-links = file://localhost{P}", "find-links = FILE://{P}", "index-url = file:{P}",
    "find-links = /elsewhere {P}", "--extra-index-url: file:///elsewhere file://{P}",
    "cache-dir = {P} x", "pypi-url = {P}",
])
def test_pip_conf_spellings_pip_takes_are_read(tmp_path, home, line):
    """rt5 #3: each spelling, in a file PIP_CONFIG_FILE names: --rw of the directory refused."""
    target = tmp_path / ("c x" if line.endswith(" x") else "fl")
    target.mkdir()
    p = str(tmp_path / ("c" if line.endswith(" x") else "fl"))
    conf = tmp_path / "pc.conf"
    conf.write_text("[global]\n" + line.format(P=p) + "\n")
    why = refusal(target, home, PIP_CONFIG_FILE=str(conf))
    assert why and "pip's" in why, line
    other = tmp_path / "other"
    other.mkdir()
    assert refusal(other, home, PIP_CONFIG_FILE=str(conf)) is None  # nothing else is refused


def test_pip_conf_with_cr_line_ends_is_read(tmp_path, home):
    """rt5 #3: pip opens pip.conf in text mode, so a lone CR ends a line; control: LF."""
    (tmp_path / "c").mkdir()
    for end in ("\n", "\r", "\r\n"):
        conf = tmp_path / f"pc{len(end)}{ord(end[0])}.conf"
        conf.write_text(f"[global]{end}cache-dir = {tmp_path}/c{end}", newline="")
        assert refusal(tmp_path / "c", home, PIP_CONFIG_FILE=str(conf)), repr(end)


def test_pip_conf_through_links_and_after_64k_is_read(tmp_path, home):
    """rt5 #4: a symlinked pip.conf (stow-style), a linked parent directory, find-links after
    64 KiB of comments; control: the same text in a plain file."""
    (tmp_path / "fl").mkdir()
    real = tmp_path / "real"
    real.mkdir()
    (real / "pip.conf").write_text(f"[global]\nfind-links = {tmp_path}/fl\n")
    (tmp_path / "pc.conf").symlink_to(real / "pip.conf")
    (tmp_path / "linked").symlink_to(real)
    padded = tmp_path / "padded.conf"
    padded.write_text("[global]\n" + "#\n" * 40000 + f"find-links = {tmp_path}/fl\n")
    for conf in (real / "pip.conf", tmp_path / "pc.conf", tmp_path / "linked" / "pip.conf", padded):
        assert refusal(tmp_path / "fl", home, PIP_CONFIG_FILE=str(conf)), conf
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "pip").symlink_to(real)  # ~/.config/pip -> dotfiles/pip
    assert refusal(tmp_path / "fl", home, XDG_CONFIG_HOME=str(xdg))


def _run(work: Path, home: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), **environ}
    return subprocess.run(no_docker_argv("run", *args, "--", "true"), cwd=work, env=env, capture_output=True,
                          text=True, timeout=60)


def _refused(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "refused" in done.stderr and what in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line


def test_a_constraints_file_pip_reads_is_not_writable(tmp_path, home):
    """rt5 #5: `constraint =` in pip.conf, PIP_CONSTRAINT, PIP_REQUIREMENT naming a file in the
    work dir: its lines can add --find-links, so the run may not write it; and what its lines
    name is refused too. Control: find-links inside the work dir (refused before)."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "constraints.txt").write_text("")
    conf = tmp_path / "pc.conf"
    conf.write_text(f"[global]\nconstraint = {work}/constraints.txt\n")
    _refused(_run(work, home, PIP_CONFIG_FILE=str(conf)), "constraints file")
    _refused(_run(work, home, PIP_CONSTRAINT=f"{work}/constraints.txt"), "constraints file")
    _refused(_run(work, home, PIP_REQUIREMENT="constraints.txt"), "requirements file")  # relative: cwd
    (tmp_path / "c2").mkdir()
    nested = tmp_path / "outside.txt"
    nested.write_text("-r more.txt\n")
    (tmp_path / "more.txt").write_text(f"pkg\n--find-links={tmp_path}/c2  # c\n-e ./proj\n")
    (tmp_path / "proj").mkdir()
    for named in ("c2", "proj", "more.txt"):
        assert refusal(tmp_path / named, home, PIP_CONSTRAINT=str(nested)), named
    control = tmp_path / "control.conf"
    control.write_text(f"[global]\nfind-links = {work}/wh\n")
    _refused(_run(work, home, PIP_CONFIG_FILE=str(control)), f"it holds {work}/wh")


def test_a_pip_config_file_in_the_work_dir_is_not_writable(tmp_path, home):
    """rt5 #6: PIP_CONFIG_FILE naming W/pip.conf (there or not yet): the run could write
    find-links into it. Control: as #5."""
    work = tmp_path / "w"
    work.mkdir()
    _refused(_run(work, home, PIP_CONFIG_FILE=f"{work}/pip.conf"), "config file")
    (work / "pip.conf").write_text("[global]\n")
    _refused(_run(work, home, PIP_CONFIG_FILE="pip.conf"), "config file")
    _refused(_run(work, home, UV_CONFIG_FILE=f"{work}/uv.toml"), "uv's config file")


def test_uvs_indexes_and_find_links_are_read(tmp_path, home):
    """rt5 #7: [[index]] url, UV_INDEX (name=url too), UV_DEFAULT_INDEX, UV_FIND_LINKS (commas),
    [pip] find-links. Control: index-url in uv.toml (refused before)."""
    p = tmp_path / "idx"
    p.mkdir()
    for n, text in enumerate((f'index-url = "file://{p}"\n', f'[[index]]\nname = "l"\nurl = "file://{p}"\n',
                              f'[pip]\nfind-links = ["{p}"]\n')):
        xdg = tmp_path / f"xdg{n}"  # one per case: the reading is kept per process and environment
        (xdg / "uv").mkdir(parents=True)
        (xdg / "uv" / "uv.toml").write_text(text)
        why = refusal(p, home, XDG_CONFIG_HOME=str(xdg))
        assert why and "uv's" in why, text
    for variable, value in (("UV_INDEX", f"pypi=https://pypi.org/simple l=file://{p}"),
                            ("UV_DEFAULT_INDEX", f"file:{p}"), ("UV_FIND_LINKS", f"/elsewhere,{p}")):
        assert refusal(p, home, **{variable: value}), variable


def test_what_cannot_be_read_as_pip_reads_it_is_refused(tmp_path, home):
    """Fail closed: a pip config that is a FIFO, or over the read limit: cannot tell, so every
    writable root is refused (the FIFO is never opened for a blocking read). Control: absent."""
    fifo = tmp_path / "fifo.conf"
    os.mkfifo(fifo)
    (tmp_path / "any").mkdir()
    why = refusal(tmp_path / "any", home, PIP_CONFIG_FILE=str(fifo))
    assert why and "cannot tell" in why
    big = tmp_path / "big.conf"
    with big.open("w") as out:
        out.write("[global]\n")
        out.truncate(ts.CONFIG_LIMIT + 2)
    assert "cannot tell" in (refusal(tmp_path / "any", home, PIP_CONFIG_FILE=str(big)) or "")
    assert refusal(tmp_path / "any", home, PIP_CONFIG_FILE=str(tmp_path / "absent.conf")) is None


def test_a_directory_named_like_pips_index_url_is_a_source(tmp_path):
    """Found while fixing rt5 #3 (pip's build_source tries the location as a path first): a run
    that makes W/https:/pypi.org/simple/PKG/index.html has the next `pip install PKG` in W take
    its wheel (measured: the planted .pth ran). Such an entry, at any depth, is a later-code
    source now: a new one is a change (125, moved aside). Control: a plain directory is not."""
    from no_docker.supervisor.isolation import later_code

    work = tmp_path / "w"
    (work / "sub").mkdir(parents=True)
    before = later_code.later_code_sources(str(work))
    for rel in ("https:/pypi.org/simple/pkg", "sub/git+https:/x", "plain/pypi.org"):
        (work / rel).mkdir(parents=True)
    after = later_code.later_code_sources(str(work))
    new = {k for k in after if after[k] != before.get(k, "absent")}
    assert "https:" in new and "sub/git+https:" in new, (new, after, before)
    assert not any(k.startswith("plain") for k in new), new


def test_remote_indexes_refuse_nothing_here(tmp_path, home, monkeypatch):
    """The control of every case above: remote indexes, in every form the tools take, name no
    directory of this machine; nothing under the current directory is refused for them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w").mkdir()
    xdg = tmp_path / "xdg"
    (xdg / "uv").mkdir(parents=True)
    (xdg / "uv" / "uv.toml").write_text('[[index]]\nname = "p"\nurl = "https://pypi.org/simple"\n'
                                       f'cache-dir = "{tmp_path}/c d"\n')
    env = {"PIP_INDEX_URL": "https://pypi.org/simple", "PIP_EXTRA_INDEX_URL": "https://a/s http://b/s",
           "UV_INDEX": "pypi=https://pypi.org/simple https://x/s", "UV_DEFAULT_INDEX": "https://pypi.org/simple",
           "UV_FIND_LINKS": "https://a/l,https://b/l", "XDG_CONFIG_HOME": str(xdg)}
    assert refusal(tmp_path / "w", home, **env) is None
    (tmp_path / "c d").mkdir()
    assert refusal(tmp_path / "c d", home, **env)  # uv's cache-dir keeps its space
