"""The guard's table of what allowlisted actions do with their inputs (ci/known_actions.py, T-76)."""

from __future__ import annotations

import pytest
from no_docker.ci.known_actions import INPUTS, effects, major


@pytest.mark.parametrize(("ref", "want"), [("v5", 5), ("v6.1.0", 6), ("4.2", 4), ("main", None),
                                           ("0123456789abcdef0123456789abcdef01234567", None)])
def test_major_of_a_ref(ref: str, want: int | None) -> None:
    assert major(ref) == want


@pytest.mark.parametrize(("ref", "inputs", "caches"), [
    ("v5", {}, ("cache (by default at @v5)",)),
    ("v3", {}, ()),
    ("main", {}, ("cache (by default at @main)",)),
    ("v5", {"cache": "false"}, ()),
    ("v5", {"cache": "FALSE"}, ()),
    ("v3", {"cache": "true"}, ("cache: true",)),
    ("v3", {"cache": "${{ inputs.c }}"}, ("cache: ${{ inputs.c }}",)),  # an expression may be on
])
def test_setup_go_cache_by_version(ref: str, inputs: dict[str, str | None], caches: tuple[str, ...]) -> None:
    assert effects("actions/setup-go", ref, inputs).caches == caches


def test_code_inputs_and_unknown_inputs_refuse() -> None:
    assert "pip-install" in (effects("actions/setup-python", "v6.1.0", {"pip-install": "-e ."}).problem or "")
    assert effects("actions/setup-python", "v6.1.0", {"pip-install": ""}).problem is None
    assert "cannot tell" in (effects("actions/setup-python", "v5", {"pip_install": "x"}).problem or "")
    assert effects("actions/setup-python", "v5", None).problem is not None  # with: an expression
    assert effects("actions/setup-python", "v5", {"python-version": "${{ matrix.py }}"}) == effects(
        "actions/setup-python", "v5", {})
    assert effects("actions/setup-node", "v4", {}).problem is None
    assert "package-manager-cache" in (effects("actions/setup-node", "v5", {}).problem or "")
    assert effects("actions/setup-node", "v5", {"package-manager-cache": "false"}).problem is None


def test_checkout_foreign_inputs() -> None:
    assert effects("actions/checkout", "v4", {"persist-credentials": "false"}).foreign == ()
    assert effects("actions/checkout", "v4", {"submodules": "false"}).foreign == ()
    for key in ("repository", "ref", "path", "github-server-url", "submodules"):
        assert effects("actions/checkout", "v4", {key: "x"}).foreign, key


def test_every_allowlisted_action_has_a_table() -> None:
    from no_docker.ci.workflow_rules import ALLOWED_ACTIONS

    assert set(INPUTS) == ALLOWED_ACTIONS
