"""Compiles a parsed filter into nested Python closures, once per rule.

Each value node becomes ``f(message) -> value`` (``None`` is unknown/NULL) and each predicate node
``f(message) -> True | False | None`` (three-valued logic). Common shapes (a property compared with
a constant, IN over constants, LIKE with a constant pattern) get specialised closures so that the
per-message cost is a dictionary lookup and a comparison.

User property names are case-insensitive, as the SQL filter docs state ("Property names are
case-insensitive"): an exact-case match is tried first (the fast, common case), then a
case-insensitive scan of the message's application properties.
"""

from __future__ import annotations

import operator
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sbemulator.amqp.types import Described, Timestamp

from . import nodes as ast
from . import sysprops, values
from .errors import FilterError, FilterEvaluationError
from .like import check_escape, check_pattern, like_matcher

ValueFn = Callable[[Any], Any]
PredFn = Callable[[Any], "bool | None"]

MISSING = object()
# One token's source text, to quote in an error message.
_TOKEN_TEXT = re.compile(r"'(?:[^']|'')*'?|\[(?:[^\]]|\]\])*\]?|\"(?:[^\"]|\"\")*\"?|@?\w+|\S")


# ---- property access ----------------------------------------------------------------------------
def find_user_key(props: Mapping[str, Any] | None, name: str) -> Any:
    """The key in ``props`` that names ``name`` (exact case first), or MISSING."""
    if not props:
        return MISSING
    if name in props:
        return name
    lname = name.lower()
    for k in props:
        if isinstance(k, str) and k.lower() == lname:
            return k
    return MISSING


def user_getter(name: str) -> ValueFn:
    lname = name.lower()

    def get(message: Any) -> Any:
        props = message.application_properties
        if not props:
            return None
        v = props.get(name, MISSING)
        if v is MISSING:
            for k, value in props.items():
                if isinstance(k, str) and k.lower() == lname:
                    v = value
                    break
            else:
                return None
        cls = v.__class__
        if cls is Timestamp or cls is Described:
            return values.from_amqp(v)
        return v

    return get


def sys_getter(name: str) -> ValueFn:
    sp = sysprops.lookup(name)
    assert sp is not None  # the parser only builds sys Props for known names
    return sp.getter


def property_by_name(message: Any, name: Any) -> Any:
    """The ``property(name)`` function: ``name`` may carry a ``sys.`` or ``user.`` scope."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise FilterEvaluationError("property() needs a string name")
    scope, _, rest = name.partition(".")
    if rest and scope.lower() == "sys":
        sp = sysprops.lookup(rest)
        if sp is None:
            raise FilterEvaluationError(f"the system property '{rest}' does not exist")
        return sp.getter(message)
    if rest and scope.lower() == "user":
        name = rest
    props = message.application_properties
    key = find_user_key(props, name)
    if key is MISSING:
        return None
    value = props[key]
    return values.from_amqp(value)


# ---- compiler -----------------------------------------------------------------------------------
class Compiler:
    def __init__(self, text: str, what: str, parameters: Mapping[str, Any] | None) -> None:
        self.text = text
        self.what = what
        self.parameters = {k.lstrip("@").lower(): v for k, v in (parameters or {}).items()}

    def fail(self, node: ast.Node, detail: str) -> FilterError:
        found = _TOKEN_TEXT.match(self.text, node.pos)
        near = found.group(0)[:30] if found else ""
        return FilterError(detail, node.pos, near, (), self.what)

    # ---- values ---------------------------------------------------------------------------------
    def value(self, node: ast.Node) -> ValueFn:
        """Compile an expression; predicates are not expressions in the documented grammar."""
        if isinstance(node, ast.PREDICATES):
            raise self.fail(node, "a predicate cannot be used as a value here")
        folded = self.fold(node)
        if isinstance(folded, ast.Const):
            c = folded.value
            return lambda m: c
        node = folded
        if isinstance(node, ast.Prop):
            return user_getter(node.name) if node.scope == "user" else sys_getter(node.name)
        if isinstance(node, ast.Func):
            if node.name == "newid":
                return lambda m: uuid.uuid4()
            arg = self.value(node.args[0])
            return lambda m: property_by_name(m, arg(m))
        if isinstance(node, ast.Unary):
            operand = self.value(node.operand)
            op = values.negate if node.op == "-" else values.plus

            def unary(m: Any) -> Any:
                v = operand(m)
                return None if v is None else op(v)

            return unary
        if isinstance(node, ast.Binary):
            left, right = self.value(node.left), self.value(node.right)
            fn = values.ARITHMETIC[node.op]

            def binary(m: Any) -> Any:
                a = left(m)
                if a is None:
                    return None
                b = right(m)
                if b is None:
                    return None
                return fn(a, b)

            return binary
        raise self.fail(node, f"unsupported expression {type(node).__name__}")  # pragma: no cover

    def fold(self, node: ast.Node) -> ast.Node:
        """Resolve parameters and compute constant sub-expressions once, at rule creation."""
        if isinstance(node, ast.Param):
            key = node.name.lstrip("@").lower()
            if key not in self.parameters:
                raise self.fail(node, f"no value was given for the parameter '{node.name}'")
            return ast.Const(node.pos, self.parameters[key])
        if isinstance(node, ast.Unary):
            operand = self.fold(node.operand)
            if isinstance(operand, ast.Const):
                if operand.value is None:
                    return operand
                try:
                    fn = values.negate if node.op == "-" else values.plus
                    return ast.Const(node.pos, fn(operand.value))
                except FilterEvaluationError as e:
                    raise self.fail(node, str(e))
            return ast.Unary(node.pos, node.op, operand)
        if isinstance(node, ast.Binary):
            left, right = self.fold(node.left), self.fold(node.right)
            if isinstance(left, ast.PREDICATES) or isinstance(right, ast.PREDICATES):
                bad = left if isinstance(left, ast.PREDICATES) else right
                raise self.fail(bad, "a predicate cannot be used as a value here")
            if isinstance(left, ast.Const) and isinstance(right, ast.Const):
                if left.value is None or right.value is None:
                    return ast.Const(node.pos, None)
                try:
                    return ast.Const(node.pos, values.ARITHMETIC[node.op](left.value, right.value))
                except FilterEvaluationError as e:
                    raise self.fail(node, str(e))
            return ast.Binary(node.pos, node.op, left, right)
        return node

    # ---- predicates -----------------------------------------------------------------------------
    def predicate(self, node: ast.Node) -> PredFn:
        method = getattr(self, "pred_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.value_as_predicate(node)

    def value_as_predicate(self, node: ast.Node) -> PredFn:
        """Only the constants TRUE and FALSE stand alone as conditions.

        The documented grammar has no bare ``<expression>`` in ``<predicate>``: ``flag`` must be
        written ``flag = TRUE``. Rejecting it at rule creation beats failing on every message.
        """
        if isinstance(node, ast.Const) and isinstance(node.value, bool):
            c = node.value
            return lambda m: c
        raise self.fail(node, "expected a predicate (a comparison, IS NULL, IN, LIKE, EXISTS, TRUE or FALSE)")

    def pred_Not(self, node: ast.Not) -> PredFn:
        operand = self.predicate(node.operand)

        def not_(m: Any) -> bool | None:
            v = operand(m)
            return None if v is None else not v

        return not_

    def _chain(self, node: ast.Node) -> list[PredFn]:
        """The operands of a chain of the same AND/OR, left to right, compiled (without recursion)."""
        kind = type(node)
        operands: list[ast.Node] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is kind:
                stack.append(n.right)  # type: ignore[attr-defined]
                stack.append(n.left)  # type: ignore[attr-defined]
            else:
                operands.append(n)
        return [self.predicate(o) for o in operands]

    def pred_And(self, node: ast.And) -> PredFn:
        fns = self._chain(node)
        if len(fns) > 2:
            return _and_all(tuple(fns))
        left, right = fns

        def and_(m: Any) -> bool | None:
            a = left(m)
            if a is False:
                return False
            b = right(m)
            if b is False:
                return False
            if a is None or b is None:
                return None
            return True

        return and_

    def pred_Or(self, node: ast.Or) -> PredFn:
        fns = self._chain(node)
        if len(fns) > 2:
            return _or_all(tuple(fns))
        left, right = fns

        def or_(m: Any) -> bool | None:
            a = left(m)
            if a is True:
                return True
            b = right(m)
            if b is True:
                return True
            if a is None or b is None:
                return None
            return False

        return or_

    def pred_Compare(self, node: ast.Compare) -> PredFn:
        left_node, right_node = self.fold(node.left), self.fold(node.right)
        cmp = values.COMPARATORS[node.op]
        # Put a constant on the right so that "'High' = Priority" gets the fast path too.
        if isinstance(left_node, ast.Const) and not isinstance(right_node, ast.Const):
            left_node, right_node = right_node, left_node
            cmp = values.COMPARATORS[_MIRROR[node.op]]
            op = _MIRROR[node.op]
        else:
            op = node.op
        left = self.value(left_node)
        if isinstance(right_node, ast.Const):
            c = right_node.value
            if c is None:
                return self._always_unknown(left)
            ctype = type(c)
            if op in ("=", "<>") and ctype in (str, int, float):
                want = op == "="
                fast_types = (str,) if ctype is str else (int, float)

                def compare_const_eq(m: Any) -> bool | None:
                    v = left(m)
                    if v is None:
                        return None
                    if v.__class__ in fast_types:
                        return (v == c) is want
                    return cmp(v, c)

                return compare_const_eq

            if ctype in (str, int, float):
                # Same-kind plain values compare directly; anything else goes through the
                # kind-checking comparator (mixed kinds, AMQP subclasses, booleans).
                fast_types = (str,) if ctype is str else (int, float)
                raw = _RAW_OPS[op]

                def compare_const_fast(m: Any) -> bool | None:
                    v = left(m)
                    if v is None:
                        return None
                    if v.__class__ in fast_types:
                        return raw(v, c)
                    return cmp(v, c)

                return compare_const_fast

            def compare_const(m: Any) -> bool | None:
                v = left(m)
                if v is None:
                    return None
                return cmp(v, c)

            return compare_const
        right = self.value(right_node)

        def compare(m: Any) -> bool | None:
            a = left(m)
            if a is None:
                return None
            b = right(m)
            if b is None:
                return None
            return cmp(a, b)

        return compare

    @staticmethod
    def _always_unknown(operand: ValueFn) -> PredFn:
        def unknown(m: Any) -> None:
            operand(m)  # still evaluated: a runtime error in it is still an error
            return None

        return unknown

    def pred_IsNull(self, node: ast.IsNull) -> PredFn:
        operand = self.value(node.operand)
        if node.negated:
            return lambda m: operand(m) is not None
        return lambda m: operand(m) is None

    def pred_Exists(self, node: ast.Exists) -> PredFn:
        prop = node.prop
        if prop.scope == "sys":
            get = sys_getter(prop.name)
            return lambda m: get(m) is not None
        name = prop.name
        return lambda m: find_user_key(m.application_properties, name) is not MISSING

    def pred_In(self, node: ast.In) -> PredFn:
        operand = self.value(node.operand)
        items = [self.fold(i) for i in node.items]
        negated = node.negated
        consts = [i for i in items if isinstance(i, ast.Const)]
        if len(consts) == len(items):
            by_kind: dict[str, set[Any]] = {}
            has_null = False
            for i in consts:
                if i.value is None:
                    has_null = True
                else:
                    by_kind.setdefault(values.kind(i.value), set()).add(_hashable(i.value))

            def in_consts(m: Any) -> bool | None:
                v = operand(m)
                if v is None:
                    return None
                candidates = by_kind.get(values.kind(v))
                if candidates is not None:
                    try:
                        if _hashable(v) in candidates:
                            return not negated
                    except TypeError:  # an unhashable value (AMQP list or map) equals no constant
                        pass
                return None if has_null else negated

            return in_consts
        item_fns = [self.value(i) for i in items]

        def in_exprs(m: Any) -> bool | None:
            v = operand(m)
            if v is None:
                return None
            saw_null = False
            for f in item_fns:
                x = f(m)
                if x is None:
                    saw_null = True
                elif values.equals(v, x):
                    return not negated
            return None if saw_null else negated

        return in_exprs

    def pred_Like(self, node: ast.Like) -> PredFn:
        operand = self.value(node.operand)
        pattern_node = self.fold(node.pattern)
        escape_node = self.fold(node.escape) if node.escape is not None else None
        negated = node.negated
        constant_escape = escape_node is None or isinstance(escape_node, ast.Const)
        if isinstance(pattern_node, ast.Const) and constant_escape:
            assert escape_node is None or isinstance(escape_node, ast.Const)
            if pattern_node.value is None or (escape_node is not None and escape_node.value is None):
                return self._always_unknown(operand)
            try:
                escape = check_escape(escape_node.value if escape_node is not None else None)
                matcher = like_matcher(check_pattern(pattern_node.value), escape)
            except FilterEvaluationError as e:
                raise self.fail(node.pattern if "pattern" in str(e) else (node.escape or node), str(e))

            def like_const(m: Any) -> bool | None:
                v = operand(m)
                if v is None:
                    return None
                if not isinstance(v, str):
                    return negated
                return matcher(v) is not negated

            return like_const
        pattern_fn = self.value(pattern_node)
        escape_fn = self.value(escape_node) if escape_node is not None else None

        def like_dynamic(m: Any) -> bool | None:
            v = operand(m)
            if v is None:
                return None
            p = pattern_fn(m)
            if p is None:
                return None
            e = escape_fn(m) if escape_fn is not None else None
            if escape_fn is not None and e is None:
                return None
            if not isinstance(v, str):
                return negated
            matcher = like_matcher(check_pattern(p), check_escape(e))
            return matcher(v) is not negated

        return like_dynamic


def _and_all(fns: tuple[PredFn, ...]) -> PredFn:
    def and_all(m: Any) -> bool | None:
        unknown = False
        for f in fns:
            v = f(m)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True

    return and_all


def _or_all(fns: tuple[PredFn, ...]) -> PredFn:
    def or_all(m: Any) -> bool | None:
        unknown = False
        for f in fns:
            v = f(m)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False

    return or_all


_RAW_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "=": operator.eq, "<>": operator.ne}
_MIRROR = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _hashable(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


def compile_predicate(node: ast.Node, text: str, parameters: Mapping[str, Any] | None = None) -> PredFn:
    return Compiler(text, "SQL filter", parameters).predicate(node)
