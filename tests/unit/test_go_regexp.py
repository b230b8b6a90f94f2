"""Go regexp (RE2) semantics for OpenAPI ``pattern``: what kube-apiserver accepts, refuses and matches.

The differential test compares :mod:`flotilla.kube.go_regexp` with Google's RE2 (the C++ library Go's
regexp follows, through the ``google-re2`` test dependency) on generated patterns and strings: the same patterns
compile and every string gets the same answer. ``FLOTILLA_FUZZ_EXAMPLES`` raises the number of generated cases
(``make test``: 400 and 300).
"""

from __future__ import annotations

import os

import pytest
import re2  # google-re2, a test dependency
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flotilla.apiserver.schemas._build import CONDITION_TYPE_PATTERN, QUANTITY_PATTERN, REASON_PATTERN
from flotilla.kube.go_regexp import GoRegexpError, compile_pattern, pattern_error
from flotilla.kube.validation import go_quote


def search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text)


@pytest.mark.parametrize("pattern,text,want", [
    pytest.param("^[a-z]+$", "abc", True, id="anchored-match"),
    pytest.param("^[a-z]+$", "abc\n", False, id="dollar-is-end-of-text-not-before-final-newline"),
    pytest.param("b", "abc", True, id="unanchored-search-like-MatchString"),
    pytest.param("^b", "abc", False, id="caret-anchors"),
    pytest.param(r"[0-9]\z", "a1", True, id="backslash-z"),
    pytest.param(r"\Aa", "ba", False, id="backslash-A"),
    pytest.param(r"\d", "\u0663", False, id="digit-class-is-ascii"),
    pytest.param(r"\w", "é", False, id="word-class-is-ascii"),
    pytest.param(r"\s", "\v", False, id="space-class-has-no-vertical-tab"),
    pytest.param(r"\bfoo\b", "a foo.", True, id="word-boundary"),
    pytest.param(r"\bfoo", "éfoo", True, id="word-boundary-ascii-only"),
    pytest.param(r"(?m)^b$", "a\nb\nc", True, id="multiline"),
    pytest.param(r".", "\n", False, id="dot-not-newline"),
    pytest.param(r"(?s).", "\n", True, id="dot-newline-with-s"),
    pytest.param(r"(?i)straße", "STRASSE", False, id="fold-is-simple-not-full"),
    pytest.param(r"(?i)k", "\u212a", True, id="fold-kelvin-sign"),
    pytest.param(r"(?i)[^a]", "A", False, id="fold-before-negation"),
    pytest.param(r"^\p{Lu}\pL*$", "Élan", True, id="unicode-categories"),
    pytest.param(r"^\P{L}$", "é", False, id="negated-unicode-category"),
    pytest.param(r"^[[:alpha:]]+$", "abC", True, id="posix-class"),
    pytest.param(r"\Qa.b\E", "axb", False, id="quoted-literal"),
    pytest.param(r"^x{2,3}$", "xxxx", False, id="counted-repeat"),
    pytest.param(r"^ab{0}c$", "ac", True, id="zero-repeat"),
    pytest.param(r"^(?:a|)b$", "b", True, id="empty-alternative"),
    pytest.param(r"^日本$", "日本", True, id="non-ascii-literals"),
    pytest.param(r"^\x{1F600}$", "😀", True, id="astral-escape"),
    pytest.param(r"^a{,2}$", "a{,2}", True, id="brace-without-count-is-literal"),
])
def test_matches_as_go(pattern: str, text: str, want: bool) -> None:
    assert search(pattern, text) is want
    assert bool(re2.search(pattern, text)) is want


def test_nested_quantifiers_are_linear_not_backtracking() -> None:
    """Python's re would take longer than the age of the universe here; the DFA reads the string once."""
    assert search(r"^(a+)+$", "a" * 5000 + "!") is False
    assert search(r"^(a|aa)*b$", "a" * 5000) is False
    assert search(r"(.*a){12}", "a" * 11 + "b" * 5000) is False


@pytest.mark.parametrize("pattern,message", [
    ("+", "error parsing regexp: missing argument to repetition operator: `+`"),
    ("a**", "error parsing regexp: invalid nested repetition operator: `**`"),
    ("a++", "error parsing regexp: invalid nested repetition operator: `++`"),
    ("(?=a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
    ("(?!a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?!`"),
    ("(?>a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?>`"),
    ("(?<=a)b", "error parsing regexp: invalid named capture: `(?<=a)b`"),
    (r"(a)\1", "error parsing regexp: invalid escape sequence: `\\1`"),
    (r"a\Z", "error parsing regexp: invalid escape sequence: `\\Z`"),
    (r"\C", "error parsing regexp: invalid escape sequence: `\\C`"),
    ("(a", "error parsing regexp: missing closing ): `(a`"),
    ("a)", "error parsing regexp: unexpected ): `a)`"),
    ("[a", "error parsing regexp: missing closing ]: `[a`"),
    ("a\\", "error parsing regexp: trailing backslash at end of expression: ``"),
    ("x{1001}", "error parsing regexp: invalid repeat count: `{1001}`"),
    ("(x{100}){11}", "error parsing regexp: invalid repeat count: `{11}`"),
    ("[z-a]", "error parsing regexp: invalid character class range: `z-a`"),
    ("[[:word2:]]", "error parsing regexp: invalid character class range: `[:word2:]`"),
    (r"\p{Foo}", "error parsing regexp: invalid character class range: `\\p{Foo}`"),
    ("(?i-)", "error parsing regexp: invalid or unsupported Perl syntax: `(?i-)`"),
    ("(?P<a-b>x)", "error parsing regexp: invalid named capture: `(?P<a-b>`"),
])
def test_go_rejects_with_its_message(pattern: str, message: str) -> None:
    with pytest.raises(GoRegexpError) as e:
        compile_pattern(pattern)
    assert str(e.value).startswith(message)


def test_unicode_scripts_are_refused_with_a_reason() -> None:
    err = pattern_error(r"\p{Greek}")
    assert err is not None and "not scripts" in err


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert pattern_error("(" * 1001 + ")" * 1001) is not None
    assert pattern_error("(" * 900 + "a" + ")" * 900) is None


def test_builtin_schema_patterns_compile_and_match() -> None:
    for p in (QUANTITY_PATTERN, CONDITION_TYPE_PATTERN, REASON_PATTERN):
        assert pattern_error(p) is None
    assert search(QUANTITY_PATTERN, "250m") and search(QUANTITY_PATTERN, "1.5Gi") and not search(QUANTITY_PATTERN, "lots")
    assert search(CONDITION_TYPE_PATTERN, "example.com/Ready") and not search(CONDITION_TYPE_PATTERN, "bad type")
    assert search(REASON_PATTERN, "TaintUntolerated") and not search(REASON_PATTERN, "Taint Untolerated")


def test_go_quote() -> None:
    assert go_quote('a "b"\n\\ é\x01') == '"a \\"b\\"\\n\\\\ é\\x01"'


# -- differential: RE2 ------------------------------------------------------------------------------

_ATOMS = ["a", "b", "A", "é", "É", "k", "K", "\u212a", "0", "9", "_", " ", "-", ".", r"\.", r"\d", r"\D", r"\w",
          r"\W", r"\s", r"\S", r"\pL", r"\p{Lu}", r"\PN", r"\n", r"\x41", r"\x{e9}", "[a-c]", "[^a]", r"[\d_]",
          "[[:alpha:]]", "[[:^digit:]x]", "[-a]", "[a-]", "[]a]", r"[\]]", "(?i:a)", r"\Qa.\E", "^", "$", r"\A",
          r"\z", r"\b", r"\B", "(?m:^)", "(?m:$)", "(?s:.)", "{", "a{"]
_TEXT = st.text(alphabet=st.sampled_from(list("abAkKé\u212aÉ0_9 -.\n!x")), max_size=12)


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 7 if depth < 3 else 0))
    if kind <= 2:
        out = draw(st.sampled_from(_ATOMS))
    elif kind <= 4:
        out = "".join(draw(st.lists(_patterns(depth + 1), min_size=2, max_size=3)))
    elif kind == 5:
        out = "|".join(draw(st.lists(_patterns(depth + 1), min_size=2, max_size=3)))
    elif kind == 6:
        out = "(" + draw(_patterns(depth + 1)) + ")"
    else:
        out = "(?:" + draw(_patterns(depth + 1)) + ")" + draw(
            st.sampled_from(["*", "+", "?", "*?", "{2}", "{1,3}", "{0,}", "{2,}?", ""]))
    if draw(st.booleans()) and depth == 0:
        out = draw(st.sampled_from(["(?i)", "(?m)", "(?s)", "(?U)", "(?i-m)"])) + out
    return out


EXAMPLES = int(os.environ.get("FLOTILLA_FUZZ_EXAMPLES", "0"))


@settings(max_examples=EXAMPLES or 400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), texts=st.lists(_TEXT, min_size=1, max_size=6))
def test_same_answers_as_re2(pattern: str, texts: list[str]) -> None:
    try:
        theirs = re2.compile(pattern)
    except re2.error:
        theirs = None
    ours_error = pattern_error(pattern)
    assert (ours_error is None) == (theirs is not None), (pattern, ours_error)
    if theirs is None:
        return
    rx = compile_pattern(pattern)
    for text in texts:
        if r"\B" in pattern and not text.isascii():
            # RE2 (C++) steps through UTF-8 bytes, so \B also holds between the two bytes of "É"; Go's regexp
            # steps through runes and never looks inside one, as ours does: no oracle here
            continue
        assert rx.search(text) == bool(theirs.search(text)), (pattern, text)


@settings(max_examples=EXAMPLES or 300, deadline=None)
@given(pattern=st.text(alphabet=st.sampled_from(list("ab()[]{}|*+?^$\\.,:-=!<>PiImsUx0129dDwWsSpQEAzbBC")),
                       max_size=10))
def test_random_syntax_accepted_or_refused_as_re2(pattern: str) -> None:
    """Garbage patterns: compiled by both or refused by both (\\C and \\pN-style classes aside)."""
    if "\\C" in pattern or "\\p" in pattern or "\\P" in pattern:
        return
    try:
        re2.compile(pattern)
        accepted = True
    except re2.error:
        accepted = False
    assert (pattern_error(pattern) is None) == accepted, (pattern, pattern_error(pattern))


def test_empty_width_assertions_are_looked_at_between_runes_only() -> None:
    """Go's regexp steps through runes: \\B cannot hold inside the two UTF-8 bytes of "É" (RE2 in C++, which steps
    through bytes, says it can)."""
    assert not compile_pattern(r"\B").search("0É0")
    assert compile_pattern(r"\B").search("É")  # before "É": neither side is a word character
