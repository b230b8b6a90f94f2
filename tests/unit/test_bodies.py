"""Request body decoding: libyaml and the pure-Python loader agree, and the budgets hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flotilla.apiserver import bodies
from flotilla.apiserver.bodies import MAX_ALIAS_VALUES, MAX_ALIASES, parse_body
from flotilla.apiserver.errors import ApiError

LOADERS = [pytest.param(False, id="libyaml"), pytest.param(True, id="pure-python")]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _error(raw: bytes, **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        parse_body(raw, yaml_ok=True, **kw)
    return info.value


def test_yaml_is_read_by_libyaml_when_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "the project's environment is expected to have libyaml"
    assert bodies.HAS_LIBYAML
    assert issubclass(bodies._LOADER, yaml.CSafeLoader)


@pytest.mark.parametrize("pure", LOADERS)
@pytest.mark.parametrize("text,expected", [
    pytest.param(b"a: 2001-12-14\nb: 2001-12-14T21:59:43.10-05:00\n",
                 {"a": "2001-12-14", "b": "2001-12-14T21:59:43.10-05:00"}, id="timestamps-stay-strings"),
    pytest.param(b"a: 1\na: 2\n", {"a": 2}, id="repeated-key-last-wins"),
    pytest.param(b"base: &b {x: 1, y: 1}\nc: {<<: *b, y: 2}\n", {"base": {"x": 1, "y": 1}, "c": {"x": 1, "y": 2}},
                 id="merge-key"),
    pytest.param(b"{1: a, false: b, ~: c, 2001-12-14: d, 1.5: e}\n",
                 {"1": "a", "false": "b", "null": "c", "2001-12-14": "d", "1.5": "e"}, id="keys-become-strings"),
    pytest.param(b"a: yes\nb: off\nc: 0x1f\nd: 017\ne: ~\nf: ''\ng: '12'\nh: !!str 12\ni: 1_000\n",
                 {"a": True, "b": False, "c": 31, "d": 15, "e": None, "f": "", "g": "12", "h": "12", "i": 1000},
                 id="yaml-1.1-scalars"),
    pytest.param(b"a: 99999999999999999999999\n", {"a": 1e23}, id="beyond-64-bits-a-float"),
    pytest.param(b"a: &x {k: [1, 2]}\nb: *x\nc: [*x, *x]\n",
                 {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}, "c": [{"k": [1, 2]}, {"k": [1, 2]}]}, id="few-aliases"),
    pytest.param(b"", None, id="empty"),
])
def test_both_loaders_decode_yaml_as_kubernetes_does(pure: bool, text: bytes, expected: Any) -> None:
    assert parse_body(text, yaml_ok=True, pure=pure) == expected


@pytest.mark.parametrize("pure", LOADERS)
@pytest.mark.parametrize("text,hint", [
    pytest.param(b"a: !!set {x, y}\n", "set", id="set"),
    pytest.param(b"a: !!binary aGVsbG8=\n", "bytes", id="binary"),
    pytest.param(b"a: .inf\n", "non-finite", id="infinity"),
    pytest.param(b"a: &x [1, *x]\n", "recursive", id="recursive-alias"),
    pytest.param(b"a: *nowhere\n", "undefined alias", id="undefined-alias"),
    pytest.param(b"a: 1\n---\nb: 2\n", "single document", id="two-documents"),
    pytest.param(b"[" * 3000 + b"]" * 3000, "nest", id="deep-nesting"),
])
def test_both_loaders_refuse_what_json_cannot_hold(pure: bool, text: bytes, hint: str) -> None:
    err = _error(text, pure=pure)
    assert err.code == 400 and err.reason == "BadRequest"
    assert hint in err.message, err.message


def _manifests() -> list[bytes]:
    docs = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs += [d.encode() for d in path.read_text().split("\n---\n") if d.strip()]
    return docs


def test_libyaml_and_pure_python_agree_on_every_example_manifest() -> None:
    docs = _manifests()
    assert len(docs) >= 10
    for doc in docs:
        assert parse_body(doc, yaml_ok=True) == parse_body(doc, yaml_ok=True, pure=True), doc[:200]


def _laughs(levels: int, width: int) -> bytes:
    """A "billion laughs": each level a list of ``width`` aliases of the level below."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("pure", LOADERS)
def test_alias_bomb_is_refused_without_expanding_it(pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _laughs(9, 9)  # 9**9 = 387 million strings from under 500 bytes
    assert len(text) < 500

    def expand(*_: Any) -> Any:
        raise AssertionError("the document was expanded before its aliases were counted")

    monkeypatch.setattr(bodies, "to_json_value", expand)
    monkeypatch.setattr(bodies.yaml.constructor.SafeConstructor, "construct_document", expand)
    err = _error(text, pure=pure)
    assert err.code == 400 and err.reason == "BadRequest"
    assert "aliases expand it by more than" in err.message and str(MAX_ALIAS_VALUES) in err.message


def test_wide_alias_use_is_counted_by_the_values_it_repeats() -> None:
    """One list of 900 strings used 999 times: 3 KB of YAML, 900 thousand values once expanded."""
    text = (b"a: &a [" + b",".join([b"x"] * 900) + b"]\nb: [" + b",".join([b"*a"] * 999) + b"]\n")
    assert len(text) < 5000
    err = _error(text)
    assert err.code == 400 and "aliases expand it" in err.message
    # the same shape within the budget decodes, every use a full copy
    small = b"a: &a [" + b",".join([b"x"] * 90) + b"]\nb: [" + b",".join([b"*a"] * 999) + b"]\n"
    value = parse_body(small, yaml_ok=True)
    assert len(value["b"]) == 999 and all(v == ["x"] * 90 for v in value["b"])


def test_more_aliases_than_allowed_are_refused() -> None:
    text = b"a: &a x\nb: [" + b",".join([b"*a"] * (MAX_ALIASES + 1)) + b"]\n"
    err = _error(text)
    assert err.code == 400 and f"more than {MAX_ALIASES} YAML aliases" in err.message
    ok = b"a: &a x\nb: [" + b",".join([b"*a"] * MAX_ALIASES) + b"]\n"
    assert parse_body(ok, yaml_ok=True)["b"] == ["x"] * MAX_ALIASES


@pytest.mark.parametrize("pure", LOADERS)
def test_a_decode_that_runs_out_of_time_is_413(pure: bool) -> None:
    doc = yaml.safe_dump({"data": {f"k{i}": f"v{i}" for i in range(20000)}}).encode()
    assert parse_body(doc, yaml_ok=True, pure=pure)["data"]["k19999"] == "v19999"
    err = _error(doc, pure=pure, seconds=0.0)
    assert err.code == 413 and err.reason == "RequestEntityTooLarge"
    assert "longer than" in err.message and "JSON" in err.message


def test_json_stays_json_and_its_errors_say_so() -> None:
    assert parse_body(b'{"a": [1, {"b": null}]}', yaml_ok=False) == {"a": [1, {"b": None}]}
    with pytest.raises(ApiError) as info:
        parse_body(b"a: 1\n", yaml_ok=False)
    assert info.value.code == 400 and "not valid JSON" in info.value.message
    with pytest.raises(ApiError) as info:
        parse_body(b"[" * 300 + b"]" * 300, yaml_ok=False)
    assert "nests deeper than" in info.value.message
