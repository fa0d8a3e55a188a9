"""``@record``: a dataclass without importing ``dataclasses``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``, ``enum``...):
measured here at well over half of the import time of ``no-docker run``, whose whole start-up
has a 30 ms budget. The records of the run path (``Policy``, ``Request``, the listing, the
snapshot and ending records, run.json) need only what this gives: fields with defaults in
declaration order (a default may be a ``Factory``, called once per instance), keyword or
positional construction, ``==``, ``repr`` and ``replace(**changes)``; frozen records (the
default) also refuse assignment and hash, ``mutable=True`` ones do neither (like
``@dataclass``); ``order=True`` adds ``<`` ``<=`` ``>`` ``>=``; ``slots=True`` gives the
class ``__slots__`` (no per-instance ``__dict__``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Factory", "record"]

_NO_SLOT_ATTRIBUTES = ("__dict__", "__weakref__")


class Factory:
    """A field default made fresh for each instance by calling ``make()`` (like
    ``dataclasses.field(default_factory=make)``); ``repr=False`` leaves the field out of
    the record's repr."""

    __slots__ = ("make", "repr")

    def __init__(self, make: object, *, repr: bool = True) -> None:  # noqa: A002 - dataclasses' name
        if not callable(make):
            raise TypeError(f"Factory needs a callable, got {make!r}")
        self.make = make
        self.repr = repr


def record(cls: type | None = None, /, *, mutable: bool = False, order: bool = False,
           slots: bool = False) -> type | Callable[[type], type]:
    """Make CLS a record of its annotated class attributes: ``@record`` is like
    ``@dataclass(frozen=True)``, ``@record(mutable=True, order=True, slots=True)`` like
    ``@dataclass(frozen=False, order=True, slots=True)``. A field without default may not
    follow one with. Called with options only, it returns the decorator."""
    if cls is None:
        return lambda cls: _build(cls, mutable=mutable, order=order, slots=slots)
    return _build(cls, mutable=mutable, order=order, slots=slots)


def _build(cls: type, *, mutable: bool, order: bool, slots: bool) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    seen_default = False
    for name in names:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
    factories = {name: value.make for name, value in defaults.items() if isinstance(value, Factory)}
    shown = tuple(name for name in names if not (isinstance(defaults.get(name), Factory)
                                                   and not defaults[name].repr))
    if slots:
        # __slots__ only works when the class is created: make it again, as dataclasses does.
        # The defaults live in `defaults` now; class attributes of the same name would clash.
        namespace = {key: value for key, value in cls.__dict__.items()
                     if key not in names and key not in _NO_SLOT_ATTRIBUTES}
        namespace["__slots__"] = names
        namespace["__qualname__"] = cls.__qualname__
        cls = type(cls)(cls.__name__, cls.__bases__, namespace)
    title = cls.__name__
    count = len(names)
    store = object.__setattr__  # a frozen record's own __setattr__ refuses

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        if not kwargs and len(args) == count:
            # The common call on hot paths (one Identity per process a pass sees): all positional.
            for name, value in zip(names, args):  # noqa: B905 - lengths checked just above
                store(self, name, value)
            return
        if len(args) > count:
            raise TypeError(f"{title}() takes {count} positional arguments but {len(args)} were given")
        values = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{title}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{title}() got multiple values for argument {key!r}")
            values[key] = value
        for name in names:
            if name in values:
                store(self, name, values[name])
            elif name in factories:
                store(self, name, factories[name]())
            elif name in defaults:
                store(self, name, defaults[name])
            else:
                raise TypeError(f"{title}() missing required argument {name!r}")

    def _values(self: object) -> tuple:
        return tuple(getattr(self, name) for name in names)

    def __setattr__(self: object, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of frozen {title}")

    def __delattr__(self: object, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of frozen {title}")

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)

    def __hash__(self: object) -> int:
        return hash(_values(self))

    def __lt__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) < _values(other)

    def __le__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) <= _values(other)

    def __gt__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) > _values(other)

    def __ge__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) >= _values(other)

    def __repr__(self: object) -> str:
        return f"{title}(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in shown) + ")"

    def replace(self: object, **changes: object) -> object:
        return cls(**{**{name: getattr(self, name) for name in names}, **changes})

    # copy and pickle restore slots with setattr, which a frozen record refuses (dataclasses
    # adds the same pair for frozen slotted classes).
    def __getstate__(self: object) -> tuple:
        return _values(self)

    def __setstate__(self: object, state: tuple) -> None:
        for name, value in zip(names, state, strict=True):
            store(self, name, value)

    methods = [__init__, __eq__, __repr__, replace]
    if not mutable:
        methods += [__setattr__, __delattr__, __hash__]
    if order:
        methods += [__lt__, __le__, __gt__, __ge__]
    if slots and not mutable:
        methods += [__getstate__, __setstate__]
    for function in methods:
        function.__qualname__ = f"{title}.{function.__name__}"
        setattr(cls, function.__name__, function)
    if mutable:
        cls.__hash__ = None  # mutable and compared by value: unhashable, as with @dataclass(eq=True)
    cls.__match_args__ = names
    cls.__record_fields__ = names
    return cls
