"""Go ``regexp`` (RE2 syntax) patterns, as kube-apiserver evaluates the OpenAPI ``pattern`` of a CRD.

Kubernetes compiles a schema's ``pattern`` with Go's ``regexp`` and checks a string with ``MatchString``: an
unanchored search. Python's ``re`` reads the same text differently (``$`` also matches before a final newline,
``\\d`` and ``\\w`` are Unicode-wide, ``\\z`` is unknown, lookarounds and backreferences exist) and it
backtracks: ``^(a+)+$`` against 30 ``a`` and a ``!`` takes minutes, which would stop the whole API server.
So this module does not translate to ``re``. It parses Go's syntax itself (with Go's error messages for what Go
rejects), builds a Thompson NFA and searches with a lazily built DFA: time linear in the string, the RE2
guarantee. The DFA states and the answers for recent strings are cached on the compiled pattern.

Divergences from Go (documented in docs/karmada-compatibility.md): ``\\p{...}`` takes the Unicode general
categories (``L``, ``Lu``, ``Nd``, ...) and ``Any`` from Python's Unicode database, not scripts (``\\p{Greek}``
is refused as an unsupported class); the limits on nesting (1000 groups) and on the compiled size are this
module's, close to Go's but not computed the same way.
"""

from __future__ import annotations

import bisect
import sys
import unicodedata
from collections.abc import Iterable
from typing import Any

MAX_RUNE = 0x10FFFF
_MAX_REPEAT = 1000  # Go's limit on {n,m}, alone and nested
_MAX_DEPTH = 1000  # Go's maxHeight, counted here as nested groups
_MAX_PROGRAM = 200_000  # NFA instructions (Go: about 3 million, with much smaller instructions)

# error codes, worded as Go's regexp/syntax ErrorCode
ERR_INVALID_CHAR_CLASS = "invalid character class"
ERR_INVALID_CHAR_RANGE = "invalid character class range"
ERR_INVALID_ESCAPE = "invalid escape sequence"
ERR_INVALID_NAMED_CAPTURE = "invalid named capture"
ERR_INVALID_PERL_OP = "invalid or unsupported Perl syntax"
ERR_INVALID_REPEAT_OP = "invalid nested repetition operator"
ERR_INVALID_REPEAT_SIZE = "invalid repeat count"
ERR_MISSING_BRACKET = "missing closing ]"
ERR_MISSING_PAREN = "missing closing )"
ERR_MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
ERR_TRAILING_BACKSLASH = "trailing backslash at end of expression"
ERR_UNEXPECTED_PAREN = "unexpected )"
ERR_NESTING_DEPTH = "expression nests too deeply"
ERR_LARGE = "expression too large"


class GoRegexpError(ValueError):
    """What Go's ``regexp.Compile`` returns for a pattern it rejects: ``error parsing regexp: CODE: `EXPR```."""

    def __init__(self, code: str, expr: str, note: str = "") -> None:
        self.code = code
        self.expr = expr
        self.note = note
        text = f"error parsing regexp: {code}: `{expr}`"
        super().__init__(f"{text} ({note})" if note else text)


Ranges = tuple[tuple[int, int], ...]

# -- character sets ---------------------------------------------------------------------------------


def _normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _negate(ranges: Ranges) -> Ranges:
    out = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_RUNE:
        out.append((nxt, MAX_RUNE))
    return tuple(out)


def _r(*pairs: str) -> Ranges:
    return _normalize((ord(p[0]), ord(p[-1])) for p in pairs)


_PERL = {"d": _r("09"), "s": _r("\t\n", "\f\r", " "), "w": _r("09", "AZ", "az", "_")}
_POSIX = {
    "alnum": _r("09", "AZ", "az"),
    "alpha": _r("AZ", "az"),
    "ascii": ((0, 0x7F),),
    "blank": _r("\t", " "),
    "cntrl": ((0, 0x1F), (0x7F, 0x7F)),
    "digit": _r("09"),
    "graph": _r("!~"),
    "lower": _r("az"),
    "print": _r(" ~"),
    "punct": _r("!/", ":@", "[`", "{~"),
    "space": _r("\t\r", " "),
    "upper": _r("AZ"),
    "word": _r("09", "AZ", "az", "_"),
    "xdigit": _r("09", "AF", "af"),
}
_GO_CATEGORIES = frozenset(
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs".split()
)
_category_table: dict[str, Ranges] | None = None


def _unicode_category(name: str) -> Ranges | None:
    """``\\p{name}``: ``Any`` or a general category as Go names them (``C`` is Cc, Cf, Co and Cs, as in Go)."""
    global _category_table
    if name == "Any":
        return ((0, MAX_RUNE),)
    if name not in _GO_CATEGORIES:
        return None
    if _category_table is None:
        spans: dict[str, list[tuple[int, int]]] = {}
        cat_of = unicodedata.category
        start, current = 0, cat_of("\0")
        for cp in range(1, MAX_RUNE + 2):
            cat = cat_of(chr(cp)) if cp <= MAX_RUNE else ""
            if cat != current:
                spans.setdefault(current, []).append((start, cp - 1))
                start, current = cp, cat
        table = {k: _normalize(v) for k, v in spans.items()}
        for major in "LMNPSZ":
            table[major] = _normalize(r for k, v in table.items() if len(k) == 2 and k[0] == major for r in v)
        table["C"] = _normalize(r for k in ("Cc", "Cf", "Co", "Cs") for r in table.get(k, ()))
        _category_table = table
    return _category_table.get(name, ())


_fold_orbits: dict[int, tuple[int, ...]] | None = None
_fold_keys: list[int] = []
_MIN_FOLD, _MAX_FOLD = 0x41, 0x1E943  # outside these no character has a simple case fold (as in Go)


def _orbits() -> dict[int, tuple[int, ...]]:
    """Simple case-folding orbits: the characters ``(?i)`` treats as one (``k``, ``K``, the Kelvin sign)."""
    global _fold_orbits, _fold_keys
    if _fold_orbits is None:
        groups: dict[str, list[int]] = {}
        for cp in range(_MIN_FOLD, _MAX_FOLD + 1):
            ch = chr(cp)
            key = ch.casefold()
            if len(key) != 1:
                low = ch.lower()
                key = low if len(low) == 1 else ch
            groups.setdefault(key, []).append(cp)
        _fold_orbits = {cp: tuple(g) for g in groups.values() if len(g) > 1 for cp in g}
        _fold_keys = sorted(_fold_orbits)
    return _fold_orbits


def _fold(ranges: Ranges) -> Ranges:
    orbits = _orbits()
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if lo <= _MIN_FOLD and hi >= _MAX_FOLD:
            continue  # already holds every character that folds
        i = bisect.bisect_left(_fold_keys, lo)
        while i < len(_fold_keys) and _fold_keys[i] <= hi:
            extra.extend((c, c) for c in orbits[_fold_keys[i]])
            i += 1
    return _normalize((*ranges, *extra)) if extra else ranges


# -- parser -----------------------------------------------------------------------------------------
#
# Nodes: ("set", Ranges) one character; ("cat", [nodes]); ("alt", [nodes]); ("rep", node, min, max) with max -1
# for no bound; ("assert", kind) an empty-width test; ("empty",).

BOT, EOT, BOL, EOL, WORDB, NWORDB = range(6)
_FOLD, _MULTILINE, _DOTNL = 1, 2, 4
_NOT_NL = _negate(((10, 10),))
_ALL = ((0, MAX_RUNE),)


def _isalnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _unhex(c: str) -> int:
    return int(c, 16) if c and c in "0123456789abcdefABCDEF" else -1


def _parse_int(s: str, i: int) -> tuple[int, int] | None:
    """Go's parseInt: (value or -1 when too big, index after) or None; no leading zeros."""
    if i >= len(s) or not "0" <= s[i] <= "9":
        return None
    if s[i] == "0" and i + 1 < len(s) and "0" <= s[i + 1] <= "9":
        return None
    j = i
    while j < len(s) and "0" <= s[j] <= "9":
        j += 1
    digits = s[i:j]
    return (int(digits) if len(digits) <= 8 else -1), j


def _parse_repeat(s: str, i: int) -> tuple[int, int, int] | None:
    """``{n}``, ``{n,}``, ``{n,m}`` at ``s[i]``: (min, max, index after) or None (then ``{`` is a literal)."""
    got = _parse_int(s, i + 1)
    if got is None:
        return None
    lo, j = got
    if j >= len(s):
        return None
    if s[j] != ",":
        hi = lo
    else:
        j += 1
        if j >= len(s):
            return None
        if s[j] == "}":
            hi = -1
        else:
            got = _parse_int(s, j)
            if got is None:
                return None
            hi, j = got
            if hi < 0:
                lo = -1
    if j >= len(s) or s[j] != "}":
        return None
    return lo, hi, j + 1


def _repeat_is_valid(node: Any, n: int) -> bool:
    """Go's repeatIsValid: nested ``{n,m}`` may not make more than 1000 copies of anything."""
    stack = [(node, n)]
    while stack:
        x, budget = stack.pop()
        if x[0] == "rep":
            if x[4]:  # {n,m}; stars, pluses and question marks do not count
                m = x[3] if x[3] >= 0 else x[2]
                if x[3] == 0:
                    continue
                if m > budget:
                    return False
                if m > 0:
                    budget //= m
            stack.append((x[1], budget))
        elif x[0] in ("cat", "alt"):
            stack.extend((sub, budget) for sub in x[1])
    return True


class _Frame:
    __slots__ = ("alts", "cat", "flags")

    def __init__(self, flags: int) -> None:
        self.alts: list[Any] = []
        self.cat: list[Any] = []
        self.flags = flags

    def close(self) -> Any:
        self.alts.append(_cat(self.cat))
        return self.alts[0] if len(self.alts) == 1 else ("alt", self.alts)


def _cat(items: list[Any]) -> Any:
    if not items:
        return ("empty",)
    return items[0] if len(items) == 1 else ("cat", items)


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.s = pattern

    def parse(self) -> Any:
        s = self.s
        flags = 0
        stack: list[_Frame] = [_Frame(flags)]
        last_repeat: int | None = None  # where the previous token began, if it was a repetition
        i = 0
        n = len(s)
        while i < n:
            frame = stack[-1]
            c = s[i]
            repeat_at: int | None = None
            if c == "(":
                if i + 1 < n and s[i + 1] == "?":
                    i, new_flags, opens = self._perl_flags(i, flags)
                    if opens:
                        stack.append(_Frame(flags))
                        if len(stack) > _MAX_DEPTH:
                            raise GoRegexpError(ERR_NESTING_DEPTH, s)
                    flags = new_flags
                else:
                    stack.append(_Frame(flags))
                    if len(stack) > _MAX_DEPTH:
                        raise GoRegexpError(ERR_NESTING_DEPTH, s)
                    i += 1
            elif c == "|":
                frame.alts.append(_cat(frame.cat))
                frame.cat = []
                i += 1
            elif c == ")":
                if len(stack) < 2:
                    raise GoRegexpError(ERR_UNEXPECTED_PAREN, s)
                stack.pop()
                flags = frame.flags
                stack[-1].cat.append(frame.close())
                i += 1
            elif c == "^":
                frame.cat.append(("assert", BOL if flags & _MULTILINE else BOT))
                i += 1
            elif c == "$":
                frame.cat.append(("assert", EOL if flags & _MULTILINE else EOT))
                i += 1
            elif c == ".":
                frame.cat.append(("set", _ALL if flags & _DOTNL else _NOT_NL))
                i += 1
            elif c == "[":
                ranges, i = self._class(i, flags)
                frame.cat.append(("set", ranges))
            elif c in "*+?":
                after = i + 1
                if after < n and s[after] == "?":
                    after += 1
                lo, hi = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[c]
                self._repeat(frame, i, after, last_repeat, lo, hi, counted=False)
                repeat_at = i
                i = after
            elif c == "{":
                got = _parse_repeat(s, i)
                if got is None:
                    frame.cat.append(self._literal(ord("{"), flags))
                    i += 1
                else:
                    lo, hi, after = got
                    if lo < 0 or lo > _MAX_REPEAT or hi > _MAX_REPEAT or (hi >= 0 and lo > hi):
                        raise GoRegexpError(ERR_INVALID_REPEAT_SIZE, s[i:after])
                    if after < n and s[after] == "?":
                        after += 1
                    self._repeat(frame, i, after, last_repeat, lo, hi, counted=True)
                    repeat_at = i
                    i = after
            elif c == "\\":
                i = self._backslash(frame, i, flags)
            else:
                frame.cat.append(self._literal(ord(c), flags))
                i += 1
            last_repeat = repeat_at
        if len(stack) != 1:
            raise GoRegexpError(ERR_MISSING_PAREN, s)
        return stack[0].close()

    def _repeat(self, frame: _Frame, start: int, after: int, last_repeat: int | None, lo: int, hi: int,
                *, counted: bool) -> None:
        if last_repeat is not None:
            raise GoRegexpError(ERR_INVALID_REPEAT_OP, self.s[last_repeat:after])
        if not frame.cat:
            raise GoRegexpError(ERR_MISSING_REPEAT_ARGUMENT, self.s[start:after])
        # the last element: True marks a {n,m} (Go's OpRepeat), which counts towards the nesting limit
        node = ("rep", frame.cat[-1], lo, hi, counted)
        if counted and (lo >= 2 or hi >= 2) and not _repeat_is_valid(node, _MAX_REPEAT):
            raise GoRegexpError(ERR_INVALID_REPEAT_SIZE, self.s[start:after])
        frame.cat[-1] = node

    def _literal(self, cp: int, flags: int) -> Any:
        ranges: Ranges = ((cp, cp),)
        if flags & _FOLD:
            ranges = _fold(ranges)
        return ("set", ranges)

    def _perl_flags(self, i: int, flags: int) -> tuple[int, int, bool]:
        """``(?`` at ``s[i]``: a named group, a group with flags, or flags alone: (index after, flags, opens)."""
        s = self.s
        t = s[i:]
        starts_with_p = len(t) > 4 and t[2] == "P" and t[3] == "<"
        starts_with_name = len(t) > 3 and t[2] == "<"
        if starts_with_p or starts_with_name:
            end = t.find(">")
            if end < 0:
                raise GoRegexpError(ERR_INVALID_NAMED_CAPTURE, t)
            name = t[4 if starts_with_p else 3:end]
            if not name or not all(ch == "_" or _isalnum(ch) for ch in name):
                raise GoRegexpError(ERR_INVALID_NAMED_CAPTURE, t[:end + 1])
            return i + end + 1, flags, True
        j = i + 2
        sign = 1
        saw_flag = False
        new = flags
        while j < len(s):
            c = s[j]
            j += 1
            if c in "imsU":
                bit = {"i": _FOLD, "m": _MULTILINE, "s": _DOTNL, "U": 0}[c]
                new = new | bit if sign > 0 else new & ~bit
                saw_flag = True
            elif c == "-":
                if sign < 0:
                    break
                sign = -1
                saw_flag = False
            elif c in ":)":
                if sign < 0 and not saw_flag:
                    break
                return j, new, c == ":"
            else:
                break
        raise GoRegexpError(ERR_INVALID_PERL_OP, s[i:j])

    def _escape(self, i: int) -> tuple[int, int]:
        """Go's parseEscape at ``s[i] == '\\'``: (code point, index after)."""
        s = self.s
        n = len(s)
        if i + 1 >= n:
            raise GoRegexpError(ERR_TRAILING_BACKSLASH, "")
        c = s[i + 1]
        j = i + 2
        if c.isascii() and not c.isalnum():
            return ord(c), j
        if c in "01234567":
            if c != "0" and (j >= n or s[j] not in "01234567"):
                raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])  # \1 ... \7 alone: a backreference
            r = ord(c) - 48
            for _ in range(2):
                if j < n and s[j] in "01234567":
                    r = r * 8 + ord(s[j]) - 48
                    j += 1
            return r, j
        if c == "x":
            if j >= n:
                raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
            if s[j] == "{":
                j += 1
                r = 0
                digits = 0
                while True:
                    if j >= n:
                        raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
                    d = s[j]
                    j += 1
                    if d == "}":
                        break
                    v = _unhex(d)
                    if v < 0:
                        raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
                    r = r * 16 + v
                    if r > MAX_RUNE:
                        raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
                    digits += 1
                if digits == 0:
                    raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
                return r, j
            x = _unhex(s[j])
            y = _unhex(s[j + 1]) if j + 1 < n else -1
            j = min(j + 2, n)
            if x < 0 or y < 0:
                raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])
            return x * 16 + y, j
        simple = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
        if c in simple:
            return simple[c], j
        raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:j])

    def _unicode_class(self, i: int) -> tuple[Ranges, bool, int] | None:
        """``\\pN``, ``\\p{Name}``, ``\\PN``, ``\\p{^Name}`` at ``s[i]``, or None when it is not one."""
        s = self.s
        if i + 1 >= len(s) or s[i] != "\\" or s[i + 1] not in "pP":
            return None
        negate = s[i + 1] == "P"
        j = i + 2
        if j < len(s) and s[j] == "{":
            end = s.find("}", j)
            if end < 0:
                raise GoRegexpError(ERR_INVALID_CHAR_RANGE, s[i:])
            seq, name, after = s[i:end + 1], s[j + 1:end], end + 1
        else:
            after = min(j + 1, len(s))
            seq, name = s[i:after], s[j:after]
        if name.startswith("^"):
            negate = not negate
            name = name[1:]
        ranges = _unicode_category(name)
        if ranges is None:
            note = "Flotilla supports \\p with Any and the Unicode general categories, not scripts"
            raise GoRegexpError(ERR_INVALID_CHAR_RANGE, seq, note if name.isalpha() else "")
        return ranges, negate, after

    def _group(self, ranges: Ranges, negate: bool, flags: int) -> Ranges:
        if flags & _FOLD:
            ranges = _fold(ranges)
        return _negate(ranges) if negate else ranges

    def _backslash(self, frame: _Frame, i: int, flags: int) -> int:
        s = self.s
        if i + 1 < len(s):
            c = s[i + 1]
            if c in "AbBz":
                frame.cat.append(("assert", {"A": BOT, "b": WORDB, "B": NWORDB, "z": EOT}[c]))
                return i + 2
            if c == "C":
                raise GoRegexpError(ERR_INVALID_ESCAPE, s[i:i + 2])
            if c == "Q":
                end = s.find("\\E", i + 2)
                text = s[i + 2:] if end < 0 else s[i + 2:end]
                frame.cat.extend(self._literal(ord(ch), flags) for ch in text)
                return len(s) if end < 0 else end + 2
            if c in "pP":
                got = self._unicode_class(i)
                assert got is not None
                ranges, negate, after = got
                frame.cat.append(("set", self._group(ranges, negate, flags)))
                return after
            if c.lower() in _PERL:
                frame.cat.append(("set", self._group(_PERL[c.lower()], c.isupper(), flags)))
                return i + 2
        cp, after = self._escape(i)
        frame.cat.append(self._literal(cp, flags))
        return after

    def _class(self, start: int, flags: int) -> tuple[Ranges, int]:
        """``[...]`` at ``s[start]``: (ranges, index after)."""
        s = self.s
        n = len(s)
        i = start + 1
        negate = i < n and s[i] == "^"
        if negate:
            i += 1
        parts: list[tuple[int, int]] = []
        first = True
        while i >= n or s[i] != "]" or first:
            first = False
            if i + 2 < n and s[i] == "[" and s[i + 1] == ":":
                end = s.find(":]", i + 2)
                if end >= 0:
                    name = s[i:end + 2]
                    inner = name[2:-2]
                    neg = inner.startswith("^")
                    group = _POSIX.get(inner[1:] if neg else inner)
                    if group is None:
                        raise GoRegexpError(ERR_INVALID_CHAR_RANGE, name)
                    parts.extend(self._group(group, neg, flags))
                    i = end + 2
                    continue
            got = self._unicode_class(i)
            if got is not None:
                ranges, neg, i = got
                parts.extend(self._group(ranges, neg, flags))
                continue
            if i + 1 < n and s[i] == "\\" and s[i + 1].lower() in _PERL:
                c = s[i + 1]
                parts.extend(self._group(_PERL[c.lower()], c.isupper(), flags))
                i += 2
                continue
            rng_start = i
            lo, i = self._class_char(i, start)
            hi = lo
            if i + 1 < n and s[i] == "-" and s[i + 1] != "]":
                hi, i = self._class_char(i + 1, start)
                if hi < lo:
                    raise GoRegexpError(ERR_INVALID_CHAR_RANGE, s[rng_start:i])
            parts.extend(self._group(((lo, hi),), False, flags))
        ranges = _normalize(parts)
        return (_negate(ranges) if negate else ranges), i + 1

    def _class_char(self, i: int, class_start: int) -> tuple[int, int]:
        s = self.s
        if i >= len(s):
            raise GoRegexpError(ERR_MISSING_BRACKET, s[class_start:])
        if s[i] == "\\":
            return self._escape(i)
        return ord(s[i]), i + 1


# -- program and search -----------------------------------------------------------------------------

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
# the kind of character on each side of a position, for the empty-width tests
_EDGE, _NEWLINE, _WORD, _OTHER = range(4)


def _kind(ch: str) -> int:
    if ch == "\n":
        return _NEWLINE
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return _WORD
    return _OTHER


def _assert_holds(kind: int, prev: int, nxt: int) -> bool:
    if kind == BOT:
        return prev == _EDGE
    if kind == EOT:
        return nxt == _EDGE
    if kind == BOL:
        return prev in (_EDGE, _NEWLINE)
    if kind == EOL:
        return nxt in (_EDGE, _NEWLINE)
    if kind == WORDB:
        return (prev == _WORD) != (nxt == _WORD)
    return (prev == _WORD) == (nxt == _WORD)


class _Program:
    """A Thompson NFA: ``op``, ``arg`` and ``out`` per instruction (``arg``: the set, the other branch, the test)."""

    def __init__(self) -> None:
        self.op: list[int] = []
        self.arg: list[Any] = []
        self.out: list[int] = []

    def emit(self, op: int, arg: Any, out: int) -> int:
        if len(self.op) >= _MAX_PROGRAM:
            raise OverflowError
        self.op.append(op)
        self.arg.append(arg)
        self.out.append(out)
        return len(self.op) - 1

    def compile(self, node: Any, nxt: int) -> int:
        """The entry of ``node`` followed by ``nxt`` (built back to front)."""
        kind = node[0]
        if kind == "set":
            starts = tuple(lo for lo, _ in node[1])
            return self.emit(_CHAR, (starts, node[1]), nxt)
        if kind == "cat":
            for sub in reversed(node[1]):
                nxt = self.compile(sub, nxt)
            return nxt
        if kind == "alt":
            entries = [self.compile(sub, nxt) for sub in node[1]]
            entry = entries[-1]
            for e in reversed(entries[:-1]):
                entry = self.emit(_SPLIT, entry, e)
            return entry
        if kind == "assert":
            return self.emit(_ASSERT, node[1], nxt)
        if kind == "empty":
            return nxt
        _, sub, lo, hi, _counted = node
        entry = nxt
        if hi < 0:
            loop = self.emit(_SPLIT, nxt, -1)  # out: the body, patched below; arg: leave
            self.out[loop] = self.compile(sub, loop)
            entry = loop
        else:
            for _ in range(hi - lo):
                entry = self.emit(_SPLIT, nxt, self.compile(sub, entry))
        for _ in range(lo):
            entry = self.compile(sub, entry)
        return entry


_CACHE_LIMIT = 1_000_000  # NFA positions held by the cached DFA states of a pattern before starting afresh (as RE2)
_RESULT_LIMIT = 4096
_RESULT_MAX_LEN = 256


class GoRegexp:
    """A compiled Go pattern; :meth:`search` is ``regexp.MatchString``."""

    __slots__ = ("_closures", "_cost", "_results", "_steps", "anchored", "arg", "op", "out", "pattern", "start")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        node = _Parser(pattern).parse()
        prog = _Program()
        match = prog.emit(_MATCH, None, -1)
        limit = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(limit, 20 * _MAX_DEPTH + 1000))
            self.start = prog.compile(node, match)
        except OverflowError:
            raise GoRegexpError(ERR_LARGE, pattern) from None
        finally:
            sys.setrecursionlimit(limit)
        self.op, self.arg, self.out = prog.op, prog.arg, prog.out
        first = node[1][0] if node[0] == "cat" else node
        self.anchored = first == ("assert", BOT)  # no match can start after the first position
        self._closures: dict[tuple[tuple[int, ...], int, int], tuple[tuple[int, ...], bool]] = {}
        self._steps: dict[tuple[tuple[int, ...], str], tuple[int, ...]] = {}
        self._results: dict[str, bool] = {}
        self._cost = 0  # the size of the two DFA caches, in NFA positions

    def _close(self, pending: tuple[int, ...], prev: int, nxt: int) -> tuple[tuple[int, ...], bool]:
        """The character instructions reachable from ``pending`` at a position between ``prev`` and ``nxt``."""
        op, arg, out = self.op, self.arg, self.out
        seen: set[int] = set()
        chars: list[int] = []
        matched = False
        stack = list(reversed(pending))
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            o = op[pc]
            if o == _CHAR:
                chars.append(pc)
            elif o == _SPLIT:
                stack.append(arg[pc])
                stack.append(out[pc])
            elif o == _ASSERT:
                if _assert_holds(arg[pc], prev, nxt):
                    stack.append(out[pc])
            else:
                matched = True
        return tuple(sorted(chars)), matched

    def _step(self, chars: tuple[int, ...], ch: str) -> tuple[int, ...]:
        cp = ord(ch)
        arg, out = self.arg, self.out
        nxt = set()
        for pc in chars:
            starts, ranges = arg[pc]
            k = bisect.bisect_right(starts, cp) - 1
            if k >= 0 and cp <= ranges[k][1]:
                nxt.add(out[pc])
        if not self.anchored:
            nxt.add(self.start)
        return tuple(sorted(nxt))

    def _spend(self, cost: int) -> None:
        """Count what the DFA caches hold; past the limit they start afresh (the current search goes on)."""
        self._cost += cost + 4
        if self._cost > _CACHE_LIMIT:
            self._closures.clear()
            self._steps.clear()
            self._cost = 0

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text`` (Go's ``MatchString``)."""
        results = self._results
        found = results.get(text)
        if found is None:
            found = self._search(text)
            if len(text) <= _RESULT_MAX_LEN:
                if len(results) >= _RESULT_LIMIT:
                    results.clear()
                results[text] = found
        return found

    def _search(self, text: str) -> bool:
        closures, steps = self._closures, self._steps
        state: tuple[int, ...] = (self.start,)
        prev = _EDGE
        n = len(text)
        for i in range(n + 1):
            nxt = _kind(text[i]) if i < n else _EDGE
            key = (state, prev, nxt)
            closed = closures.get(key)
            if closed is None:
                closed = closures[key] = self._close(state, prev, nxt)
                self._spend(len(state) + len(closed[0]))
            chars, matched = closed
            if matched:
                return True
            if i == n or (not chars and self.anchored):
                return False
            ch = text[i]
            skey = (chars, ch)
            state_next = steps.get(skey)
            if state_next is None:
                state_next = steps[skey] = self._step(chars, ch)
                self._spend(len(chars) + len(state_next))
            state = state_next
            prev = nxt
        return False  # pragma: no cover - the loop returns at i == n


_compiled: dict[str, GoRegexp | GoRegexpError] = {}
_COMPILED_LIMIT = 1024


def compile_pattern(pattern: str) -> GoRegexp:
    """The compiled pattern (memoized), or :class:`GoRegexpError` with Go's message."""
    got = _compiled.get(pattern)
    if got is None:
        try:
            got = GoRegexp(pattern)
        except GoRegexpError as e:
            got = e
        except RecursionError:
            got = GoRegexpError(ERR_NESTING_DEPTH, pattern)
        if len(_compiled) >= _COMPILED_LIMIT:
            _compiled.pop(next(iter(_compiled)))
        _compiled[pattern] = got
    if isinstance(got, GoRegexpError):
        raise GoRegexpError(got.code, got.expr, got.note)  # a new one: a raised exception keeps its traceback
    return got


def pattern_error(pattern: str) -> str | None:
    """Go's compile error for ``pattern``, or None when Go (and this module) accept it."""
    try:
        compile_pattern(pattern)
    except GoRegexpError as e:
        return str(e)
    return None
