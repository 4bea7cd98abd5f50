"""LIKE pattern matching: ``%`` is any run of characters, ``_`` exactly one, ESCAPE makes the next
character literal. Everything else is literal, including regular-expression metacharacters and
``[``, which the Service Bus docs do not list as a wildcard (unlike T-SQL).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import FilterEvaluationError


def check_pattern(p: Any) -> str:
    if not isinstance(p, str):
        raise FilterEvaluationError("the LIKE pattern must be a string")
    return p


def check_escape(e: Any) -> str | None:
    if e is None:
        return None
    if not isinstance(e, str) or len(e) != 1:
        raise FilterEvaluationError("the ESCAPE character must be a string of length 1")
    return e


_like_cache: dict[tuple[str, str | None], Callable[[str], bool]] = {}


def like_matcher(pattern: str, escape: str | None) -> Callable[[str], bool]:
    """A function telling whether a string matches a LIKE pattern (``%`` any run, ``_`` one char).

    Matching is case-sensitive (ordinal), like string equality. Patterns that are a literal with
    ``%`` only at the ends become startswith/endswith/in tests instead of regular expressions.
    """
    key = (pattern, escape)
    cached = _like_cache.get(key)
    if cached is not None:
        return cached
    tokens: list[tuple[str, str]] = []  # ("lit", text) | ("any", "") | ("one", "")
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 >= n:
                raise FilterEvaluationError("the LIKE pattern ends with the escape character")
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            tokens.append(("any", ""))
        elif c == "_":
            tokens.append(("one", ""))
        else:
            tokens.append(("lit", c))
        i += 1
    # Merge literal runs.
    merged: list[tuple[str, str]] = []
    for kind, text in tokens:
        if kind == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + text)
        elif kind == "any" and merged and merged[-1][0] == "any":
            continue
        else:
            merged.append((kind, text))
    shape = tuple(k for k, _ in merged)
    lits = [t for k, t in merged if k == "lit"]
    matcher: Callable[[str], bool]
    if shape == ():
        matcher = lambda s: s == ""  # noqa: E731
    elif shape == ("lit",):
        lit = lits[0]
        matcher = lambda s: s == lit  # noqa: E731
    elif shape == ("any",):
        matcher = lambda s: True  # noqa: E731
    elif shape == ("lit", "any"):
        lit = lits[0]
        matcher = lambda s: s.startswith(lit)  # noqa: E731
    elif shape == ("any", "lit"):
        lit = lits[0]
        matcher = lambda s: s.endswith(lit)  # noqa: E731
    elif shape == ("any", "lit", "any"):
        lit = lits[0]
        matcher = lambda s: lit in s  # noqa: E731
    else:
        regex = "".join(
            re.escape(t) if k == "lit" else (".*" if k == "any" else ".") for k, t in merged
        )
        fullmatch = re.compile(regex, re.DOTALL).fullmatch
        matcher = lambda s: fullmatch(s) is not None  # noqa: E731
    if len(_like_cache) < 1024:
        _like_cache[key] = matcher
    return matcher
