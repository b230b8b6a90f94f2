"""Go ``regexp`` patterns, as kube-apiserver evaluates the OpenAPI ``pattern`` of a CRD, matched by RE2.

Kubernetes compiles a schema's ``pattern`` with Go's ``regexp`` and checks a string with ``MatchString``: an
unanchored search. Go's package implements the syntax and the guarantee of Google's RE2 (time linear in the
string, whatever the pattern), so patterns are compiled by RE2 itself, through its official Python binding
(``google-re2``, module ``re2``), never by Python's ``re``: ``re`` reads the same text differently (``$`` also
matches before a final newline, ``\\d`` and ``\\w`` are Unicode-wide) and backtracks, so ``^(a+)+$`` against 30
``a`` and a ``!`` would stop the whole API server for minutes.

RE2 and Go accept the same syntax with the same meaning, but for what this module translates:

- ``\\C`` (one byte) is RE2's alone: Go refuses it, and so does this module.
- Go allows only ASCII letters, digits and ``_`` in a capture name; RE2 also takes other Unicode word characters.
  ``(?<=`` and ``(?<!`` are read by Go as the start of a named capture, hence Go's message for them.
- Go refuses a pattern nested too deeply; RE2 has no such limit. Here: more than 999 nested groups.
- RE2 steps through the UTF-8 bytes of the string, Go through its characters. The only place this shows is
  ``\\B``, which RE2 finds true between two bytes of one character (``\\B`` matches ``"0É0"`` in RE2, not in Go);
  a pattern holding ``\\B`` is searched from character boundaries only.
- The messages: RE2's error codes are reworded as Go's (``error parsing regexp: CODE: `EXPR```), with Go's
  excerpt where RE2's differs.
- A string holding a lone UTF-16 surrogate (which Python's ``json`` may produce, UTF-8 cannot encode and Go's JSON
  decoder turns into U+FFFD) is matched with U+FFFD in its place.

Limits: a compiled pattern may use 32 MiB (a big Unicode class repeated 1000 times, such as ``\\pL{1000}``,
fits; Go counts the size of a pattern differently), beyond which it is refused as ``expression too large``, as are
patterns that would cost RE2's parser too much (see :class:`_Reader`). The Unicode tables (``\\p{Greek}``,
``\\p{Lu}``) are RE2's, whose Unicode version may differ from the Go release's.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import re2  # google-re2: RE2 itself; it has no fallback to Python's re

# error codes, worded as Go's regexp/syntax ErrorCode
ERR_INTERNAL = "regexp/syntax: internal error"
ERR_INVALID_CHAR_CLASS = "invalid character class"
ERR_INVALID_CHAR_RANGE = "invalid character class range"
ERR_INVALID_ESCAPE = "invalid escape sequence"
ERR_INVALID_NAMED_CAPTURE = "invalid named capture"
ERR_INVALID_PERL_OP = "invalid or unsupported Perl syntax"
ERR_INVALID_REPEAT_OP = "invalid nested repetition operator"
ERR_INVALID_REPEAT_SIZE = "invalid repeat count"
ERR_INVALID_UTF8 = "invalid UTF-8"
ERR_MISSING_BRACKET = "missing closing ]"
ERR_MISSING_PAREN = "missing closing )"
ERR_MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
ERR_TRAILING_BACKSLASH = "trailing backslash at end of expression"
ERR_UNEXPECTED_PAREN = "unexpected )"
ERR_NESTING_DEPTH = "expression nests too deeply"
ERR_LARGE = "expression too large"

# RE2's wording (re2.cc, CodeText) -> Go's
_RE2_CODES = {
    "invalid escape sequence": ERR_INVALID_ESCAPE,
    "invalid character class": ERR_INVALID_CHAR_CLASS,
    "invalid character class range": ERR_INVALID_CHAR_RANGE,
    "missing ]": ERR_MISSING_BRACKET,
    "missing )": ERR_MISSING_PAREN,
    "unexpected )": ERR_UNEXPECTED_PAREN,
    "trailing \\": ERR_TRAILING_BACKSLASH,
    "no argument for repetition operator": ERR_MISSING_REPEAT_ARGUMENT,
    "invalid repetition size": ERR_INVALID_REPEAT_SIZE,
    "bad repetition operator": ERR_INVALID_REPEAT_OP,
    "invalid perl operator": ERR_INVALID_PERL_OP,
    "invalid UTF-8": ERR_INVALID_UTF8,
    "invalid named capture group": ERR_INVALID_NAMED_CAPTURE,
}

_MAX_DEPTH = 1000  # nested groups, as Go's limit on the height of the parse tree (1000)
_MAX_UNICODE_CLASSES = 1000  # \p classes in one pattern (Go: about 26,000 \pL, by its limit of 33 million runes)
_MAX_POSIX_SEARCH = 200_000_000  # characters RE2's parser would read looking for the ":]" of a "[:" (0.1 s)
_MAX_MEM = 32 << 20  # bytes RE2 may use for one compiled pattern (its default, 8 MiB, refuses \pL{1000})
_CACHE_SIZE = 1024  # compiled patterns (and refusals) kept
# the answers for recent short strings, per pattern: the same condition types, reasons and quantities come back
# on every write, and a dictionary look-up costs a tenth of a call into RE2
_RESULT_LIMIT = 4096
_RESULT_MAX_LEN = 256


def _options() -> re2.Options:
    opts = re2.Options()
    opts.encoding = re2.Options.Encoding.UTF8
    opts.max_mem = _MAX_MEM
    opts.longest_match = False  # leftmost-first, as Go's regexp (only whether it matches is asked anyway)
    opts.never_capture = True  # groups are never read: no submatch bookkeeping
    opts.log_errors = False  # a refused pattern is the caller's answer, not a log line on stderr
    return opts


_OPTIONS = _options()


class GoRegexpError(ValueError):
    """What Go's ``regexp.Compile`` returns for a pattern it rejects: ``error parsing regexp: CODE: `EXPR```."""

    def __init__(self, code: str, expr: str) -> None:
        self.code = code
        self.expr = expr
        super().__init__(f"error parsing regexp: {code}: `{expr}`")


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8; lone surrogates (which UTF-8 cannot hold) become U+FFFD, as Go's JSON decoder makes them."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 pairs the surrogates that make a character and replaces the others
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed.encode("utf-8")


def _go_error(message: bytes | str, pattern: str) -> GoRegexpError:
    """RE2's compile error as Go words it for the same pattern."""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    if text.startswith("pattern too large"):
        return GoRegexpError(ERR_LARGE, pattern)
    code, _, arg = text.partition(": ")
    go_code = _RE2_CODES.get(code)
    if go_code is None:
        return GoRegexpError(ERR_INTERNAL, pattern)
    if go_code == ERR_INVALID_UTF8 and pattern.endswith("\\x{"):
        # RE2 reads past "\x{" at the end of the pattern as a broken character; Go stops at the escape
        return GoRegexpError(ERR_INVALID_ESCAPE, "\\x{")
    return GoRegexpError(go_code, arg)


def _re2_compile(pattern: str) -> Any:
    """RE2's compiled ``pattern``, or :class:`GoRegexpError` with Go's wording."""
    try:
        return re2.compile(_utf8(pattern), _OPTIONS)
    except re2.error as e:
        raise _go_error(e.args[0] if e.args else "", pattern) from None


def _valid_capture_name(name: str) -> bool:
    return bool(name) and all(c == "_" or (c.isascii() and c.isalnum()) for c in name)


class _Reading(NamedTuple):
    problem: tuple[int, int, GoRegexpError] | None  # Go's refusal: where, the groups open there, Go's error
    nonword_boundary: bool  # the pattern holds \B
    quote_open: bool  # the pattern ends inside \Q...


class _Reader:
    """Reads a pattern as Go's parser does, for what Go and RE2 take differently, and for what would cost RE2's
    parser too much: each ``\\p`` class is built in full (35 kB for ``\\pL``, whatever the repetition), and each
    ``[:`` in a class that no ``:]`` follows has it search the rest of the pattern.

    Finds the first construct Go refuses and RE2 would not. Everything else is RE2's to judge: after a construct
    RE2 refuses, this reading may be wrong, which :func:`_refusal` accounts for.
    """

    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)
        self.depth = 0
        self.unicode_classes = 0
        self.last_posix_end = s.rfind(":]")
        self.posix_search_cost = 0
        self.problem: tuple[int, int, GoRegexpError] | None = None

    def _refuse(self, at: int, code: str, expr: str) -> None:
        self.problem = (at, self.depth, GoRegexpError(code, expr))

    def _unicode_class(self, i: int) -> int:
        """The index after ``\\pN`` or ``\\p{Name}`` at ``s[i]``."""
        self.unicode_classes += 1
        if self.unicode_classes > _MAX_UNICODE_CLASSES:
            self._refuse(i, ERR_LARGE, self.s)
        if self.s.startswith("{", i + 2):
            end = self.s.find("}", i + 3)
            return self.n if end < 0 else end + 1
        return i + 3

    def _class_end(self, i: int) -> int:
        """The index after the character class that opens at ``s[i] == '['`` (``len(s)`` when it is not closed),
        read as Go's parseClass reads it."""
        s, n = self.s, self.n
        j = i + 1
        if j < n and s[j] == "^":
            j += 1
        first = True  # a "]" first is a literal
        while j < n and self.problem is None:
            if s[j] == "]" and not first:
                return j + 1
            first = False
            if s.startswith("[:", j):  # [:alpha:]; without a ":]" after it the "[" is a literal
                if self.last_posix_end >= j + 2:
                    j = s.find(":]", j + 2) + 2
                    continue
                self.posix_search_cost += n - j
                if self.posix_search_cost > _MAX_POSIX_SEARCH:
                    self._refuse(j, ERR_LARGE, s)
            if s.startswith(("\\p", "\\P"), j):
                j = self._unicode_class(j)
                continue
            # a character, or a range: the end of a range is a character even when it reads "[:" or "\p"
            j += 2 if s[j] == "\\" else 1
            if j + 1 < n and s[j] == "-" and s[j + 1] != "]":
                j += 3 if s[j + 1] == "\\" else 2
        if self.problem is not None:
            self.problem = (i, *self.problem[1:])  # what comes before is judged up to the class, not inside it
        return n

    def _group(self, i: int) -> int:
        """The index after the opening of the group, flags or named capture at ``s[i] == '('``."""
        s, n = self.s, self.n
        opens = True
        if not s.startswith("(?", i):
            after = i + 1
        elif (starts_with_p := n - i > 4 and s[i + 2] == "P" and s[i + 3] == "<") or (n - i > 3 and s[i + 2] == "<"):
            # a named capture, as Go decides it
            end = s.find(">", i)
            if end < 0 or not _valid_capture_name(s[i + (4 if starts_with_p else 3):end]):
                self._refuse(i, ERR_INVALID_NAMED_CAPTURE, s[i:] if end < 0 else s[i:end + 1])
                return n
            after = end + 1
        else:  # flags: "(?i)" sets them, "(?i:" opens a group; RE2 judges anything else
            j = i + 2
            while j < n and s[j] in "imsU-":
                j += 1
            opens = j < n and s[j] == ":"
            after = j + 1 if j < n and s[j] in ":)" else j
        if opens:
            self.depth += 1
            if self.depth >= _MAX_DEPTH:
                self._refuse(after, ERR_NESTING_DEPTH, s)
        return after

    def read(self) -> _Reading:
        s, n = self.s, self.n
        nonword_boundary = quote_open = False
        i = 0
        while i < n and self.problem is None:
            c = s[i]
            if c == "\\":
                nxt = s[i + 1] if i + 1 < n else ""
                if nxt == "C":
                    self._refuse(i, ERR_INVALID_ESCAPE, "\\C")
                elif nxt == "B":
                    nonword_boundary = True
                if nxt == "Q":
                    end = s.find("\\E", i + 2)
                    quote_open = end < 0
                    i = n if end < 0 else end + 2
                elif nxt in ("p", "P"):
                    i = self._unicode_class(i)
                else:
                    i += 2
            elif c == "[":
                i = self._class_end(i)
            elif c == "(":
                i = self._group(i)
            else:
                if c == ")":
                    self.depth = max(0, self.depth - 1)
                i += 1
        if self.problem is not None:
            return _Reading(self.problem, False, False)
        return _Reading(None, nonword_boundary, quote_open)


def _refusal(pattern: str, at: int, depth: int, go_only: GoRegexpError) -> GoRegexpError:
    """Go's error for ``pattern``, which holds a construct only Go refuses at ``at``.

    Go reports the first error in the pattern: when RE2 (so Go too) refuses the text before ``at`` (with the groups
    open there closed), that error comes first, and RE2 finds it again in the whole pattern, with Go's excerpt.
    """
    try:
        _re2_compile(pattern[:at] + ")" * depth)
    except GoRegexpError as earlier:
        if earlier.code != ERR_LARGE:
            try:
                _re2_compile(pattern)
            except GoRegexpError as first:
                return first
    return go_only


class GoRegexp:
    """A compiled Go pattern; :meth:`search` is ``regexp.MatchString``."""

    __slots__ = ("_results", "_rx", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        reading = _Reader(pattern).read()
        if reading.problem is not None:
            raise _refusal(pattern, *reading.problem)
        rx = _re2_compile(pattern)
        if reading.nonword_boundary:
            # a match may then begin at any character boundary, never between two bytes of a character
            end_quote = "\\E" if reading.quote_open else ""
            try:
                rx = _re2_compile(f"\\A(?s:.)*?(?:{pattern}{end_quote})")
            except GoRegexpError as e:
                raise GoRegexpError(e.code, pattern if e.code == ERR_LARGE else e.expr) from None
        self._rx = rx
        self._results: dict[str, bool] = {}

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text`` (Go's ``MatchString``)."""
        results = self._results
        found = results.get(text)
        if found is None:
            found = self._rx.search(_utf8(text)) is not None
            if len(text) <= _RESULT_MAX_LEN:
                if len(results) >= _RESULT_LIMIT:
                    results.clear()
                results[text] = found
        return found


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled(pattern: str) -> GoRegexp | GoRegexpError:
    try:
        return GoRegexp(pattern)
    except GoRegexpError as e:
        return e.with_traceback(None)


def compile_pattern(pattern: str) -> GoRegexp:
    """The compiled pattern (memoized), or :class:`GoRegexpError` with Go's message."""
    got = _compiled(pattern)
    if isinstance(got, GoRegexpError):
        raise GoRegexpError(got.code, got.expr)  # a new one: a raised exception keeps its traceback
    return got


def pattern_error(pattern: str) -> str | None:
    """Go's compile error for ``pattern``, or None when Go (and RE2) accept it."""
    got = _compiled(pattern)
    return str(got) if isinstance(got, GoRegexpError) else None

