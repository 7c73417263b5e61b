"""quick_init (frozen.py): each class it is applied to is made exactly as its dataclass
``__init__`` makes it: the same fields, in the same order, equal, hashed and shown alike, still
frozen; what it cannot copy is refused at decoration."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remote_chain.chainstatus import ChainStatus, JobView
from remote_chain.frozen import DATACLASS_INIT, quick_init
from remote_chain.models import ChainStateName, SlurmState
from remote_chain.sacct import QueuedJob
from remote_chain.snapshot import ChainFiles, FileRead

QUICK = [ChainStatus, JobView, FileRead, ChainFiles, QueuedJob]

_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=8),
    st.sampled_from(list(ChainStateName) + list(SlurmState)),
    st.tuples(st.text(max_size=3)),
)


def _made_both_ways(cls: type[Any], args: list[Any]) -> tuple[object, object]:
    quick = cls(*args)
    slow = object.__new__(cls)
    getattr(cls, DATACLASS_INIT)(slow, *args)
    return quick, slow


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
@given(data=st.data())
def test_made_as_the_dataclass_makes_it(cls: type[Any], data: st.DataObject) -> None:
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    count = data.draw(st.integers(len(required), len(fields)))
    args: list[Any] = [data.draw(_VALUES) for _ in range(count)]
    quick, slow = _made_both_ways(cls, args)
    assert list(vars(quick).items()) == list(vars(slow).items())
    assert quick == slow
    assert repr(quick) == repr(slow)
    try:
        assert hash(quick) == hash(slow)
    except TypeError:  # an unhashable value drawn (none is, today): both refuse alike
        with pytest.raises(TypeError):
            hash(slow)
    assert copy.deepcopy(quick) == quick  # by __reduce_ex__, as pickle
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.__setattr__(fields[0].name, None)


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclass_one(cls: type[Any]) -> None:
    assert inspect.signature(cls.__init__).parameters.keys() == (
        inspect.signature(getattr(cls, DATACLASS_INIT)).parameters.keys()
    )
    with pytest.raises(TypeError):
        cls()  # a required field missing is refused, as before


def test_what_it_cannot_copy_is_refused() -> None:
    @dataclasses.dataclass
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (Mutable, Checked, Factory, KeywordOnly):
        with pytest.raises(TypeError, match="quick_init"):
            quick_init(cls)
