"""Recursive-descent parser for SQL filter predicates and SQL rule action statements.

Precedence, loosest first (as in T-SQL): OR, AND, NOT, comparisons / IS NULL / IN / LIKE, binary
``+ -``, binary ``* / %``, unary ``+ -``. Keywords and ``sys`` / ``user`` scopes are matched in any
letter case. Errors carry the offending token's position and what would have been accepted there.
"""

from __future__ import annotations

from . import nodes as ast
from . import sysprops
from .errors import FilterError
from .lexer import EOF, ID, NUM, OP, PARAM, QID, STR, Token, tokenize

# Words that can never be a bare property name (use [Name] for a property called e.g. "Like").
RESERVED = frozenset({"AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "ESCAPE", "EXISTS", "TRUE", "FALSE"})
_COMPARISON_OPS = {"=": "=", "<>": "<>", "!=": "<>", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
_EXPRESSION_START = ("constant", "property", "function", "'('", "unary + or -")
# Service Bus limits (quotas page / SqlRuleFilter and SqlRuleAction docs).
MAX_EXPRESSION_LENGTH = 1024
MAX_ACTION_STATEMENTS = 32
# Nesting of parentheses, NOT and unary operators while parsing, and depth of the parsed tree
# (a chain of ANDs or of ORs counts as one level: it is compiled to a loop). Both keep the
# recursion of the parser, the compiler and the compiled closures far below Python's limit.
MAX_NESTING = 64
MAX_TREE_DEPTH = 100


class Parser:
    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.what = what
        if len(text) > MAX_EXPRESSION_LENGTH:
            detail = f"the expression is {len(text)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
            near = text[MAX_EXPRESSION_LENGTH:MAX_EXPRESSION_LENGTH + 20]
            raise FilterError(detail, MAX_EXPRESSION_LENGTH, near, (), what)
        self.tokens = tokenize(text, what)
        self.i = 0
        self.depth = 0

    def nest(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error((), tok, f"the expression is nested more than {MAX_NESTING} levels deep")

    # ---- token helpers --------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        t = self.tokens[self.i]
        if t.kind != EOF:
            self.i += 1
        return t

    def error(self, expected: tuple[str, ...], tok: Token | None = None,
              detail: str | None = None) -> FilterError:
        t = tok or self.tok
        if detail is None:
            detail = "expected " + _join(expected)
        return FilterError(detail, t.pos, t.text[:30], expected, self.what)

    def expect_op(self, op: str) -> Token:
        if not self.tok.is_op(op):
            raise self.error((f"'{op}'",))
        return self.advance()

    def accept_word(self, word: str) -> bool:
        if self.tok.is_word(word):
            self.advance()
            return True
        return False

    # ---- entry points ---------------------------------------------------------------------------
    def parse_filter(self) -> ast.Node:
        if self.tok.kind == EOF:
            raise self.error(("predicate",), detail="the expression is empty")
        node = self.parse_or()
        if self.tok.kind != EOF:
            raise self.error(("AND", "OR", "end of expression"))
        return node

    def parse_actions(self) -> list[ast.Node]:
        statements: list[ast.Node] = []
        while self.accept_op(";"):
            pass
        if self.tok.kind == EOF:
            raise self.error(("SET", "REMOVE"), detail="the action is empty")
        while self.tok.kind != EOF:
            if len(statements) == MAX_ACTION_STATEMENTS:
                raise self.error((), detail=f"an action can have at most {MAX_ACTION_STATEMENTS} statements")
            statements.append(self.parse_statement())
            if self.tok.kind != EOF and not self.tok.is_op(";") and not (
                self.tok.is_word("SET") or self.tok.is_word("REMOVE")
            ):
                raise self.error(("operator", "';'", "SET", "REMOVE", "end of expression"))
            while self.accept_op(";"):
                pass
        return statements

    def accept_op(self, op: str) -> bool:
        if self.tok.is_op(op):
            self.advance()
            return True
        return False

    def parse_statement(self) -> ast.Node:
        t = self.tok
        if self.accept_word("SET"):
            target = self.parse_property_ref(for_write=True)
            self.expect_op("=")
            value = self.parse_expression()
            return ast.SetAction(t.pos, target, value)
        if self.accept_word("REMOVE"):
            return ast.RemoveAction(t.pos, self.parse_property_ref(for_write=True))
        raise self.error(("SET", "REMOVE"))

    # ---- predicates -----------------------------------------------------------------------------
    def parse_or(self) -> ast.Node:
        left = self.parse_and()
        while self.tok.is_word("OR"):
            self.advance()
            left = ast.Or(left.pos, left, self.parse_and())
        return left

    def parse_and(self) -> ast.Node:
        left = self.parse_not()
        while self.tok.is_word("AND"):
            self.advance()
            left = ast.And(left.pos, left, self.parse_not())
        return left

    def parse_not(self) -> ast.Node:
        if self.tok.is_word("NOT"):
            t = self.advance()
            self.nest(t)
            node = ast.Not(t.pos, self.parse_not())
            self.depth -= 1
            return node
        return self.parse_comparison()

    def parse_comparison(self) -> ast.Node:
        t = self.tok
        if t.is_word("EXISTS"):
            self.advance()
            self.expect_op("(")
            prop = self.parse_property_ref(for_write=False)
            self.expect_op(")")
            return ast.Exists(t.pos, prop)
        left = self.parse_expression()
        t = self.tok
        if t.kind == OP and t.value in _COMPARISON_OPS:
            self.advance()
            return ast.Compare(left.pos, _COMPARISON_OPS[t.value], left, self.parse_expression())
        if t.is_word("IS"):
            self.advance()
            negated = self.accept_word("NOT")
            if not self.accept_word("NULL"):
                raise self.error(("NULL", "NOT NULL") if not negated else ("NULL",))
            return ast.IsNull(left.pos, left, negated)
        negated = False
        if t.is_word("NOT"):
            nxt = self.peek()
            if not (nxt.is_word("IN") or nxt.is_word("LIKE")):
                self.advance()
                raise self.error(("IN", "LIKE"))
            self.advance()
            negated = True
        if self.tok.is_word("IN"):
            self.advance()
            self.expect_op("(")
            items = [self.parse_expression()]
            while self.accept_op(","):
                items.append(self.parse_expression())
            if not self.tok.is_op(")"):
                raise self.error(("','", "')'"))
            self.advance()
            return ast.In(left.pos, left, items, negated)
        if self.tok.is_word("LIKE"):
            self.advance()
            pattern = self.parse_expression()
            escape = None
            if self.accept_word("ESCAPE"):
                escape = self.parse_expression()
            return ast.Like(left.pos, left, pattern, escape, negated)
        return left

    # ---- expressions ----------------------------------------------------------------------------
    def parse_expression(self) -> ast.Node:
        left = self.parse_term()
        while self.tok.kind == OP and self.tok.value in ("+", "-"):
            t = self.advance()
            left = ast.Binary(left.pos, t.value, left, self.parse_term())
        return left

    def parse_term(self) -> ast.Node:
        left = self.parse_unary()
        while self.tok.kind == OP and self.tok.value in ("*", "/", "%"):
            t = self.advance()
            left = ast.Binary(left.pos, t.value, left, self.parse_unary())
        return left

    def parse_unary(self) -> ast.Node:
        t = self.tok
        if t.kind == OP and t.value in ("+", "-"):
            self.advance()
            n = self.tok
            if t.value == "-" and n.kind == NUM:
                # Fold "-literal" here so that -9223372036854775808 (Int64.MinValue) is allowed.
                self.advance()
                return ast.Const(t.pos, -n.value)
            self.nest(t)
            operand = self.parse_unary()
            self.depth -= 1
            if isinstance(operand, ast.Const) and type(operand.value) in (int, float):
                return ast.Const(t.pos, -operand.value if t.value == "-" else operand.value)
            return ast.Unary(t.pos, t.value, operand)
        return self.parse_primary()

    def parse_primary(self) -> ast.Node:
        t = self.tok
        if t.kind == NUM:
            self.advance()
            if type(t.value) is int and t.value >= 2**63:
                raise self.error((), t, "integer constant is out of the Int64 range")
            return ast.Const(t.pos, t.value)
        if t.kind == STR:
            self.advance()
            return ast.Const(t.pos, t.value)
        if t.kind == PARAM:
            self.advance()
            return ast.Param(t.pos, t.value)
        if t.is_op("("):
            self.advance()
            self.nest(t)
            node = self.parse_or()
            self.depth -= 1
            if not self.tok.is_op(")"):
                raise self.error(("')'", "AND", "OR") if isinstance(node, ast.PREDICATES)
                                 else ("')'", "operator"))
            self.advance()
            return node
        if t.kind == ID:
            word = t.value.upper()
            if word == "TRUE":
                self.advance()
                return ast.Const(t.pos, True)
            if word == "FALSE":
                self.advance()
                return ast.Const(t.pos, False)
            if word == "NULL":
                self.advance()
                return ast.Const(t.pos, None)
            if word in RESERVED:
                raise self.error(_EXPRESSION_START)
            if self.peek().is_op("("):
                return self.parse_function()
            return self.parse_property_ref(for_write=False)
        if t.kind == QID:
            return self.parse_property_ref(for_write=False)
        raise self.error(_EXPRESSION_START)

    def parse_function(self) -> ast.Node:
        t = self.advance()
        name = t.value.lower()
        self.expect_op("(")
        if name == "newid":
            self.expect_op(")")
            return ast.Func(t.pos, "newid", [])
        if name in ("property", "p"):
            arg = self.parse_expression()
            self.expect_op(")")
            return ast.Func(t.pos, "property", [arg])
        raise self.error(("newid", "property", "p"), t, f"unknown function '{t.value}'")

    def parse_property_ref(self, for_write: bool) -> ast.Prop:
        t = self.tok
        if t.kind not in (ID, QID) or (t.kind == ID and t.value.upper() in RESERVED):
            raise self.error(("property name",))
        self.advance()
        if self.tok.is_op("."):
            scope = t.value.lower()
            if scope not in ("sys", "user"):
                raise self.error(("sys", "user"), t, f"unknown scope '{t.value}': expected sys or user")
            self.advance()
            n = self.tok
            if n.kind not in (ID, QID):
                raise self.error(("property name",))
            self.advance()
            if scope == "sys":
                sp = sysprops.lookup(n.value)
                if sp is None:
                    raise self.error((), n, f"the system property '{n.value}' does not exist")
                if for_write and not sp.settable:
                    raise self.error((), n, f"the system property '{sp.name}' cannot be changed")
                return ast.Prop(t.pos, "sys", sp.name)
            return ast.Prop(t.pos, "user", n.value)
        return ast.Prop(t.pos, "user", t.value)


def _join(items: tuple[str, ...]) -> str:
    if not items:
        return "something else"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]


def _children(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Not | ast.Unary | ast.IsNull):
        return [node.operand]
    if isinstance(node, ast.And | ast.Or | ast.Compare | ast.Binary):
        return [node.left, node.right]
    if isinstance(node, ast.In):
        return [node.operand, *node.items]
    if isinstance(node, ast.Like):
        return [node.operand, node.pattern] + ([node.escape] if node.escape is not None else [])
    if isinstance(node, ast.Func):
        return list(node.args)
    if isinstance(node, ast.SetAction):
        return [node.value]
    return []


def check_depth(node: ast.Node, text: str, what: str) -> None:
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise FilterError(f"the expression is nested more than {MAX_TREE_DEPTH} levels deep", n.pos,
                              text[n.pos:n.pos + 20].split(" ")[0], (), what)
        for child in _children(n):
            same_chain = isinstance(n, ast.And | ast.Or) and type(child) is type(n)
            stack.append((child, depth if same_chain else depth + 1))


def parse_filter(text: str) -> ast.Node:
    node = Parser(text, "SQL filter").parse_filter()
    check_depth(node, text, "SQL filter")
    return node


def parse_action(text: str) -> list[ast.Node]:
    statements = Parser(text, "SQL action").parse_actions()
    for st in statements:
        check_depth(st, text, "SQL action")
    return statements
