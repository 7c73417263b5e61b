"""``--json``'s writer: the bytes ``json.dumps(indent=2, ensure_ascii=False)`` gives, faster."""

from __future__ import annotations

import enum
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_chain.core.records import indented_json

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_same_bytes_as_json_dumps(document: object) -> None:
    """For any JSON document, indented_json gives the very text that
    ``json.dumps(indent=2, ensure_ascii=False)`` gives."""
    assert indented_json(document) == json.dumps(document, indent=2, ensure_ascii=False)


class _Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    "document",
    [
        {"state": _Colour.RED},  # a str subclass
        {1: "a", None: "b", 2.5: "c"},  # keys json.dumps turns into text
        [math.nan, math.inf],
        {"deep": [[[{"x": (1, 2.5, 'é\n"')}]]]},
    ],
)
def test_what_is_not_plain_is_json_dumps_own(document: object) -> None:
    """A str subclass, keys that are not strings, NaN, infinities and deep nesting come out as
    json.dumps writes them."""
    assert indented_json(document) == json.dumps(document, indent=2, ensure_ascii=False)


def test_what_json_dumps_refuses_is_refused() -> None:
    """What json.dumps refuses, indented_json refuses with the same exception: an object it cannot
    encode, a list that holds itself."""
    with pytest.raises(TypeError):
        indented_json({"when": object()})
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        indented_json(loop)


TEXT = st.text(max_size=6)
TEXT_LISTS = st.lists(TEXT, min_size=12, max_size=20)
TEXT_DICTS = st.dictionaries(TEXT, TEXT, min_size=12, max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    TEXT_DICTS
    | TEXT_LISTS
    | st.dictionaries(TEXT, TEXT_LISTS, max_size=3)
    # one str subclass (an enum's member) among the texts
    | TEXT_LISTS.map(lambda items: [*items, _Colour.RED])
    | TEXT_DICTS.map(lambda items: {**items, "zz": _Colour.RED})
    | TEXT_DICTS.map(lambda items: {**items, _Colour.RED: "x"})
    | TEXT_DICTS.map(lambda items: {**items, 7: "x"})  # a key json.dumps turns into text
)
def test_text_only_containers_the_same_bytes(document: object) -> None:
    """The shortcut for big dicts and lists of text alone (16 items or more): exact str only;
    with a subclass or another key among them the long way, as json.dumps writes it."""
    assert indented_json(document) == json.dumps(document, indent=2, ensure_ascii=False)
