"""Syntax tree of the SQL filter and action languages.

Nodes split into *values* (constants, properties, functions, arithmetic) and *predicates*
(comparisons, IS NULL, IN, LIKE, EXISTS, NOT/AND/OR), mirroring the documented grammar where a
``<predicate>`` and an ``<expression>`` are different things; the compiler uses the split to reject
``(a = 1) + 2`` at rule creation instead of failing on every message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Node:
    pos: int


# ---- values -------------------------------------------------------------------------------------
@dataclass(slots=True)
class Const(Node):
    value: Any


@dataclass(slots=True)
class Prop(Node):
    scope: str  # "user" or "sys"
    name: str  # as written (user) or the canonical system property name (sys)


@dataclass(slots=True)
class Param(Node):
    name: str


@dataclass(slots=True)
class Func(Node):
    name: str  # "newid" or "property"
    args: list[Node]


@dataclass(slots=True)
class Unary(Node):
    op: str
    operand: Node


@dataclass(slots=True)
class Binary(Node):
    op: str
    left: Node
    right: Node


# ---- predicates ---------------------------------------------------------------------------------
@dataclass(slots=True)
class Compare(Node):
    op: str  # one of = <> > >= < <=   ("!=" is normalised to "<>")
    left: Node
    right: Node


@dataclass(slots=True)
class IsNull(Node):
    operand: Node
    negated: bool


@dataclass(slots=True)
class In(Node):
    operand: Node
    items: list[Node]
    negated: bool


@dataclass(slots=True)
class Like(Node):
    operand: Node
    pattern: Node
    escape: Node | None
    negated: bool


@dataclass(slots=True)
class Exists(Node):
    prop: Prop


@dataclass(slots=True)
class Not(Node):
    operand: Node


@dataclass(slots=True)
class And(Node):
    left: Node
    right: Node


@dataclass(slots=True)
class Or(Node):
    left: Node
    right: Node


PREDICATES = (Compare, IsNull, In, Like, Exists, Not, And, Or)


# ---- actions ------------------------------------------------------------------------------------
@dataclass(slots=True)
class SetAction(Node):
    target: Prop
    value: Node


@dataclass(slots=True)
class RemoveAction(Node):
    target: Prop
