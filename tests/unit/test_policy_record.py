"""``@record``: the frozen-dataclass behaviour the run path relies on, without ``dataclasses``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from no_docker.supervisor.record import record


@record
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def test_construction_defaults_and_methods():
    p = Point(3, tags=("a",))
    assert (p.x, p.y, p.tags, p.norm1()) == (3, 0, ("a",), 3)
    assert Point(x=1, y=2) == Point(1, 2) != Point(1, 3)
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert repr(Point(1)) == "Point(x=1, y=0, tags=())"
    assert Point(1).replace(y=5) == Point(1, 5)
    assert Point(1, 2) != (1, 2)


def test_frozen():
    p = Point(1)
    with pytest.raises(AttributeError, match="cannot assign to field 'x' of frozen Point"):
        p.x = 2
    with pytest.raises(AttributeError, match="cannot delete"):
        del p.y


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "missing required argument 'x'"),
    ((1, 2, (), 4), {}, "takes 3 positional arguments but 4 were given"),
    ((1,), {"x": 2}, "multiple values for argument 'x'"),
    ((1,), {"z": 2}, "unexpected keyword argument 'z'"),
])
def test_bad_construction_names_the_argument(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError, match="field 'b' without a default follows one with a default"):
        @record
        class Bad:
            a: int = 0
            b: int


def test_run_path_imports_no_dataclasses():
    code = "import sys, no_docker.supervisor.run; print('dataclasses' in sys.modules)"
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    # -I: no user site; the editable finder of this checkout may still import what it needs.
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False", out.stdout
