"""karmadactl's YAML (Go's yaml.v3 over a JSON value): key order, quoting, numbers, indentation."""

from __future__ import annotations

import functools

import pytest

from flotilla.cli.goyaml import dump, key_less, resolves_to_string


def test_keys_sort_naturally_with_non_letters_first() -> None:
    keys = ["a10", "a9", "aB", "a_b", "b", "A", "10", "9"]
    ordered = sorted(keys, key=functools.cmp_to_key(lambda a, b: -1 if key_less(a, b) else 1))
    assert ordered == ["9", "10", "A", "a_b", "a9", "a10", "aB", "b"]


@pytest.mark.parametrize(("text", "plain"), [
    ("hello", True), ("1Gi", True), ("500m", True), ("=", True), ("<<", True),
    ("1", False), ("1e3", False), ("0x1F", False), ("0o17", False), ("1_000", False), (".5", False),
    ("true", False), ("True", False), ("yes", False), ("n", False), ("off", False), ("null", False), ("~", False),
    ("", False), ("2024-01-01", False), ("2024-01-01T10:00:00Z", False), ("1:20", False), (".inf", False),
    ("2024-13-01", True), ("-", True),
])
def test_strings_that_would_read_as_another_type_are_not_plain(text: str, plain: bool) -> None:
    assert resolves_to_string(text) is plain


def test_block_layout_numbers_and_quoting() -> None:
    value = {"items": [{"name": "a", "spec": {"cpu": "1", "when": "2024-01-01T00:00:00Z"}}, [1, 2]],
             "size": 1000000, "ratio": 0.5, "empty": {}, "none": [], "text": "x\ny\n", "star": "*"}
    assert dump(value) == (
        "empty: {}\n"
        "items:\n"
        "    - name: a\n"
        "      spec:\n"
        "        cpu: \"1\"\n"
        "        when: \"2024-01-01T00:00:00Z\"\n"
        "    - - 1\n"
        "      - 2\n"
        "none: []\n"
        "ratio: 0.5\n"
        "size: 1e+06\n"
        "star: '*'\n"
        "text: |\n"
        "    x\n"
        "    y\n"
    )


@pytest.mark.parametrize(("value", "text"), [(3, "3\n"), (True, "true\n"), (None, "null\n"), ({}, "{}\n"),
                                             ([], "[]\n"), ("1", '"1"\n')])
def test_top_level_scalars_and_empties(value: object, text: str) -> None:
    assert dump(value) == text
