"""The Lua sandbox: what scripts cannot reach, the 1 s time limit, the memory limit."""

from __future__ import annotations

import time

import pytest

from flotilla.interpreter import LuaLimits, LuaScriptError, check_script
from flotilla.interpreter.lua import lua_interpret_health, run_script


def health(body: str) -> bool:
    return lua_interpret_health(f"function InterpretHealth(obj)\n{body}\nend", {"kind": "X", "apiVersion": "v1"})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("return os.execute('id') == 0", "os.execute is not available"),
        ("return os.exit(1)", "os.exit is not available"),
        ("return os.getenv('HOME') ~= nil", "os.getenv is not available"),
        ("return os.remove('/tmp/x') ~= nil", "os.remove is not available"),
        ("return io.open('/etc/passwd') ~= nil", "attempt to index global 'io'"),
        ("return io.popen('id') ~= nil", "attempt to index global 'io'"),
        ("return require('io') ~= nil", "module 'io' is not available"),
        ("return require('os').execute ~= nil", "os.execute is not available"),
        ("return require('debug') ~= nil", "module 'debug' is not available"),
        ("return require('ffi') ~= nil", "module 'ffi' is not available"),
        ("return load('return true')()", "load is not available"),
        ("return loadstring('return true')()", "loadstring is not available"),
        ("return dofile('/etc/passwd')", "dofile is not available"),
        ("return loadfile('/etc/passwd') ~= nil", "loadfile is not available"),
        ("return string.dump(InterpretHealth) ~= nil", "string.dump is not available"),
        ("return (''):dump() ~= nil", "string.dump is not available"),
        ("return ('x'):rep(1e9) ~= nil", "string.rep is not available"),
        ("setfenv(1, {}) return true", "setfenv is not available"),
        ("return getfenv(0).debug ~= nil", "getfenv is not available"),
        ("getmetatable('').__index = {} return true", "getmetatable is not available"),
        ("setmetatable({}, {__gc = function() end}) return true", "setmetatable is not available"),
        ("return rawget(_G, 'debug') ~= nil", "rawget is not available"),
        ("rawset(_G, 'x', 1) return true", "rawset is not available"),
        ("return newproxy(true) ~= nil", "newproxy is not available"),
        ("collectgarbage() return true", "collectgarbage is not available"),
        ("module('m') return true", "module is not available"),
        ("return debug.getinfo(1) ~= nil", "attempt to index global 'debug'"),
        ("return coroutine.create(print) ~= nil", "attempt to index global 'coroutine'"),
        ("return package.loaded ~= nil", "attempt to index global 'package'"),
        ("return python.eval('1') ~= nil", "attempt to index global 'python'"),
        ("return _G.io.open ~= nil", "attempt to index field 'io'"),
    ],
)
def test_escapes_are_refused(body: str, message: str) -> None:
    with pytest.raises(LuaScriptError, match=message):
        health(body)


def test_what_remains_is_usable() -> None:
    assert health("""
      local parts = {}
      for w in string.gmatch("a,b,c", "[^,]+") do table.insert(parts, w:upper()) end
      local ok, err = pcall(error, "caught")
      return table.concat(parts) == "ABC" and not ok and err == "caught"
        and math.floor(2.5) == 2 and type(os.time()) == "number" and type(os.date("%Y")) == "string"
        and select("#", 1, 2) == 2 and tostring(nil) == "nil" and tonumber("0x10") == 16
        and _G.InterpretHealth ~= nil and string.format("%03d", 7) == "007"
        and require("string") == string and ("abc"):sub(2) == "bc"
    """)


def test_binary_chunks_are_refused() -> None:
    with pytest.raises(LuaScriptError, match="precompiled"):
        lua_interpret_health("\x1bLuaQ\x00", {"kind": "X"})
    with pytest.raises(LuaScriptError, match="precompiled"):
        check_script("\x1bLuaQ")


def test_check_script_compiles_without_running() -> None:
    check_script("while true do end")  # compiles; never runs
    with pytest.raises(LuaScriptError, match="does not compile: luaScript:1:"):
        check_script("function (")


def test_syntax_and_runtime_errors_say_where() -> None:
    with pytest.raises(LuaScriptError, match=r"does not compile: luaScript:3: '<name>' expected near 'end'"):
        lua_interpret_health("function InterpretHealth(obj)\n  return obj.\nend", {"kind": "X"})
    with pytest.raises(LuaScriptError, match=r"luaScript:2: attempt to index field 'status' \(a nil value\)"):
        lua_interpret_health("function InterpretHealth(obj)\n  return obj.status.ready\nend", {"kind": "X"})
    with pytest.raises(LuaScriptError, match="must define a global function InterpretHealth"):
        lua_interpret_health("local function InterpretHealth(obj) return true end", {"kind": "X"})


@pytest.mark.parametrize(
    "body",
    [
        "while true do end",
        "local i = 0 repeat i = i + 1 until false",
        "local function f() return f() end return f()",
        # the timeout cannot be swallowed by pcall / xpcall
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        "local ok = pcall(function() while true do end end) return ok",
        "while true do string.gsub('aaaa', 'a', function(c) return c end) end",
        "local t = {} for i = 1, 1e8 do t[#t % 1000 + 1] = tostring(i) end return false",
    ],
)
def test_time_limit_stops_runaway_scripts(body: str) -> None:
    start = time.monotonic()
    with pytest.raises(LuaScriptError, match=r"did not finish within the 1s time limit"):
        health(body)
    assert 0.9 < time.monotonic() - start < 3.0


def test_time_limit_covers_the_script_body_and_is_configurable() -> None:
    start = time.monotonic()
    with pytest.raises(LuaScriptError, match=r"0.2s time limit"):
        lua_interpret_health("while true do end", {"kind": "X"}, limits=LuaLimits(timeout=0.2))
    assert time.monotonic() - start < 1.0


def test_memory_limit() -> None:
    limits = LuaLimits(max_memory=16 * 1024 * 1024)
    with pytest.raises(LuaScriptError, match="16 MiB memory limit"):
        lua_interpret_health("function InterpretHealth(o) local s = 'x' for i = 1, 40 do s = s .. s end "
                             "return true end", {"kind": "X"}, limits=limits)
    # a caught memory error does not let a script run forever
    with pytest.raises(LuaScriptError, match="memory limit|time limit"):
        lua_interpret_health("function InterpretHealth(o) while true do pcall(function() local t = {} "
                             "while true do t[#t + 1] = {} end end) end end", {"kind": "X"}, limits=limits)


def test_pattern_functions_refuse_huge_subjects() -> None:
    with pytest.raises(LuaScriptError, match="more than the 1000000 allowed"):
        health("local s = table.concat({}, '', 1, 0) for i = 1, 21 do s = s .. (s == '' and 'x' or s) end "
               "return s:find('.-.-.-y') ~= nil")


def test_sandbox_state_is_not_shared() -> None:
    assert health("string.upper = nil return true")
    assert health("return string.upper('a') == 'A'")


def test_results_that_do_not_convert_are_errors() -> None:
    cases = {
        "return function() end": "cannot convert a function value",
        "return {f = print}": "cannot convert a function value to JSON at f",
        "local t = {} t.self = t return t": "appears twice",
        "local s = {} return {a = s, b = s}": "appears twice",
        "return {1, 2, nil, 4}": "gaps",
        "return {[1] = 'a', x = 'b'}": "mixes string and number keys",
        "return {[true] = 1}": "boolean key",
        "return {n = 0/0}": "NaN",
        "return {n = 1/0}": "infinite",
    }
    for body, message in cases.items():
        with pytest.raises(LuaScriptError, match=message):
            run_script(f"function F() {body} end", "F", [])
