"""Frozen records without ``dataclasses``: the types a write makes (notes, operations, results).

``import dataclasses`` costs a fresh process ~8 ms (it imports ``inspect``, and
that ``ast``, ``dis``, ``tokenize`` ...) and each frozen dataclass ~0.6 ms more to
define: together more than `mdmem add` spends writing its note. :func:`record`
makes of a class what ``@dataclass(frozen=True)`` makes of it, for the fields
it is given here (annotated, with an optional default or :func:`field`):

- ``__init__`` taking the fields in order (positional or by name), each
  default shared as a dataclass shares it, :func:`field`'s made per record;
- equal by value to a record of the same class, hashable (over the fields not
  marked ``hash=False``), a dataclass's ``repr``, ``__match_args__``;
- assignment and deletion refused with ``dataclasses.FrozenInstanceError``;
- ``dataclasses.fields``, ``asdict``, ``replace`` and ``is_dataclass`` work on
  it: its ``__dataclass_fields__`` are made, and ``dataclasses`` imported, on
  first use. :func:`replace` here needs no ``dataclasses``.

Pickling and ``copy`` work as for any class (the state is the instance dict).
``tests/test_record.py`` holds each record to its dataclass twin. Floor 0:
nothing of mdmem is imported here.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform  # typing's from 3.11

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda decorator: decorator


__all__ = ["field", "record", "replace", "values"]


class _Factory:
    __slots__ = ("hash", "make")

    def __init__(self, make: Callable[[], object], hash: bool) -> None:
        self.make = make
        self.hash = hash


def field(*, default_factory: Callable[[], Any], hash: bool = True) -> Any:
    """A field whose default is made for each record (``dataclasses.field(default_factory=)``);
    ``hash=False`` leaves it out of the hash (a mapping)."""
    return _Factory(default_factory, hash)


class _Made:
    """An argument left to its field's factory (shown as a dataclass shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_NO_DEFAULT = object()
_MADE = _Made()


class _Spec:
    """A record's fields: ``(name, annotation, default, factory or None, hashed)``."""

    __slots__ = ("fields", "names")

    def __init__(self, fields: list[tuple[str, str, object, _Factory | None, bool]]) -> None:
        self.fields = fields
        self.names = tuple(f[0] for f in fields)


class _DataclassFields:
    """A record's ``__dataclass_fields__``, made on first access, so ``dataclasses`` sees a
    dataclass (``fields``, ``asdict``, ``replace``, ``is_dataclass``)."""

    def __get__(self, obj: object, owner: type) -> dict[str, object]:
        import dataclasses

        spec: _Spec = owner.__dict__["__record__"]
        made: list[tuple[str, str, Any]] = []
        for name, annotation, default, factory, hashed in spec.fields:
            if factory is not None:
                made.append(
                    (name, annotation, dataclasses.field(default_factory=factory.make, hash=hashed))
                )
            elif default is not _NO_DEFAULT:
                made.append((name, annotation, dataclasses.field(default=default)))
            else:
                made.append((name, annotation, dataclasses.field()))
        twin = dataclasses.make_dataclass(owner.__name__, made, frozen=True)
        fields: dict[str, object] = getattr(twin, "__dataclass_fields__")  # noqa: B009
        type.__setattr__(owner, "__dataclass_fields__", fields)
        type.__setattr__(owner, "__dataclass_params__", getattr(twin, "__dataclass_params__"))  # noqa: B009
        return fields


def _frozen(self: object, name: str, value: object = None) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _init(qualname: str, spec: _Spec) -> Callable[..., None]:
    """The record's ``__init__``, made from its source as ``dataclasses`` makes one."""
    scope: dict[str, object] = {"_set": object.__setattr__, "_MADE": _MADE}
    params: list[str] = []
    body: list[str] = []
    defaulted = ""
    for at, (name, _, default, factory, _) in enumerate(spec.fields):
        if factory is not None:
            scope[f"_f{at}"] = factory.make
            params.append(f"{name}=_MADE")
            body.append(f"    if {name} is _MADE:\n        {name} = _f{at}()\n")
            defaulted = name
        elif default is not _NO_DEFAULT:
            scope[f"_d{at}"] = default
            params.append(f"{name}=_d{at}")
            defaulted = name
        elif defaulted:
            raise TypeError(f"{qualname}: field {name!r} without a default follows {defaulted!r}")
        else:
            params.append(name)
        body.append(f"    _set(self, {name!r}, {name})\n")
    lines = "".join(body) or "    pass\n"
    source = f"def __init__(self, {', '.join(params)}):\n{lines}"
    exec(source, scope)
    init: Callable[..., None] = scope["__init__"]  # type: ignore[assignment]
    init.__qualname__ = f"{qualname}.__init__"
    init.__annotations__ = {**{f[0]: f[1] for f in spec.fields}, "return": None}
    return init


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """``cls`` made a frozen record of its annotated fields (see the module's docstring)."""
    fields: list[tuple[str, str, object, _Factory | None, bool]] = []
    # The class's own annotations (strings: `from __future__ import annotations`), in order.
    own: dict[str, object] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    for name, annotation in own.items():
        value = cls.__dict__.get(name, _NO_DEFAULT)
        if isinstance(value, _Factory):
            type.__delattr__(cls, name)  # a dataclass keeps no class attribute for it either
            fields.append((name, str(annotation), _NO_DEFAULT, value, value.hash))
        else:
            fields.append((name, str(annotation), value, None, True))
    spec = _Spec(fields)
    names = spec.names
    hashed = tuple(name for name, _, _, _, keep in fields if keep)

    def __repr__(self: object) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        # Tuples, as a dataclass compares: the same object is equal to itself (a NaN too).
        mine = tuple(getattr(self, name) for name in names)
        return mine == tuple(getattr(other, name) for name in names)

    def __hash__(self: object) -> int:
        return hash(tuple(getattr(self, name) for name in hashed))

    methods: dict[str, object] = {
        "__init__": _init(cls.__qualname__, spec),
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": _frozen,
        "__delattr__": _frozen,
        "__match_args__": names,
        "__record__": spec,
        "__dataclass_fields__": _DataclassFields(),
    }
    for method in (__repr__, __eq__, __hash__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    for name, value in methods.items():
        type.__setattr__(cls, name, value)
    return cls


def replace(obj: T, **changes: Any) -> T:
    """A copy of record ``obj`` with some fields changed (``dataclasses.replace``).

    Raises:
        TypeError: a name that is not one of its fields.
    """
    fields = values(obj)
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {unknown[0]!r}")
    return type(obj)(**{**fields, **changes})


def values(obj: object) -> dict[str, object]:
    """Record ``obj``'s fields by name, in order (``dataclasses.asdict``, one level deep)."""
    spec: _Spec = type(obj).__dict__["__record__"]
    return {name: getattr(obj, name) for name in spec.names}
