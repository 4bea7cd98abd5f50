"""Tokenizer for the Service Bus SQL filter and action languages.

Words come out as ``ID`` tokens whatever their spelling: whether a word is a keyword depends on
where the parser is (``SET`` is a keyword only at the start of an action statement), so the parser
decides. Bracketed ``[...]`` and double-quoted ``"..."`` names come out as ``QID`` tokens, which are
never keywords.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import FilterError

# Token kinds.
ID = "ID"
QID = "QID"
STR = "STR"
NUM = "NUM"
PARAM = "PARAM"
OP = "OP"
EOF = "EOF"

_TWO_CHAR_OPS = frozenset({"<>", "!=", ">=", "<="})
_ONE_CHAR_OPS = frozenset("=<>+-*/%(),.;")
_INT64_MAX = 2**63


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    value: Any
    pos: int
    text: str  # the source text, for error messages

    def is_word(self, word: str) -> bool:
        """True for an unquoted word spelled ``word`` in any case (keywords are case-insensitive)."""
        return self.kind == ID and self.value.upper() == word

    def is_op(self, op: str) -> bool:
        return self.kind == OP and self.value == op


def _is_ident_start(c: str) -> bool:
    return c.isalpha()


def _is_ident_part(c: str) -> bool:
    return c.isalpha() or c.isdecimal() or c == "_"


def _is_ascii_digit(c: str) -> bool:
    return "0" <= c <= "9"


def tokenize(text: str, what: str = "SQL filter") -> list[Token]:
    """Split ``text`` into tokens, ending with an ``EOF`` token at ``len(text)``."""
    tokens: list[Token] = []
    i = 0
    n = len(text)
    value: str | int | float
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        start = i
        if c == "'":
            value, i = _read_quoted(text, i, "'", "'", what, "string constant")
            tokens.append(Token(STR, value, start, text[start:i]))
        elif c == "[":
            value, i = _read_quoted(text, i, "[", "]", what, "delimited identifier")
            tokens.append(Token(QID, value, start, text[start:i]))
        elif c == '"':
            value, i = _read_quoted(text, i, '"', '"', what, "quoted identifier")
            tokens.append(Token(QID, value, start, text[start:i]))
        elif _is_ascii_digit(c) or (c == "." and i + 1 < n and _is_ascii_digit(text[i + 1])):
            value, i = _read_number(text, i, what)
            tokens.append(Token(NUM, value, start, text[start:i]))
        elif _is_ident_start(c):
            i += 1
            while i < n and _is_ident_part(text[i]):
                i += 1
            tokens.append(Token(ID, text[start:i], start, text[start:i]))
        elif c == "@":
            i += 1
            while i < n and (_is_ident_part(text[i]) or text[i] == "@"):
                i += 1
            if i == start + 1:
                raise FilterError("expected a parameter name after '@'", start, "@",
                                  ("parameter name",), what)
            tokens.append(Token(PARAM, text[start:i], start, text[start:i]))
        elif text[i:i + 2] in _TWO_CHAR_OPS:
            i += 2
            tokens.append(Token(OP, text[start:i], start, text[start:i]))
        elif c in _ONE_CHAR_OPS:
            i += 1
            tokens.append(Token(OP, c, start, c))
        else:
            raise FilterError(f"unexpected character {c!r}", start, c, ("operator", "operand"), what)
    tokens.append(Token(EOF, None, n, ""))
    return tokens


def _read_quoted(text: str, i: int, opener: str, closer: str, what: str, name: str) -> tuple[str, int]:
    """Read a quoted token starting at ``text[i] == opener``; a doubled closer stands for itself."""
    start = i
    i += 1
    parts: list[str] = []
    n = len(text)
    while True:
        j = text.find(closer, i)
        if j < 0:
            raise FilterError(f"unterminated {name}", start, text[start:start + 20],
                              (f"closing {closer}",), what)
        parts.append(text[i:j])
        if j + 1 < n and text[j + 1] == closer:
            parts.append(closer)
            i = j + 2
            continue
        return "".join(parts), j + 1


def _read_number(text: str, i: int, what: str) -> tuple[int | float, int]:
    start = i
    n = len(text)

    def digits(k: int) -> int:
        while k < n and text[k].isascii() and text[k].isdigit():
            k += 1
        return k

    i = digits(i)
    is_float = False
    if i < n and text[i] == ".":
        is_float = True
        i = digits(i + 1)
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        k = digits(j)
        if k == j:
            raise FilterError("malformed number: exponent has no digits", start, text[start:k],
                              ("exponent digits",), what)
        is_float = True
        i = k
    literal = text[start:i]
    if is_float:
        return float(literal), i
    value = int(literal)
    if value > _INT64_MAX:
        # 2**63 itself is let through so that -9223372036854775808 can be written; the parser
        # rejects it anywhere else.
        raise FilterError("integer constant is out of the Int64 range", start, literal,
                          ("a number between -9223372036854775808 and 9223372036854775807",), what)
    return value, i
