"""Go regexp semantics for OpenAPI ``pattern``: what kube-apiserver accepts, refuses and matches.

Flotilla compiles patterns with RE2 (``google-re2``), the library whose syntax and guarantees Go's regexp follows;
:mod:`flotilla.kube.go_regexp` translates what the two take differently. The answers Go gives are written in
the tests; the generated tests check the translation: patterns and strings RE2 (stepping one character at a time,
as Go does, in its Latin-1 mode) answers alike, and random syntax refused exactly as RE2 refuses it, with Go's
messages, plus what only Go refuses. ``FLOTILLA_FUZZ_EXAMPLES`` raises the number of generated cases
(``make test``: 400 and 300).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import time

import pytest
import re2  # google-re2, the library the module under test is built on
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flotilla.apiserver.schemas._build import CONDITION_TYPE_PATTERN, QUANTITY_PATTERN, REASON_PATTERN
from flotilla.kube import go_regexp
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
    pytest.param(r"^\p{Greek}+$", "αβγ", True, id="unicode-script"),
    pytest.param(r"^\p{Greek}+$", "abc", False, id="unicode-script-mismatch"),
    pytest.param(r"^(?<word>\w+)$", "ab_1", True, id="named-group-without-P"),
    pytest.param(r"(?U)^a+?$", "aaa", True, id="ungreedy-flag"),
])
def test_matches_as_go(pattern: str, text: str, want: bool) -> None:
    assert search(pattern, text) is want
    # RE2 itself gives Go's answer to these: no translation is involved
    assert bool(re2.search(pattern, text)) is want


def test_patterns_are_compiled_by_google_re2() -> None:
    """``re2`` is Google's binding, which has no fallback to Python's ``re`` (another package of that name has)."""
    assert go_regexp.re2 is re2
    assert "google-re2" in importlib.metadata.packages_distributions()["re2"]


def test_nested_quantifiers_are_linear_not_backtracking() -> None:
    """Python's re would take longer than the age of the universe here; the DFA reads the string once."""
    assert search(r"^(a+)+$", "a" * 5000 + "!") is False
    assert search(r"^(a|aa)*b$", "a" * 5000) is False
    assert search(r"(.*a){12}", "a" * 11 + "b" * 5000) is False


def test_pathological_pattern_answers_a_long_string_in_linear_time() -> None:
    """A backtracking engine tries every way to split the a's between the stars; RE2 reads the string once."""
    rx = compile_pattern(r"(a*)*b")
    for n in (1_000, 1_000_000):
        start = time.perf_counter()
        assert rx.search("a" * n) is False
        assert rx.search("a" * n + "b") is True
        assert time.perf_counter() - start < 2.0, n


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
    # what Go and RE2 take differently: Go's refusals and excerpts, in the order Go finds them
    ("(?<!a)b", "error parsing regexp: invalid named capture: `(?<!a)b`"),
    ("(?<=a>b)", "error parsing regexp: invalid named capture: `(?<=a>`"),
    ("(?P<é>x)", "error parsing regexp: invalid named capture: `(?P<é>`"),
    ("(?<naïve>x)", "error parsing regexp: invalid named capture: `(?<naïve>`"),
    (r"[a-z]\C+", "error parsing regexp: invalid escape sequence: `\\C`"),
    (r"[\C]", "error parsing regexp: invalid escape sequence: `\\C`"),
    (r"\C(", "error parsing regexp: invalid escape sequence: `\\C`"),
    (r"a**\C", "error parsing regexp: invalid nested repetition operator: `**`"),
    (r"(a\x{(\C", "error parsing regexp: invalid escape sequence: `\\x{(`"),
    (r"a)(?P<é>x)", "error parsing regexp: unexpected ): `a)(?P<é>x)`"),
    ("(" * 1000 + r"\C", "error parsing regexp: expression nests too deeply: `((("),
    (r"ab\x{", "error parsing regexp: invalid escape sequence: `\\x{`"),
    (r"\pL{1000}\pL{1000}\pL{1000}", "error parsing regexp: expression too large: `\\pL{1000}\\pL{1000}\\pL{1000}`"),
])
def test_go_rejects_with_its_message(pattern: str, message: str) -> None:
    with pytest.raises(GoRegexpError) as e:
        compile_pattern(pattern)
    assert str(e.value).startswith(message)
    assert pattern_error(pattern) == str(e.value)


def test_unicode_scripts_are_accepted_as_go_does() -> None:
    assert pattern_error(r"\p{Greek}") is None
    assert search(r"^\P{Greek}$", "a") and not search(r"^\P{Greek}$", "λ")
    assert search(r"^[\p{Han}\p{Hiragana}]+$", "日本ひらがな")


@pytest.mark.parametrize("pattern", [
    r"^[\p{L}\p{N}._-]{1,253}$",
    r"\pL{1000}",  # RE2 needs some 20 MB for it (UTF-8 byte ranges, a thousand times), within its budget
    "(?P<n>a)(?P<n>b)",  # duplicate names: Go accepts them
    r"\Q\C(?<=\E",  # quoted: literal text
    r"\\C",  # a backslash, then C
    "(" * 999 + "a" + ")" * 999,
])
def test_go_accepts(pattern: str) -> None:
    assert pattern_error(pattern) is None


@pytest.mark.parametrize("pattern,code", [
    pytest.param(r"\pL" * 300_000, "expression too large", id="unicode-classes"),  # RE2: a minute and 9 GB
    pytest.param(r"[\pL]" * 200_000, "expression too large", id="unicode-classes-in-classes"),
    pytest.param("[" + "[:" * 500_000 + "a]", "expression too large", id="posix-searches"),  # RE2: minutes
    pytest.param("(" + "[" + "[:" * 500_000, "expression too large", id="posix-searches-in-group"),
    # an earlier error comes first, as in Go
    pytest.param("a**" + r"\pL" * 300_000, "invalid nested repetition operator", id="error-before-classes"),
    pytest.param("[z-a]" + "[" + "[:" * 500_000, "invalid character class range", id="error-before-searches"),
])
def test_patterns_too_costly_for_re2s_parser_are_refused_quickly(pattern: str, code: str) -> None:
    """RE2's parser builds each \\p class in full (35 kB for \\pL), and for each "[:" in a class with no ":]"
    after it searches the rest of the pattern: both are bounded before RE2 sees the pattern."""
    start = time.perf_counter()
    error = pattern_error(pattern)
    assert error is not None and error.startswith(f"error parsing regexp: {code}: "), error and error[:80]
    assert time.perf_counter() - start < 10.0


def test_within_the_bounds_on_re2s_parser() -> None:
    assert pattern_error(r"\p{Greek}" * 1000) is None
    too_many = r"\p{Greek}" * 1001
    assert pattern_error(too_many) == f"error parsing regexp: expression too large: `{too_many}`"
    assert search("^[" + "[:" * 100 + "a]+$", "[:a")  # "[" with no ":]" after it is a literal, as in Go


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


# -- generated: the translation against RE2 -------------------------------------------------------

_ATOMS = ["a", "b", "A", "é", "É", "k", "K", "\u212a", "0", "9", "_", " ", "-", ".", r"\.", r"\d", r"\D", r"\w",
          r"\W", r"\s", r"\S", r"\pL", r"\p{Lu}", r"\PN", r"\n", r"\x41", r"\x{e9}", "[a-c]", "[^a]", r"[\d_]",
          "[[:alpha:]]", "[[:^digit:]x]", "[-a]", "[a-]", "[]a]", r"[\]]", "(?i:a)", r"\Qa.\E", "^", "$", r"\A",
          r"\z", r"\b", r"\B", "(?m:^)", "(?m:$)", "(?s:.)", "{", "a{", r"\Qé"]
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


def _latin1_re2(pattern: str) -> re2._Regexp | None:
    """RE2 reading one byte as one character: Go's way of stepping through a string, for Latin-1 strings."""
    try:
        data = pattern.encode("latin-1")
    except UnicodeEncodeError:
        return None
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    try:
        return re2.compile(data, options)
    except re2.error:
        return None


@settings(max_examples=EXAMPLES or 400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), texts=st.lists(_TEXT, min_size=1, max_size=6))
@example(pattern=r"(?:a|\B)\B", texts=["0É0", "0é", "0Kk\u212a"])
def test_same_answers_as_re2(pattern: str, texts: list[str]) -> None:
    """Compiled or refused as RE2 does (these patterns hold nothing only Go refuses), and answered as RE2 answers
    when it steps one character at a time (its Latin-1 mode, which folds case in ASCII only); otherwise as RE2
    answers in UTF-8, when no ``\\B`` can fall between two bytes of a character."""
    try:
        theirs = re2.compile(pattern)
    except re2.error:
        theirs = None
    ours_error = pattern_error(pattern)
    assert (ours_error is None) == (theirs is not None), (pattern, ours_error)
    if theirs is None:
        return
    rx = compile_pattern(pattern)
    by_character = _latin1_re2(pattern)
    for text in texts:
        latin1 = max(text, default="a") <= "\xff" and ("(?i" not in pattern or text.isascii())
        if by_character is not None and latin1:
            assert rx.search(text) == bool(by_character.search(text.encode("latin-1"))), (pattern, text)
        elif r"\B" not in pattern or text.isascii():
            assert rx.search(text) == bool(theirs.search(text)), (pattern, text)


_GO_MESSAGE = re.compile(r"error parsing regexp: (?P<code>[^:]+): `(?P<expr>.*)`", re.DOTALL)
_GO_CODES = {v for k, v in vars(go_regexp).items() if k.startswith("ERR_")}


@settings(max_examples=EXAMPLES or 300, deadline=None)
@given(pattern=st.text(alphabet=st.sampled_from(list("ab()[]{}|*+?^$\\.,:-=!<>PiImsUx0129dDwWsSpQEAzbBCé_")),
                       max_size=10))
def test_random_syntax_accepted_or_refused_as_re2(pattern: str) -> None:
    """Garbage patterns: refused exactly when RE2 refuses them, or for ``\\C``, which only Go refuses; always with
    one of Go's messages, never another exception."""
    try:
        re2.compile(pattern)
        accepted = True
    except re2.error:
        accepted = False
    error = pattern_error(pattern)
    if error is not None:
        got = _GO_MESSAGE.fullmatch(error)
        assert got is not None and got["code"] in _GO_CODES, (pattern, error)
    if accepted and error is not None:
        assert error == "error parsing regexp: invalid escape sequence: `\\C`", (pattern, error)
    elif accepted:
        for text in ("", "ab", "aé(", "P<é>"):
            compile_pattern(pattern).search(text)
    else:
        assert error is not None, pattern


def test_empty_width_assertions_are_looked_at_between_runes_only() -> None:
    """Go's regexp steps through runes: \\B cannot hold inside the two UTF-8 bytes of "É" (RE2 in C++, which steps
    through bytes, says it can)."""
    assert not compile_pattern(r"\B").search("0É0")
    assert compile_pattern(r"\B").search("É")  # before "É": neither side is a word character
    assert bool(re2.search(r"\B", "0É0"))  # what the translation is for
    assert compile_pattern(r"\B\Qa(").search("xa(") and not compile_pattern(r"\B\Qa(").search("éa(")


def test_strings_python_holds_but_utf8_cannot() -> None:
    """A lone surrogate (Python's json decodes "\\ud800" to one) is matched as U+FFFD, as Go's JSON decoder makes
    it; a pair is the one character it stands for."""
    assert search("^a.b$", "a\ud800b") and search("^a\ufffdb$", "a\udc00b")
    assert search("^.$", "\ud83d\ude00")
    assert pattern_error("\ud800") is None and search("\ud800", "\ufffd")
