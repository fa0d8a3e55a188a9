"""``[tool.no-docker]`` in the work dir's pyproject.toml (issue 15 item 2, DESIGN §3): defaults
for ``run``; the command line adds to lists and overrides scalars; unknown key, wrong type,
unreadable file -> exit 2 naming the key and the file; ``--report`` says where each setting came
from; a config can never widen what the command line could not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_helpers import bwrap_works, run_no_docker
from no_docker.supervisor.errors import UsageError
from no_docker.supervisor.isolation import config
from no_docker.supervisor.run import ending_options, parse_args

_why = bwrap_works()
needs_bwrap = pytest.mark.skipif(_why is not None, reason=_why or "")


def _write(work: Path, body: str) -> Path:
    path = work / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n\n[tool.no-docker]\n" + body)
    return path


def _merged(work: Path, argv: list[str]) -> list[str]:
    from no_docker.supervisor.run import parse_args as parse
    from no_docker.supervisor.run import with_config

    return with_config(argv, parse(argv))[0]


def test_no_file_or_no_table_is_no_config(tmp_path):
    assert config.load(str(tmp_path)) is None
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert config.load(str(tmp_path)) is None
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nnote = 'no-docker elsewhere'\n")
    assert config.load(str(tmp_path)) is None


def test_lists_add_and_scalars_override(tmp_path):
    (tmp_path / "cache").mkdir()
    _write(tmp_path, 'rw = ["cache"]\nkeep-env = ["CI"]\nmax-pids = 64\nend-timeout = 5\nquiet = true\n'
                     'publish = [8000, "127.0.0.1:8001"]\n')
    argv = ["--work", str(tmp_path), "--keep-env", "MY_VAR", "--max-pids", "128", "--", "true"]
    merged = _merged(tmp_path, argv)
    request = parse_args(merged)
    assert request.keep_env == ("CI", "MY_VAR")  # the list adds
    assert request.rw == (str(tmp_path / "cache"),)  # relative to the file's directory
    assert request.quiet is True and request.publish == (8000, 8001)
    assert ending_options(merged) == (128, 5.0)  # the command line's scalar wins
    assert config.sources(config.load(str(tmp_path)), {"--keep-env", "--max-pids"}) == {
        "rw": f"{tmp_path}/pyproject.toml [tool.no-docker] rw",
        "keep-env": f"command line + {tmp_path}/pyproject.toml [tool.no-docker] keep-env",
        "publish": f"{tmp_path}/pyproject.toml [tool.no-docker] publish",
        "max-pids": "command line",
        "end-timeout": f"{tmp_path}/pyproject.toml [tool.no-docker] end-timeout",
        "quiet": f"{tmp_path}/pyproject.toml [tool.no-docker] quiet"}


@pytest.mark.parametrize("body, message", [
    ('rww = ["x"]\n', "rww: unknown key"),
    ('rw = "x"\n', "rw: a list of strings, not a string"),
    ("max-pids = '64'\n", "max-pids: a whole number, not a string"),
    ("max-pids = true\n", "max-pids: a whole number, not a boolean"),
    ("end-timeout = 'soon'\n", "end-timeout: a number of seconds"),
    ("quiet = 1\n", "quiet: true or false, not a number"),
    ("keep-env = [1]\n", "keep-env: a list of non-empty strings"),
    # never wider than the command line:
    ("publish = [2375]\n", "publish: --publish 2375: refused, 2375 is a container engine's port"),
    ("publish = ['0.0.0.0:8000']\n", "publish: --publish 0.0.0.0:8000: loopback only"),
    ("keep-env = ['DOCKER_HOST']\n", "keep-env: --keep-env DOCKER_HOST: refused"),
    ("rw = ['/usr']\n", "rw: --rw /usr -> /usr: refused, system directories stay read-only"),
    ("rw = ['/']\n", "rw: --rw / -> /: refused"),
    ("ro = ['missing']\n", "ro: --ro "),
    ("max-pids = 2\n", "max-pids: --max-pids '2': a whole number from 8 to"),
])
def test_bad_config_is_a_usage_error_naming_key_and_file(tmp_path, body, message):
    path = _write(tmp_path, body)
    with pytest.raises(UsageError) as caught:
        _merged(tmp_path, ["--work", str(tmp_path), "--", "true"])
    assert str(caught.value).startswith(f"{path}: [tool.no-docker] ") or str(path) in str(caught.value)
    assert message in str(caught.value)


def test_unreadable_and_invalid_files_name_the_file(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.no-docker\nrw = [")
    with pytest.raises(UsageError, match=f"{path}: not valid TOML"):
        config.load(str(tmp_path))
    path.unlink()
    path.mkdir()
    with pytest.raises(UsageError, match=f"{path}: (not a regular file|cannot read)"):
        config.load(str(tmp_path))
    path.rmdir()
    path.write_text("[tool]\nno-docker = 3\n")
    with pytest.raises(UsageError, match=r"\[tool.no-docker\] must be a table"):
        config.load(str(tmp_path))


@needs_bwrap
def test_config_applies_end_to_end_and_report_says_where_from(tmp_path):
    work = tmp_path / "work"
    (work / "cache").mkdir(parents=True)
    outside = tmp_path / "outside-cache"
    outside.mkdir()
    _write(work, f'rw = ["{outside}"]\nquiet = true\nkeep-env = ["ND_CONFIG_TEST"]\n')
    report = tmp_path / "r.json"
    result = run_no_docker(["--report", str(report), "--", "sh", "-c",
                            f'touch {outside}/written; echo "$ND_CONFIG_TEST"'],
                           cwd=work, env={**os.environ, "ND_CONFIG_TEST": "kept"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kept\n" and result.stderr == ""  # quiet from the config
    assert (outside / "written").exists()
    doc = json.loads(report.read_text())
    assert doc["settings"] == {"rw": f"{work}/pyproject.toml [tool.no-docker] rw",
                               "quiet": f"{work}/pyproject.toml [tool.no-docker] quiet",
                               "keep-env": f"{work}/pyproject.toml [tool.no-docker] keep-env"}
    _write(work, "rw = 'x'\n")
    bad = run_no_docker(["--", "true"], cwd=work)
    assert bad.returncode == 2 and f"{work}/pyproject.toml: [tool.no-docker] rw:" in bad.stderr
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_no_config_costs_no_toml_import(tmp_path):
    """`run -- true` without a config must not import tomllib or the config module."""
    code = ("import sys, os; from no_docker.supervisor import run; "
            "req = run.parse_args(['--', 'true']); "
            "exists = os.path.exists(os.path.join(req.work or '.', 'pyproject.toml')); "
            "print(exists, 'tomllib' in sys.modules, 'no_docker.supervisor.isolation.config' in sys.modules)")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["False", "False", "False"], out.stderr[-2000:]
    assert "tomllib" not in out.stderr


@needs_bwrap
def test_a_run_that_rewrites_the_config_is_not_proven(tmp_path):
    """The next run's defaults are code that runs later: a run must not widen them unseen."""
    _write(tmp_path, "quiet = true\n")
    script = "printf '[tool.no-docker]\\nrw = [\"/root/.ssh\"]\\n' > pyproject.toml"
    result = run_no_docker(["--", "sh", "-c", script], cwd=tmp_path)
    # The work dir's own config file is read-only inside (issue 25); one in a subdirectory,
    # which a run started there would read, is audited, refused and moved aside.
    assert "Read-only file system" in result.stderr, result.stderr
    assert "/root/.ssh" not in (tmp_path / "pyproject.toml").read_text()
    (tmp_path / "sub").mkdir()
    result = run_no_docker(["--", "sh", "-c", script.replace("pyproject.toml", "sub/pyproject.toml")],
                           cwd=tmp_path)
    assert result.returncode == 125, result.stderr
    assert f"{tmp_path}/sub/pyproject.toml: absent -> file:[tool.no-docker]" in result.stderr, result.stderr
    assert "moved aside to" in result.stderr and not (tmp_path / "sub" / "pyproject.toml").exists()


def test_a_pyproject_nested_too_deeply_is_a_usage_error_not_a_traceback(tmp_path):
    from no_docker.supervisor.errors import UsageError
    from no_docker.supervisor.isolation import config

    (tmp_path / "pyproject.toml").write_text("[tool.no-docker]\nx = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(UsageError) as err:
        config.load(str(tmp_path))
    assert "nested too deeply to read as TOML" in str(err.value)
