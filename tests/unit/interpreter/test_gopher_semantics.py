"""Lua customizations behave as under Karmada's gopher-lua: pairs order, number strings, status items."""

from __future__ import annotations

import pytest

from flotilla.interpreter.lua import lua_aggregate_status, ordered_constructors, run_script


def values(script: str, *args: object) -> object:
    return run_script(script, "F", list(args))[0].value


def test_constructors_are_wrapped_on_the_same_lines() -> None:
    src = 'local t = {a = 1, [k] = 2, f(x), g{y = 1}}\n-- {not code}\nlocal s = "{" .. [[ { ]]'
    out = ordered_constructors(src)
    assert out.count("\n") == src.count("\n")
    assert out.splitlines()[0] == ('local t = __flotilla_t({a = 1, [k] = 2, f(x), g(__flotilla_t({y = 1}, "y"))}, '
                                   '"a")')
    assert out.splitlines()[1:] == src.splitlines()[1:]


def test_braces_in_strings_and_comments_are_left_alone() -> None:
    script = "function F() local s = [==[a{b]==] .. '{' -- {\n return { s, \"}\" } end"
    assert values(script) == ["a{b{", "}"]


def test_pairs_yields_whole_number_keys_then_keys_in_insertion_order() -> None:
    script = """
    function F()
      local t = {}
      t.z = 1; t[2] = 1; t.a = 1; t[1] = 1; t.z = nil; t.m = 1; t.z = 2
      local keys = {}
      for k in pairs(t) do keys[#keys + 1] = tostring(k) end
      return keys
    end"""
    assert values(script) == ["1", "2", "z", "a", "m"]


@pytest.mark.parametrize(("expr", "text"), [
    ("1e15", "1000000000000000"), ("1/3", "0.3333333333333333"), ("0.1 + 0.2", "0.30000000000000004"),
    ("1234567.5", "1.2345675e+06"), ("0.00001", "1e-05"), ("-2.5e-7", "-2.5e-07"), ("123456.5", "123456.5"),
    ("-0.0", "0"), ("2^53", "9007199254740992"), ("1/0", "+Inf"), ("-1/0", "-Inf"),
])
def test_tostring_writes_numbers_as_gopher_lua(expr: str, text: str) -> None:
    assert values(f"function F() return tostring({expr}) end") == text


def test_status_items_none_is_nil_and_an_empty_list_a_table() -> None:
    script = """
    function AggregateStatus(obj, items)
      obj.status = { kind = type(items) }
      return obj
    end"""
    obj = {"apiVersion": "example.io/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert lua_aggregate_status(script, obj, None)["status"] == {"kind": "nil"}
    assert lua_aggregate_status(script, obj, [])["status"] == {"kind": "table"}
