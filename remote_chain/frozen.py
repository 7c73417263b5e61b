"""PURE: ``quick_init``, a faster ``__init__`` for the frozen dataclasses a status poll makes
by the thousand (issue 13, P7).

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``
(its own ``__setattr__`` refuses): an 11-field ``ChainStatus`` took 2.4 us to make, where
storing the same values in the instance's ``__dict__`` takes 1.0. A 10,000-chain poll makes
five such objects a chain (its files, its file read, its queued job, its job view, its
status): ~35 ms of the client's CPU. ``quick_init`` replaces the class's ``__init__`` by one
with the same parameters and defaults that writes the ``__dict__``; equality, hash, repr,
pickling and immutability afterwards are the dataclass's own, unchanged. Only for what it
can copy exactly (refused otherwise, at import): frozen, no ``__slots__``, no
``__post_init__``, every field an ``__init__`` parameter, positional, with a plain default or
none. tests/test_frozen.py holds each class it is applied to to the dataclass's own
``__init__``.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TypeVar, cast

T = TypeVar("T")

DATACLASS_INIT = "__dataclass_init__"  # the replaced __init__, kept for the tests


def quick_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass) with an ``__init__`` that fills its ``__dict__`` at once."""
    name = cls.__qualname__
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"quick_init: {name} is not a frozen dataclass")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init: {name} has __slots__ or __post_init__")
    params, defaults, stores = [], {}, []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"quick_init: {name}.{f.name} is not a plain parameter")
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        stores.append(f"    d[{f.name!r}] = {f.name}")
    source = f"def __init__(self, {', '.join(params)}):\n    d = self.__dict__\n" + "\n".join(
        stores
    )
    namespace: dict[str, object] = {}
    exec(source, defaults, namespace)  # noqa: S102 - our own text, built from field names
    init = cast(types.FunctionType, namespace["__init__"])
    init.__qualname__ = f"{name}.__init__"
    setattr(cls, DATACLASS_INIT, cls.__init__)
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning a method
    return cls
