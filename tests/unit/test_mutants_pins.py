"""Pins: verify_copy refuses any byte that differs, an unknown name, a malformed pins file."""

from __future__ import annotations

import json

import pytest
from no_docker.mutants import pins


@pytest.fixture
def pinned(tmp_path):
    payload = tmp_path / "p.sh"
    payload.write_text("echo hi\n")
    pins_file = tmp_path / "pins.json"
    pins.write_pin("mutants/payloads/p.sh", pins.sha256_file(payload), pins_file)
    return payload, pins_file


def test_verify_copy_accepts_the_pinned_bytes(pinned):
    payload, pins_file = pinned
    pins.verify_copy(payload, "mutants/payloads/p.sh", pins_file)
    assert pins.read_verified(payload, "mutants/payloads/p.sh", pins_file) == b"echo hi\n"


@pytest.mark.parametrize("tamper", [b"echo hi \n", b"echo hi", b"echo hi\n\n", b"docker rm x\n"])
def test_verify_copy_refuses_a_tampered_copy(pinned, tamper):
    payload, pins_file = pinned
    payload.write_bytes(tamper)
    with pytest.raises(pins.PinError, match="does not match the pin"):
        pins.verify_copy(payload, "mutants/payloads/p.sh", pins_file)


def test_unknown_name_and_missing_file_are_refused(pinned, tmp_path):
    payload, pins_file = pinned
    with pytest.raises(pins.PinError, match="no pin"):
        pins.verify_copy(payload, "mutants/payloads/other.sh", pins_file)
    with pytest.raises(pins.PinError, match="cannot read"):
        pins.verify_copy(tmp_path / "gone.sh", "mutants/payloads/p.sh", pins_file)


def test_pins_file_is_versioned_sorted_and_kinded(pinned):
    _, pins_file = pinned
    pins.write_pin("mutants/helpers/h.py", "0" * 64, pins_file)
    pins.write_pin("canary/__main__.py", "1" * 64, pins_file)
    doc = json.loads(pins_file.read_text())
    assert doc["version"] == 1
    assert list(doc["pins"]) == sorted(doc["pins"])
    assert {n: e["kind"] for n, e in doc["pins"].items()} == {
        "canary/__main__.py": "entry", "mutants/helpers/h.py": "helper", "mutants/payloads/p.sh": "payload"}
    assert pins.helper_hashes(pins_file) == {"0" * 64}


@pytest.mark.parametrize("content", ["{", "[]", '{"version": 2, "pins": {}}',
                                       '{"version": 1, "pins": {"a": {}}}'])
def test_malformed_pins_file_is_an_error_not_an_empty_set(tmp_path, content):
    pins_file = tmp_path / "pins.json"
    pins_file.write_text(content)
    with pytest.raises(pins.PinError):
        pins.load_pins(pins_file)


def test_verify_all_reports_each_file(tmp_path, pinned):
    payload, pins_file = pinned
    root = tmp_path / "root"
    (root / "mutants" / "payloads").mkdir(parents=True)
    (root / "mutants" / "payloads" / "p.sh").write_text("echo hi\n")
    assert [(c.name, c.ok) for c in pins.verify_all(pins_file, root)] == [("mutants/payloads/p.sh", True)]
    (root / "mutants" / "payloads" / "p.sh").write_text("echo bye\n")
    (check,) = pins.verify_all(pins_file, root)
    assert not check.ok and "!= pinned" in check.detail


def test_the_repository_pins_all_verify():
    checks = pins.verify_all()
    assert checks and all(c.ok for c in checks), [c for c in checks if not c.ok]
