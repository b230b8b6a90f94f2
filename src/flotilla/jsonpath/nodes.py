"""The parsed form of a JSONPath template.

A template is a sequence of :class:`Text`, :class:`Expression` and :class:`Range` nodes. An
expression is a chain of steps applied left to right to a list of values, starting from
``[current object]``: each step maps the list of values to a new list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True, slots=True)
class Field:
    """``.name`` / ``['name']``: the value of key ``name`` of every map (others contribute nothing)."""

    name: str


@dataclass(frozen=True, slots=True)
class Wildcard:
    """``.*``: every value of every map, every item of every list, every byte of every string."""


@dataclass(frozen=True, slots=True)
class Recursive:
    """``..``: every map, list and string (non-empty), depth first, parents before children."""


@dataclass(frozen=True, slots=True)
class Slice:
    """``[i]``, ``[start:end:step]``, ``[*]``. ``None`` means "not given".

    An index ``[i]`` is the slice ``[i:i+1]`` with ``end_derived`` set: kubectl then reads an
    ``end`` of 0 (from ``[-1]``) as "up to the length".
    """

    start: int | None
    end: int | None
    step: int | None
    end_derived: bool = False


@dataclass(frozen=True, slots=True)
class Union:
    """``[a,b,...]``: the results of each branch, branch after branch."""

    branches: tuple[Chain, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    """``[?(left op right)]`` or, with ``op == "exists"``, ``[?(left)]``."""

    left: Chain
    op: str
    right: Chain


@dataclass(frozen=True, slots=True)
class Literal:
    """A quoted string, number or ``true``/``false`` inside an action.

    A string yields itself once, whatever the input (kubectl's text node); a number or boolean
    yields itself once per input value.
    """

    value: str | int | float | bool


Step: TypeAlias = Field | Wildcard | Recursive | Slice | Union | Filter | Literal
Chain: TypeAlias = tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Text:
    """Template text outside ``{...}``, copied to the output."""

    text: str


@dataclass(frozen=True, slots=True)
class Expression:
    """One ``{...}`` action; ``position`` is the offset of its ``{`` in the template."""

    chain: Chain
    position: int


@dataclass(frozen=True, slots=True)
class Range:
    """``{range EXPR}BODY{end}``: BODY evaluated with each result of EXPR as the current object."""

    chain: Chain
    body: tuple[Node, ...]
    position: int


Node: TypeAlias = Text | Expression | Range
