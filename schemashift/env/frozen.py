"""Read-only JSON data: what the Environment hands a policy below an observation's top level.

`FrozenDict` and `FrozenList` are real `dict` and `list` subclasses (json.dumps, equality,
isinstance and iteration work as for plain ones) whose mutating methods raise `ReadOnlyError`.
Frozen data can therefore be shared between observations and episodes at no cost: nothing a
policy does to it can reach the world, the grade or anything it is shown later, and an attempt
fails loudly instead of corrupting state. `copy.deepcopy` gives an editable plain copy;
pickling gives plain containers too.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

#: exact types that are immutable (subclasses are copied: they may hold state)
LEAVES = frozenset({str, int, float, bool, type(None), bytes})
HINT = "observations are read-only snapshots; copy.deepcopy(observation) gives an editable copy"


class ReadOnlyError(TypeError):
    """A policy tried to change part of an observation or reward breakdown."""


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise ReadOnlyError(HINT)


class FrozenDict(dict):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


#: what a frozen container may hold as it is: immutable leaves and frozen containers
KEPT = LEAVES | {FrozenDict, FrozenList}
#: shared by every view that shows nothing yet (frozen, so sharing it is safe)
EMPTY_LIST = FrozenList()


def freeze(value: Any, _kept: frozenset = KEPT) -> Any:
    """A read-only copy of JSON-shaped data; frozen data and immutable leaves are kept as they
    are (never copied again), objects of other types are deep-copied. A container whose items
    are all kept is copied at C speed."""
    kind = type(value)
    if kind in _kept:
        return value
    if kind is dict:
        if _kept.issuperset(map(type, value.values())):
            return FrozenDict(value)
        return FrozenDict({k: v if type(v) in _kept else freeze(v) for k, v in value.items()})
    if kind is list:
        if _kept.issuperset(map(type, value)):
            return FrozenList(value)
        return FrozenList([v if type(v) in _kept else freeze(v) for v in value])
    if kind is tuple:
        return tuple(freeze(item) for item in value)
    return copy.deepcopy(value)


def frozen_view(view: dict[str, Any], _kept: frozenset = KEPT) -> dict[str, Any]:
    """An observation as policies get it: the policy's own top-level dict over frozen parts
    (parts frozen already are handed out as they are)."""
    return {key: value if type(value) in _kept else freeze(value) for key, value in view.items()}
