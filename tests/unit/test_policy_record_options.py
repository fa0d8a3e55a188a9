"""``@record`` options added for the supervisor's records (snapshot, procfs, markers, cgroup,
ending): mutable records, default factories, ordering and slots, each as ``@dataclass`` has it."""

from __future__ import annotations

import copy
import pickle

import pytest
from no_docker.supervisor.record import Factory, record


@record(mutable=True)
class Tally:
    name: str
    counts: dict[str, int] = Factory(dict)  # type: ignore[assignment]
    scratch: list[int] = Factory(list, repr=False)  # type: ignore[assignment]
    note: str = ""


@record(order=True, slots=True)
class Ident:
    pid: int
    start: int


@record(mutable=True, slots=True)
class Cell:
    value: int
    label: str = "x"


def test_mutable_record_assigns_compares_by_value_and_is_unhashable():
    t = Tally("a")
    t.note = "changed"
    del t.note  # mutable: deleting is allowed too, as with @dataclass
    t.note = "back"
    assert t == Tally("a", note="back") != Tally("b", note="back")
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)


def test_factory_makes_a_fresh_default_per_instance_and_is_not_shared():
    a, b = Tally("a"), Tally("b")
    a.counts["x"] = 1
    a.scratch.append(3)
    assert (b.counts, b.scratch) == ({}, [])
    assert Tally("c", counts={"y": 2}).counts == {"y": 2}  # an explicit value wins
    assert Tally("d", {"z": 1}, [4]).scratch == [4]


def test_factory_field_can_be_left_out_of_repr():
    assert repr(Tally("a", scratch=[9])) == "Tally(name='a', counts={}, note='')"


def test_factory_needs_a_callable():
    with pytest.raises(TypeError, match="Factory needs a callable, got 3"):
        Factory(3)


def test_order_compares_fields_as_a_tuple_and_only_within_the_class():
    assert Ident(1, 5) < Ident(2, 0) and Ident(1, 5) <= Ident(1, 5) and Ident(3, 1) > Ident(3, 0)
    assert sorted([Ident(3, 1), Ident(1, 5), Ident(1, 2)]) == [Ident(1, 2), Ident(1, 5), Ident(3, 1)]
    with pytest.raises(TypeError):
        _ = Ident(1, 2) < (1, 3)
    with pytest.raises(TypeError):
        _ = Tally("a") < Tally("b")  # no order unless asked for


def test_slots_record_has_no_instance_dict_and_stays_frozen():
    i = Ident(1, 2)
    assert not hasattr(i, "__dict__") and Ident.__slots__ == ("pid", "start")
    with pytest.raises(AttributeError, match="cannot assign to field 'pid' of frozen Ident"):
        i.pid = 3
    with pytest.raises(AttributeError):
        i.other = 3  # type: ignore[attr-defined]
    assert hash(i) == hash(Ident(1, 2)) and repr(i) == "Ident(pid=1, start=2)"
    assert Ident.__qualname__ == "Ident" and Ident.__match_args__ == ("pid", "start")


def test_frozen_slots_record_copies_and_pickles():
    i = Ident(1, 2)
    assert copy.copy(i) == i and copy.deepcopy(i) == i and pickle.loads(pickle.dumps(i)) == i


def test_mutable_slots_record_keeps_its_defaults_after_the_class_is_remade():
    c = Cell(1)
    c.value = 2
    assert (c.value, c.label) == (2, "x") and not hasattr(c, "__dict__")
    assert repr(Cell(1, "y").replace(value=5)) == "Cell(value=5, label='y')"


def test_positional_fast_path_and_keyword_path_build_the_same_record():
    assert Tally("a", {}, [], "n") == Tally(note="n", name="a")
    with pytest.raises(TypeError, match="missing required argument 'pid'"):
        Ident(start=1)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        Ident(1, 2, 3)


def test_plain_record_keeps_its_instance_dict():
    # policy tests rebuild a Policy from ``__dict__``: only slots=True may take it away.
    @record
    class Plain:
        a: int
        b: int = 0

    assert Plain(1).__dict__ == {"a": 1, "b": 0}
