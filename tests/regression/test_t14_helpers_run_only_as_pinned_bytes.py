"""T-14: the helpers that run outside the isolation (the raw-socket and docker-py helpers) run
only as their pinned bytes.

The payload carries each helper as a quoted here-document fed to ``python3 -I``; the lint
accepts that python only when the here-document's sha256 is a helper pin. So a payload whose
helper copy differs by one byte is rejected, and `apply` refuses it even when the payload's
own pin would match: the pin check and the helper check are both needed, and both are tried
here, on every use (each apply, each lint).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import pins
from no_docker.mutants.apply import ApplyError, apply
from no_docker.mutants.lint import lint_source

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = REPO / "mutants" / "payloads" / "reach-engine.sh"
HELPERS = ["mutants/helpers/rawsock.py", "mutants/helpers/dockerpy_route.py"]


def with_changed_helper(helper: str) -> bytes:
    """The payload with one statement of ``helper``'s embedded copy changed."""
    source = (REPO / helper).read_text()
    changed = source.replace("import sys\n", "import sys  # changed\n", 1)
    assert changed != source
    text = PAYLOAD.read_text()
    assert source in text
    return text.replace(source, changed, 1).encode()


@pytest.mark.parametrize("helper", HELPERS)
def test_payload_with_a_changed_helper_is_rejected(helper):
    findings = lint_source(with_changed_helper(helper), "p.sh", pins.helper_hashes())
    assert [f.code for f in findings] == ["python-not-pinned-helper"], findings


@pytest.mark.parametrize("helper", HELPERS)
def test_apply_refuses_a_pinned_payload_carrying_a_changed_helper(tmp_path, helper):
    payload = tmp_path / "reach-engine.sh"
    payload.write_bytes(with_changed_helper(helper))
    pins_file = tmp_path / "pins.json"
    for name, digest in pins.load_pins().items():
        pins.write_pin(name, digest, pins_file)
    pins.write_pin("mutants/payloads/reach-engine.sh", pins.sha256_file(payload), pins_file)
    target = tmp_path / "t.sh"
    target.write_text("#!/usr/bin/env bash\necho target\n")
    with pytest.raises(ApplyError, match="python-not-pinned-helper"):
        apply(payload, target, tmp_path / "m.sh", name="mutants/payloads/reach-engine.sh",
              pins_file=pins_file)
    assert not (tmp_path / "m.sh").exists()


@pytest.mark.parametrize("helper", HELPERS)
def test_embedded_helpers_are_byte_for_byte_the_pinned_files(helper):
    heredoc = r"<<'NO_DOCKER_HELPER'\n(.*?)^NO_DOCKER_HELPER$"
    bodies = re.findall(heredoc, PAYLOAD.read_text(), flags=re.S | re.M)
    digest = pins.load_pins()[helper]
    assert digest in {pins.sha256_bytes(b.encode()) for b in bodies}
    pins.verify_copy(REPO / helper, helper)


def test_the_raw_socket_helper_refuses_to_leave_the_machine(tmp_path):
    """The helper's own guard, independent of the lint: a non-loopback TCP host is refused."""
    helper = pins.verified_copy("mutants/helpers/rawsock.py", tmp_path)
    argv = [sys.executable, "-I", "-S", str(helper), "--route", "t14", "--tcp", "198.51.100.7:2375"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 69 and "non-loopback" in done.stdout
