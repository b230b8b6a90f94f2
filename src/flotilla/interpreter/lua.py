"""Run ResourceInterpreterCustomization Lua scripts (Lua 5.1 through lupa) in a sandbox.

Each call gets a fresh Lua state, so nothing a script does survives it. The script runs in its own
global table that holds only: the safe base functions (``assert error ipairs next pairs pcall print
select tonumber tostring type unpack xpcall``, ``_G``, ``_VERSION``), the ``string`` (without ``dump``
and ``rep``), ``table`` and ``math`` libraries, ``os.time``/``os.date``, and ``require``, which
knows ``"kube"`` (plus those library names). ``collectgarbage dofile getfenv getmetatable load
loadfile loadstring module newproxy rawequal rawget rawset setfenv setmetatable`` are stubs that
raise an error; ``io``, ``debug``, ``coroutine``, ``package`` and lupa's ``python`` do not exist.
Strings keep the library as their metatable's ``__index``, so ``("x"):rep(9)`` is refused as well.
Precompiled (binary) chunks are refused.

Where scripts could tell gopher-lua (Karmada's Lua) from Lua 5.1, the sandbox follows gopher-lua: ``pairs`` yields
the keys 1, 2, ... ascending and then the other keys in the order they were first set (every table constructor of
the script is rewritten by :func:`ordered_constructors`, on the same lines, so that the tables it builds record that
order; the objects passed in have no order to keep, as in Karmada where they come from Go maps), and ``tostring``
and ``print`` write numbers as Go does (``1e15`` is ``1000000000000000``, ``1/3`` is ``0.3333333333333333``).
The ``..`` operator and ``string.format`` keep Lua 5.1's ``%.14g``.

Limits: one call (loading the script, then calling the function) may run for ``timeout`` seconds
(1 s by default, like Karmada). A count hook installed from the privileged side before the script
starts checks a monotonic clock every few thousand VM instructions and raises an error once time is
up; ``pcall``/``xpcall`` inside the script re-raise it, so a script cannot swallow the timeout. The
Lua state's memory is capped (``max_memory``, 128 MiB by default: the allocator refuses more, the script fails
with a memory error). A single C library call is not interruptible, so the pattern functions (``find match
gmatch gsub``) refuse subjects longer than 1,000,000 bytes. The results' JSON, which the host decodes outside
the Lua state, may take ``max_result`` bytes (4 MiB). A failing call raises :class:`LuaScriptError` whose
``reason`` is ``timeout``, ``memory`` or ``error``.

The Lua state is closed as soon as the call returns: nothing it holds refers back to it (the kube helpers reach
it through a box emptied after the call), so it never waits for Python's cycle collector with up to
``max_memory`` bytes. The call blocks its thread for at most about ``timeout``; async callers run it in a worker
thread (:meth:`flotilla.interpreter.dispatch.ResourceInterpreter.offload`), lupa releasing the GIL while Lua runs.

JSON <-> Lua: objects become tables with string keys, arrays become tables indexed 1..n, ``null``
values (and ``null`` array elements) are left out, numbers are Lua numbers (doubles). Back to JSON,
a table with string keys is an object, one with keys exactly 1..n is an array, anything else (mixed
or sparse keys, functions, NaN, a table reached twice) is an error. An **empty table** is ambiguous;
like Karmada it is decided from reference objects given per operation, by its path (object keys,
array positions ignored): ``{}`` where a reference has an empty object at that path, ``[]`` where one
has an empty array, and otherwise the entry is **dropped**. The references are the inputs the
result is derived from for Retain (desired and observed), ReviseReplica and RestoreState (the
object); the other operations have none, so their empty tables are dropped (for instance a FlinkDeployment's
``savepointHistory: []`` disappears from a reflected status). An empty table returned as the whole
result is ``{}`` for operations that return an object or status and ``[]`` for lists.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from lupa import lua51

from flotilla.interpreter import native
from flotilla.interpreter.operations import (
    JSON,
    REASON_MEMORY,
    REASON_TIMEOUT,
    InterpreterError,
    LuaScriptError,
    Operation,
    ReplicaResult,
    describe_value,
)
from flotilla.kube.quantity import (
    Quantity,
    QuantityError,
    QuantityFormat,
    format_quantity,
    parse_quantity,
)

__all__ = [
    "LuaLimits",
    "DEFAULT_LIMITS",
    "LuaValue",
    "check_script",
    "run_script",
    "resolve_empty_tables",
    "lua_get_replicas",
    "lua_get_components",
    "lua_revise_replica",
    "lua_retain",
    "lua_reflect_status",
    "lua_aggregate_status",
    "lua_interpret_health",
    "lua_get_dependencies",
    "lua_restore_state",
]

log = logging.getLogger(__name__)

MAX_DEPTH = 200
MAX_PATTERN_SUBJECT = 1_000_000
MAX_PRINT_BYTES = 64 * 1024


@dataclass(frozen=True)
class LuaLimits:
    """Per-call limits. ``hook_interval`` is how many VM instructions pass between clock checks."""

    timeout: float = 1.0
    max_memory: int = 128 * 1024 * 1024
    hook_interval: int = 10_000
    #: bytes of JSON all of one call's results may take together (the host decodes them outside the Lua state)
    max_result: int = 4 * 1024 * 1024


DEFAULT_LIMITS = LuaLimits()


@dataclass(frozen=True)
class LuaValue:
    """One value a script returned: its Lua type and its JSON form.

    For tables ``value`` is the decoded JSON in which ``None`` stands for an empty table (Lua tables
    cannot hold nil, so nothing else is ``None``); see :func:`resolve_empty_tables`.
    """

    type: str  # "nil", "boolean", "number", "string" or "table"
    value: Any


# The privileged side of the sandbox. It runs once per Lua state before any script, keeps the
# dangerous functions in its locals and returns the function that runs a script.
_BOOTSTRAP = r"""
local clock, limit, every, max_subject, max_print, max_result,
      py_resource_add, py_pod_requirements, py_pod_dependencies, py_quantity = ...

local sethook = debug.sethook
local loadstring, setfenv, pcall, xpcall, error = loadstring, setfenv, pcall, xpcall, error
local select, type, tostring, pairs, next, rawget, rawset = select, type, tostring, pairs, next, rawget, rawset
local unpack, setmetatable, getmetatable = unpack, setmetatable, getmetatable
local format, gsub, byte, concat, sort, floor, huge, tonumber =
      string.format, string.gsub, string.byte, table.concat, table.sort, math.floor, math.huge, tonumber
local rep, match, sub = string.rep, string.match, string.sub

local TIMEOUT = "\0timeout"
local deadline, expired = 0, false
local function hook()
  if expired or clock() > deadline then
    expired = true
    error(TIMEOUT, 0)
  end
end
local function pack(...) return { n = select("#", ...), ... } end

-- Runs f under the time limit; returns pack(pcall(f, ...)).
local function guarded(f, ...)
  deadline, expired = clock() + limit, false
  sethook(hook, "", every)
  local r = pack(pcall(f, ...))
  sethook()
  return r
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local function stub(name)
  return function()
    error(name .. " is not available in the resource interpreter sandbox", 2)
  end
end

-- ------------------------------------------------------------------------------ JSON encoding
local function quote(s)
  return '"' .. gsub(s, '[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return format("\\u%04x", byte(c))
  end) .. '"'
end

local function encode(root)
  local buf, seen, path = {}, {}, {}
  local function fail(msg)
    local where = #path > 0 and (" at " .. concat(path, ".")) or ""
    error("\0encode" .. msg .. where, 0)
  end
  local function enc(v, depth)
    local t = type(v)
    if t == "string" then
      buf[#buf + 1] = quote(v)
    elseif t == "number" then
      if v ~= v or v == huge or v == -huge then fail("cannot convert NaN or an infinite number to JSON") end
      if v == floor(v) and v > -9.2e18 and v < 9.2e18 then
        buf[#buf + 1] = format("%.0f", v)
      else
        buf[#buf + 1] = format("%.17g", v)
      end
    elseif t == "boolean" then
      buf[#buf + 1] = v and "true" or "false"
    elseif t == "table" then
      if seen[v] then fail("the same table appears twice (shared or recursive reference); copy it") end
      seen[v] = true
      if depth > 200 then fail("tables nest too deeply") end
      if next(v) == nil then
        buf[#buf + 1] = "null"  -- an empty table: decided later from the references
        return
      end
      local n, strings, numbers = 0, 0, 0
      for k in pairs(v) do
        n = n + 1
        local kt = type(k)
        if kt == "string" then strings = strings + 1
        elseif kt == "number" then numbers = numbers + 1
        else fail("a table has a " .. kt .. " key; only string keys (objects) or 1..n (arrays) convert") end
      end
      if strings == n then
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        sort(keys)
        buf[#buf + 1] = "{"
        for i, k in ipairs(keys) do
          if i > 1 then buf[#buf + 1] = "," end
          buf[#buf + 1] = quote(k)
          buf[#buf + 1] = ":"
          path[#path + 1] = k
          enc(rawget(v, k), depth + 1)
          path[#path] = nil
        end
        buf[#buf + 1] = "}"
      elseif numbers == n then
        for i = 1, n do
          if rawget(v, i) == nil then fail("an array table has gaps or keys other than 1.." .. n) end
        end
        buf[#buf + 1] = "["
        for i = 1, n do
          if i > 1 then buf[#buf + 1] = "," end
          path[#path + 1] = "[" .. i .. "]"
          enc(rawget(v, i), depth + 1)
          path[#path] = nil
        end
        buf[#buf + 1] = "]"
      else
        fail("a table mixes string and number keys; it is neither an object nor an array")
      end
    else
      fail("cannot convert a " .. t .. " value to JSON")
    end
  end
  enc(root, 0)
  return concat(buf)
end

-- -------------------------------------------------------------------------------- the sandbox
local env = {}
for _, name in ipairs({"assert", "error", "ipairs", "next", "pairs", "select", "tonumber", "tostring",
                       "type", "unpack"}) do
  env[name] = _G[name]
end
env._VERSION = _VERSION
env._G = env

-- pcall/xpcall must not swallow the timeout: once time is up the error is raised again.
env.pcall = function(f, ...)
  local r = pack(pcall(f, ...))
  if expired then error(TIMEOUT, 0) end
  return unpack(r, 1, r.n)
end
env.xpcall = function(f, handler)
  local r = pack(xpcall(f, handler))
  if expired then error(TIMEOUT, 0) end
  return unpack(r, 1, r.n)
end

for _, name in ipairs({"collectgarbage", "dofile", "getfenv", "getmetatable", "load", "loadfile", "loadstring",
                       "module", "newproxy", "rawequal", "rawget", "rawset", "setfenv", "setmetatable"}) do
  env[name] = stub(name)
end

-- Numbers as gopher-lua writes them (tostring, print): whole numbers in int64 range as integers, others with the
-- shortest digits that read back the same, in exponent form when the exponent is below -4 or at least 6 (Go's %v).
local function num2str(n)
  if n ~= n then return "NaN" end
  if n == huge then return "+Inf" elseif n == -huge then return "-Inf" end
  if n == floor(n) and n >= -9.2233720368547758e18 and n < 9.2233720368547758e18 then return format("%d", n) end
  local s
  for p = 0, 16 do
    s = format("%." .. p .. "e", n)
    if tonumber(s) == n then break end
  end
  local sign, lead, rest, e = match(s, "^(-?)(%d)%.?(%d*)e([-+]%d+)$")
  local digits = gsub(lead .. rest, "0+$", "")
  local exp = tonumber(e)
  if exp < -4 or exp >= 6 then
    local mantissa = #digits > 1 and (sub(digits, 1, 1) .. "." .. sub(digits, 2)) or digits
    return format("%s%se%s%02d", sign, mantissa, exp < 0 and "-" or "+", exp < 0 and -exp or exp)
  end
  if exp < 0 then return sign .. "0." .. rep("0", -exp - 1) .. digits end
  if #digits <= exp + 1 then return sign .. digits .. rep("0", exp + 1 - #digits) end
  return sign .. sub(digits, 1, exp + 1) .. "." .. sub(digits, exp + 2)
end
local function tostr(v)
  if type(v) == "number" then return num2str(v) end
  return tostring(v)
end
env.tostring = tostr

-- pairs in gopher-lua's order: the whole numbers 1, 2, ... (its array part) ascending, then the other keys in the
-- order they were first set. Tables a script builds record that order: the host rewrites every table constructor
-- `{...}` into `__flotilla_t({...}, "key", ...)` (the constructor's named fields, in source order), which gives the
-- table a metatable whose __newindex notes each new key. Other tables (the objects passed in) have no such record;
-- gopher-lua's order for them is Go's map order, which is random, so Lua's own order stands in for it.
local MAX_ARRAY_INDEX = 67108864
local orders = setmetatable({}, { __mode = "k" })
local function array_key(k)
  return type(k) == "number" and k >= 1 and k < MAX_ARRAY_INDEX and k == floor(k)
end
local function note(t, k)
  local o = orders[t]
  if o.index[k] == nil then
    o.n = o.n + 1
    o.keys[o.n] = k
    o.index[k] = o.n
  end
end
local ordered_mt = {
  __newindex = function(t, k, v)
    rawset(t, k, v)
    if v ~= nil and not array_key(k) then note(t, k) end
  end,
}
env.__flotilla_t = function(t, ...)
  orders[t] = { keys = {}, index = {}, n = 0 }
  for i = 1, select("#", ...) do
    local k = select(i, ...)
    if rawget(t, k) ~= nil then note(t, k) end
  end
  for k in next, t do
    if not array_key(k) then note(t, k) end
  end
  return setmetatable(t, ordered_mt)
end
env.pairs = function(t)
  if type(t) ~= "table" then return pairs(t) end
  local keys, n, ints = {}, 0, {}
  for k in next, t do
    if array_key(k) then ints[#ints + 1] = k end
  end
  sort(ints)
  for i = 1, #ints do keys[i] = ints[i] end
  n = #ints
  local o = orders[t]
  if o ~= nil then
    for i = 1, o.n do
      n = n + 1
      keys[n] = o.keys[i]
    end
  else
    for k in next, t do
      if not array_key(k) then
        n = n + 1
        keys[n] = k
      end
    end
  end
  local i = 0
  return function()
    while i < n do
      i = i + 1
      local k = keys[i]
      local v = rawget(t, k)
      if v ~= nil then return k, v end
    end
    return nil
  end, t, nil
end

local output, output_size = {}, 0
env.print = function(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostr((select(i, ...))) end
  local line = concat(parts, "\t")
  if output_size + #line <= max_print then
    output[#output + 1] = line
    output_size = output_size + #line + 1
  end
end

local safe_string = copy(string)
safe_string.dump = stub("string.dump")
safe_string.rep = stub("string.rep")
for _, name in ipairs({"find", "match", "gmatch", "gsub"}) do
  local f = string[name]
  safe_string[name] = function(s, pattern, ...)
    if type(s) == "string" and #s > max_subject then
      error(format("string.%s: the subject is %d bytes, more than the %d allowed", name, #s, max_subject), 2)
    end
    return f(s, pattern, ...)
  end
end
safe_string.gfind = safe_string.gmatch
getmetatable("").__index = safe_string
env.string = safe_string
env.table = copy(table)
env.math = copy(math)
env.os = setmetatable({ time = os.time, date = os.date }, {
  __index = function(_, k)
    error("os." .. tostring(k) .. " is not available in the resource interpreter sandbox (only os.time and os.date)", 2)
  end,
})

-- the kube helper library: the work is done in Python, values cross as JSON text / new tables
local function call_py(fn, ...)
  local ok, res = fn(...)
  if not ok then error(res, 3) end
  return res
end
local function json_arg(name, v, i)
  if type(v) ~= "table" then
    error(format("bad argument #%d to '%s' (table expected, got %s)", i, name, type(v)), 3)
  end
  local ok, text = pcall(encode, v)
  if not ok then error(name .. ": " .. tostring(text):gsub("^%z%a+", ""), 3) end
  return text
end
local function quantities(name, ...)
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if a ~= nil and type(a) ~= "string" then
      error(format("bad argument #%d to '%s' (string expected, got %s)", i, name, type(a)), 3)
    end
  end
end
local kube = {}
kube.resourceAdd = function(...)
  quantities("resourceAdd", ...)
  return call_py(py_resource_add, ...)
end
kube.getResourceQuantity = function(...)
  if select("#", ...) ~= 1 then error("getResourceQuantity takes exactly one argument", 2) end
  quantities("getResourceQuantity", ...)
  return call_py(py_quantity, ...)
end
kube.accuratePodRequirements = function(...)
  if select("#", ...) ~= 1 then error("accuratePodRequirements takes exactly one argument (a pod template)", 2) end
  return call_py(py_pod_requirements, json_arg("accuratePodRequirements", (...), 1))
end
kube.getPodDependencies = function(...)
  if select("#", ...) ~= 2 then
    error("getPodDependencies takes exactly two arguments (a pod template and a namespace)", 2)
  end
  local template, namespace = ...
  local text = json_arg("getPodDependencies", template, 1)
  if namespace == nil then namespace = "default"
  elseif type(namespace) == "number" then namespace = tostring(namespace)
  elseif type(namespace) ~= "string" then
    error(format("bad argument #2 to 'getPodDependencies' (string expected, got %s)", type(namespace)), 2)
  end
  return call_py(py_pod_dependencies, text, namespace)
end

local modules = { kube = kube, string = safe_string, table = env.table, math = env.math, os = env.os }
env.require = function(name)
  local m = modules[name]
  if m == nil then
    error("module '" .. tostring(name) .. "' is not available in the resource interpreter sandbox; "
          .. "require() offers \"kube\" (and string, table, math, os)", 2)
  end
  return m
end

-- the host drops everything else it could reach
python = nil

local MISSING, NOT_FUNCTION, CALLED = {}, {}, {}

local function message(e)
  if e == TIMEOUT or expired then return "timeout", "" end
  if type(e) ~= "string" then return "error", "(error object is a " .. type(e) .. " value)" end
  if e == "not enough memory" then return "memory", e end
  return "error", e
end

-- run(script, function name, number of results, args...) ->
--   status, message, print output, then for each result: type, JSON text
return function(script, ordered, fname, nrets, ...)
  if byte(script, 1) == 27 then
    return "error", "precompiled (binary) Lua chunks are not allowed; give the script as source text", ""
  end
  local chunk, err = loadstring(ordered, "=luaScript")
  if not chunk then
    chunk, err = loadstring(script, "=luaScript")
  end
  if not chunk then return "syntax", err, "" end
  setfenv(chunk, env)
  local args = pack(...)
  local r = guarded(function()
    chunk()
    local f = rawget(env, fname)
    if f == nil then return MISSING end
    if type(f) ~= "function" then return NOT_FUNCTION, type(f) end
    return CALLED, f(unpack(args, 1, args.n))
  end)
  local printed = concat(output, "\n")
  if not r[1] then
    local status, msg = message(r[2])
    return status, msg, printed
  end
  if r[2] == MISSING then return "missing", "", printed end
  if r[2] == NOT_FUNCTION then return "notfunction", r[3], printed end
  local out = { "ok", "", printed }
  local e = guarded(function()
    local size = 0
    for i = 1, nrets do
      local v = r[i + 2]
      local text = (v == nil) and "null" or encode(v)
      size = size + #text
      if size > max_result then error("\0toolarge", 0) end
      out[#out + 1] = type(v)
      out[#out + 1] = text
    end
  end)
  if not e[1] then
    local status, msg = message(e[2])
    if status == "error" and e[2] == "\0toolarge" then
      return "toolarge", "", printed
    end
    if status == "error" and type(e[2]) == "string" and e[2]:sub(1, 7) == "\0encode" then
      return "badresult", e[2]:sub(8), printed
    end
    return status, msg, printed
  end
  return unpack(out)
end
"""


# -------------------------------------------------------------------------- constructor rewrite

_KEYWORDS = frozenset("and break do else elseif end false for function if in local nil not or repeat return then "
                      "true until while".split())
_LONG_OPEN = re.compile(r"\[(=*)\[")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F]*|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]*)?)")
_SYMBOLS = ("...", "..", "==", "~=", "<=", ">=")


def _lua_tokens(src: str) -> Iterator[tuple[str, int, int]]:
    """``(kind, start, end)`` of each token of a Lua 5.1 chunk; kind is "name", "keyword", "string", "number" or the
    symbol itself. Comments and white space are skipped. Unterminated strings or comments end the scan."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("--", i):
            m = _LONG_OPEN.match(src, i + 2)
            if m:
                close = src.find("]" + m.group(1) + "]", m.end())
                i = n if close < 0 else close + len(m.group(1)) + 2
            else:
                nl = src.find("\n", i)
                i = n if nl < 0 else nl + 1
        elif c == "[" and _LONG_OPEN.match(src, i):
            m = _LONG_OPEN.match(src, i)
            assert m is not None
            close = src.find("]" + m.group(1) + "]", m.end())
            if close < 0:
                return
            end = close + len(m.group(1)) + 2
            yield "string", i, end
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            if j >= n:
                return
            yield "string", i, j + 1
            i = j + 1
        elif c.isalpha() or c == "_":
            m = _NAME.match(src, i)
            assert m is not None
            yield ("keyword" if m.group() in _KEYWORDS else "name"), i, m.end()
            i = m.end()
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = _NUMBER.match(src, i)
            end = m.end() if m and m.end() > i else i + 1
            yield "number", i, end
            i = end
        else:
            sym = next((s for s in _SYMBOLS if src.startswith(s, i)), c)
            yield sym, i, i + len(sym)
            i += len(sym)


def ordered_constructors(src: str) -> str:
    """``src`` with every table constructor ``{...}`` wrapped as ``__flotilla_t({...}, "a", "b")``, the constructor's
    ``name = value`` fields in source order (``f{...}`` becomes ``f(__flotilla_t({...}))``), so that the sandbox's
    ``pairs`` can follow gopher-lua's insertion order. Lines are kept, so error messages point at the same lines.
    """
    out: list[str] = []
    last = 0
    prev = ""  # the kind of the previous token
    opened: list[Any] = []  # "(" / "[" or [call, names] for a constructor
    pending_name: str | None = None
    for kind, start, end in _lua_tokens(src):
        if kind == "=" and pending_name is not None and opened and isinstance(opened[-1], list):
            opened[-1][1].append(pending_name)
        pending_name = None
        if kind == "name" and opened and isinstance(opened[-1], list) and prev in ("{", ",", ";"):
            pending_name = src[start:end]
        if kind == "{":
            call = prev in ("name", ")", "]", "}", "string")
            out.append(src[last:start])
            out.append("(__flotilla_t({" if call else "__flotilla_t({")
            last = end
            opened.append([call, []])
        elif kind == "}" and opened and isinstance(opened[-1], list):
            call, names = opened.pop()
            out.append(src[last:end])
            out.append("".join(f', "{k}"' for k in names) + (")" * (2 if call else 1)))
            last = end
        elif kind in ("(", "["):
            opened.append(kind)
        elif kind in (")", "]") and opened and not isinstance(opened[-1], list):
            opened.pop()
        prev = kind
    out.append(src[last:])
    return "".join(out)


# ------------------------------------------------------------------------------ JSON <-> Lua


def _to_lua_json(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON value ready for ``table_from``: bytes strings, no ``None``, safe numbers."""
    if depth > MAX_DEPTH:
        raise InterpreterError(f"the object nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**53) <= value <= 2**53 else float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InterpreterError("the object holds a non-finite number, which JSON cannot")
        return value
    if isinstance(value, Mapping):
        return {str(k).encode("utf-8", "surrogatepass"): _to_lua_json(v, depth + 1)
                for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_to_lua_json(v, depth + 1) for v in value if v is not None]
    raise InterpreterError(f"cannot pass a {type(value).__name__} to Lua; only JSON values")


def _lua_arg(rt: Any, value: Any) -> Any:
    v = _to_lua_json(value)
    if isinstance(v, (dict, list)):
        return rt.table_from(v, recursive=True)
    return v


def _reference_paths(references: Iterable[Any]) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """Paths (object keys only) holding an empty array / an empty object in the references."""
    arrays: set[tuple[str, ...]] = set()
    objects: set[tuple[str, ...]] = set()

    def walk(v: Any, path: tuple[str, ...]) -> None:
        if isinstance(v, Mapping):
            children = [((*path, str(k)), x) for k, x in v.items()]
        elif isinstance(v, list):
            children = [(path, x) for x in v]  # array positions are not part of a path
        else:
            return
        for p, x in children:
            if isinstance(x, Mapping) and not x:
                objects.add(p)
            elif isinstance(x, list) and not x:
                arrays.add(p)
            else:
                walk(x, p)

    for ref in references:
        walk(ref, ())
    return arrays, objects


def resolve_empty_tables(value: Any, references: Sequence[Any] = (), *, root_is_object: bool = True) -> Any:
    """Decide what each empty Lua table (``None`` in ``value``) becomes, from ``references``.

    An empty table at a path where a reference holds an empty object becomes ``{}``; where one holds
    an empty array, ``[]``; elsewhere it is dropped. Paths are object keys only (array positions are
    ignored). The whole result being an empty table gives ``{}`` (``root_is_object``) or ``[]``.
    """
    if value is None:
        return {} if root_is_object else []
    arrays, objects = _reference_paths(references)

    def decide(path: tuple[str, ...]) -> Any:
        if path in objects:
            return {}
        if path in arrays:
            return []
        return _DROP

    def walk(v: Any, path: tuple[str, ...]) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                p = (*path, k)
                y = decide(p) if x is None else walk(x, p)
                if y is not _DROP:
                    out[k] = y
            return out
        if isinstance(v, list):
            items = [decide(path) if x is None else walk(x, path) for x in v]
            return [y for y in items if y is not _DROP]
        return v

    return walk(value, ())


_DROP = object()


# ----------------------------------------------------------------------------- kube helpers


def _py_result(fn: Callable[..., Any]) -> Callable[..., tuple[bool, Any]]:
    """Wrap a helper so it never raises into Lua: it answers (ok, value or message)."""

    def call(*args: Any) -> tuple[bool, Any]:
        try:
            return True, fn(*args)
        except (InterpreterError, QuantityError, ValueError) as e:
            return False, str(e).encode()
        except Exception as e:  # noqa: BLE001 - a helper bug must not crash the host
            log.exception("kube helper failed")
            return False, f"internal error in a kube helper: {type(e).__name__}: {e}".encode()

    return call


def _quantity_arg(v: Any) -> Quantity | None:
    """A quantity argument from Lua: nil is an unset (zero) quantity, strings are parsed."""
    if v is None:
        return None
    return parse_quantity(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))


def _make_kube(box: list[Any]) -> tuple[Callable[..., Any], ...]:
    """The kube helpers. They reach the runtime through ``box`` (``[runtime]``), which the caller empties once
    the call is over: the runtime holds the helpers, so a direct reference would be a cycle that keeps every
    runtime (and up to its memory budget) alive until Python's cycle collector happens to run."""

    def resource_add(*args: Any) -> bytes:
        # Like Kubernetes' Quantity.Add: the sum takes the format of what is added while it is zero.
        total, fmt = Fraction(0), None
        for a in args:
            q = _quantity_arg(a)
            if total == 0:
                fmt = q.format if q is not None else None
            total += q.value if q is not None else 0
        return format_quantity(total, fmt or QuantityFormat.DECIMAL_EXPONENT).encode()

    def quantity(v: Any) -> float:
        q = _quantity_arg(v)
        if q is None:
            return 0.0
        f = float(q)
        if f < 0:
            raise InterpreterError(f"getResourceQuantity: the quantity {q} is negative")
        if math.isinf(f):
            raise InterpreterError(f"getResourceQuantity: the quantity {q} is too large")
        return f

    def template_spec(text: bytes, name: str) -> Mapping[str, Any]:
        template = resolve_empty_tables(json.loads(text.decode("utf-8", "replace")))
        if not isinstance(template, Mapping):
            raise InterpreterError(f"{name}: the argument must be a pod template ({{metadata, spec}})")
        spec = template.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise InterpreterError(f"{name}: the pod template's spec must be a table")
        return spec

    def pod_requirements(text: bytes) -> Any:
        req = native.pod_replica_requirements(template_spec(text, "accuratePodRequirements"))
        return None if req is None else _lua_arg(box[0], req)

    def pod_dependencies(text: bytes, namespace: bytes) -> Any:
        spec = template_spec(text, "getPodDependencies")
        deps = native.pod_dependencies(spec, namespace.decode("utf-8", "replace"))
        return _lua_arg(box[0], deps) if deps else None

    return (_py_result(resource_add), _py_result(pod_requirements), _py_result(pod_dependencies),
            _py_result(quantity))


# --------------------------------------------------------------------------------- running


def _new_runtime(limits: LuaLimits) -> tuple[Any, Any, list[Any]]:
    """A fresh sandboxed runtime, the function that runs a script in it, and the box to empty afterwards."""
    rt = lua51.LuaRuntime(encoding=None, register_eval=False, register_builtins=False,
                          unpack_returned_tuples=True, max_memory=limits.max_memory,
                          attribute_filter=_deny_attributes)
    box = [rt]
    runner = rt.execute(_BOOTSTRAP, time.monotonic, limits.timeout, limits.hook_interval, MAX_PATTERN_SUBJECT,
                        MAX_PRINT_BYTES, limits.max_result, *_make_kube(box))
    return rt, runner, box


def _deny_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    raise AttributeError("Python attributes are not reachable from the sandbox")


def _decode(b: Any) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)


def check_script(script: str, *, limits: LuaLimits = DEFAULT_LIMITS) -> None:
    """Raise :class:`LuaScriptError` if ``script`` does not compile (it is not run)."""
    if script.startswith("\x1b"):
        raise LuaScriptError("precompiled (binary) Lua chunks are not allowed; give the script as source text")
    rt = lua51.LuaRuntime(encoding=None, register_eval=False, register_builtins=False,
                          max_memory=limits.max_memory)
    ok, err = rt.eval("function(s) local f, e = loadstring(s, '=luaScript') return f ~= nil, e end")(
        script.encode("utf-8"))
    if not ok:
        raise LuaScriptError(f"the Lua script does not compile: {_decode(err)}")


def run_script(script: str, function: str, args: Sequence[Any], *, nrets: int = 1,
               limits: LuaLimits = DEFAULT_LIMITS,
               print_sink: Callable[[str], None] | None = None) -> list[LuaValue]:
    """Load ``script`` in a fresh sandbox and call its global ``function`` with JSON ``args``.

    Returns the first ``nrets`` results. Raises :class:`LuaScriptError` with a message that says what
    went wrong (compile error, missing function, runtime error, time or memory limit, a result that
    does not convert to JSON).
    """
    if not isinstance(script, str) or not script.strip():
        raise LuaScriptError("the Lua script is empty")
    box: list[Any] = []
    try:
        rt, runner, box = _new_runtime(limits)
        lua_args = [_lua_arg(rt, a) for a in args]
        raw = runner(script.encode("utf-8"), ordered_constructors(script).encode("utf-8"), function.encode(), nrets,
                     *lua_args)
    except lua51.LuaMemoryError:
        raise _memory(limits) from None
    except lua51.LuaError as e:  # the limit hit between two protected regions
        text = str(e)
        if "\0timeout" in text:
            raise _timeout(limits) from None
        raise LuaScriptError(f"the Lua script failed: {text}") from None
    finally:
        box.clear()  # no cycle runtime -> helpers -> runtime: the runtime goes when its last reference does
    if not isinstance(raw, tuple):
        raw = (raw,)
    status, msg, printed = _decode(raw[0]), _decode(raw[1]), _decode(raw[2])
    if printed:
        for line in printed.splitlines():
            (print_sink or (lambda s: log.debug("lua print: %s", s)))(line)
    if status == "ok":
        out = []
        for i in range(nrets):
            kind = _decode(raw[3 + 2 * i])
            text = _decode(raw[4 + 2 * i])
            out.append(LuaValue(kind, json.loads(text)))
        return out
    if status == "syntax":
        raise LuaScriptError(f"the Lua script does not compile: {msg}")
    if status == "missing":
        raise LuaScriptError(f"the Lua script must define a global function {function}; it does not "
                             f"(write `function {function}(...) ... end`, not a local function)")
    if status == "notfunction":
        raise LuaScriptError(f"{function} is a {msg} in the Lua script; it must be a function")
    if status == "timeout":
        raise _timeout(limits)
    if status == "memory":
        raise _memory(limits)
    if status == "toolarge":
        raise LuaScriptError(f"{function} returned more than {_mib(limits.max_result)} of JSON, the most a "
                             "result may take", reason=REASON_MEMORY)
    if status == "badresult":
        raise LuaScriptError(f"{function} returned a value that does not convert to JSON: {msg}")
    raise LuaScriptError(f"the Lua script failed: {msg}")


def _timeout(limits: LuaLimits) -> LuaScriptError:
    return LuaScriptError(f"the Lua script did not finish within the {limits.timeout:g}s time limit "
                          "(an endless loop?)", reason=REASON_TIMEOUT)


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def _memory(limits: LuaLimits) -> LuaScriptError:
    return LuaScriptError(f"the Lua script used more than the {_mib(limits.max_memory)} memory limit",
                          reason=REASON_MEMORY)


# ------------------------------------------------------------------------ typed conversions


def _fail(operation: Operation, message: str) -> LuaScriptError:
    return LuaScriptError(f"{operation.lua_function}: {message}", operation=operation)


def _table(op: Operation, v: LuaValue, what: str) -> Any:
    if v.type != "table":
        raise _fail(op, f"{what} must be a table, got {v.type}")
    return v.value


def _resource_request(op: Operation, value: Any, where: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _fail(op, f"{where} must be a table of resource quantities, got {describe_value(value)}")
    out = {}
    for k, q in value.items():
        if isinstance(q, bool) or not isinstance(q, (str, int, float)):
            raise _fail(op, f"{where}.{k} must be a quantity string such as \"500m\" or a number, "
                            f"got {describe_value(q)}")
        try:
            out[k] = str(parse_quantity(q))
        except QuantityError as e:
            raise _fail(op, f"{where}.{k}: {e}") from None
    return out or None


def _string_field(op: Operation, obj: Mapping[str, Any], key: str, where: str) -> str:
    v = obj.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _fail(op, f"{where}.{key} must be a string, got {describe_value(v)}")
    return v


def _node_claim(op: Operation, value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _fail(op, f"{where} must be a table, got {describe_value(value)}")
    out: dict[str, Any] = {}
    if value.get("hardNodeAffinity") is not None:
        if not isinstance(value["hardNodeAffinity"], Mapping):
            raise _fail(op, f"{where}.hardNodeAffinity must be a node selector table")
        out["hardNodeAffinity"] = value["hardNodeAffinity"]
    selector = value.get("nodeSelector")
    if selector:
        if not isinstance(selector, Mapping) or not all(isinstance(x, str) for x in selector.values()):
            raise _fail(op, f"{where}.nodeSelector must be a table of strings")
        out["nodeSelector"] = dict(selector)
    tolerations = value.get("tolerations")
    if tolerations:
        if not isinstance(tolerations, list):
            raise _fail(op, f"{where}.tolerations must be an array")
        out["tolerations"] = tolerations
    return out


def normalize_requirements(op: Operation, value: Any, where: str, *, component: bool) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        raise _fail(op, f"{where} must be a table, got {describe_value(value)}")
    out: dict[str, Any] = {}
    claim = _node_claim(op, value.get("nodeClaim"), f"{where}.nodeClaim")
    if claim is not None:
        out["nodeClaim"] = claim
    request = _resource_request(op, value.get("resourceRequest"), f"{where}.resourceRequest")
    if request:
        out["resourceRequest"] = request
    keys = ("priorityClassName",) if component else ("namespace", "priorityClassName")
    for key in keys:
        s = _string_field(op, value, key, where)
        if s:
            out[key] = s
    return out


def _int32(op: Operation, v: Any, where: str, *, truncate: bool) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(op, f"{where} must be a number, got {describe_value(v)}")
    if isinstance(v, float) and not v.is_integer():
        if not truncate:
            raise _fail(op, f"{where} must be a whole number, got {v!r}")
        v = math.trunc(v)
    i = int(v)
    if not -(2**31) <= i < 2**31:
        raise _fail(op, f"{where} = {i} does not fit in int32")
    return i


def _object_result(op: Operation, v: LuaValue, references: Sequence[Any]) -> dict[str, Any]:
    value = resolve_empty_tables(_table(op, v, "the result"), references)
    if not isinstance(value, dict):
        raise _fail(op, "the result must be the whole object (a table with string keys), got an array")
    if not isinstance(value.get("kind"), str) or not value.get("kind"):
        raise _fail(op, "the returned object has no kind; return the whole object (e.g. the modified "
                        "desiredObj), not a part of it")
    return value


# ------------------------------------------------------------------------------ operations


def _run(op: Operation, script: str, args: Sequence[Any], *, nrets: int = 1, limits: LuaLimits,
         print_sink: Callable[[str], None] | None) -> list[LuaValue]:
    try:
        return run_script(script, op.lua_function, args, nrets=nrets, limits=limits, print_sink=print_sink)
    except LuaScriptError as e:
        e.operation = op
        raise


def lua_get_replicas(script: str, obj: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
                     print_sink: Callable[[str], None] | None = None) -> ReplicaResult:
    """``GetReplicas(desiredObj)`` -> replica (number, truncated to int32), requirement (table or nil)."""
    op = Operation.INTERPRET_REPLICA
    replica, requirement = _run(op, script, [obj], nrets=2, limits=limits, print_sink=print_sink)
    if replica.type != "number":
        raise _fail(op, f"the first result (replica) must be a number, got {replica.type}")
    replicas = _int32(op, replica.value, "replica", truncate=True)
    if requirement.type == "nil":
        return ReplicaResult(replicas, None)
    if requirement.type != "table":
        raise _fail(op, f"the second result (requirement) must be a table or nil, got {requirement.type}")
    value = resolve_empty_tables(requirement.value)
    return ReplicaResult(replicas, normalize_requirements(op, value, "requirement", component=False))


def _result_tables(op: Operation, result: LuaValue, what: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The script's result as an array of tables (``what``: components, dependencies): ``(where, table)`` for
    each, ``where`` naming it as Lua counts (``components[1]``)."""
    value = resolve_empty_tables(_table(op, result, "the result"), root_is_object=False)
    if not isinstance(value, list):
        raise _fail(op, f"the result must be an array of {what}")
    out = []
    for i, item in enumerate(value):
        where = f"{what}[{i + 1}]"
        if not isinstance(item, Mapping):
            raise _fail(op, f"{where} must be a table")
        out.append((where, item))
    return out


def lua_get_components(script: str, obj: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
                       print_sink: Callable[[str], None] | None = None) -> list[dict[str, Any]] | None:
    """``GetComponents(desiredObj)`` -> list of ``{name, replicas, replicaRequirements}``; ``None`` when the script
    returns nil (Karmada's nil slice: no components, ``null`` in karmadactl's output)."""
    op = Operation.INTERPRET_COMPONENT
    (result,) = _run(op, script, [obj], limits=limits, print_sink=print_sink)
    if result.type == "nil":
        return None
    out = []
    for where, c in _result_tables(op, result, "components"):
        comp: dict[str, Any] = {"name": _string_field(op, c, "name", where),
                                "replicas": _int32(op, c.get("replicas", 0), f"{where}.replicas", truncate=False)}
        if c.get("replicaRequirements") is not None:
            comp["replicaRequirements"] = normalize_requirements(op, c["replicaRequirements"],
                                                        f"{where}.replicaRequirements", component=True)
        out.append(comp)
    return out


def lua_revise_replica(script: str, obj: JSON, replicas: int, *, limits: LuaLimits = DEFAULT_LIMITS,
                       print_sink: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``ReviseReplica(desiredObj, desiredReplica)`` -> the revised object."""
    op = Operation.REVISE_REPLICA
    (result,) = _run(op, script, [obj, replicas], limits=limits, print_sink=print_sink)
    return _object_result(op, result, [obj])


def lua_retain(script: str, desired: JSON, observed: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
               print_sink: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``Retain(desiredObj, observedObj)`` -> the object to apply."""
    op = Operation.RETAIN
    (result,) = _run(op, script, [desired, observed], limits=limits, print_sink=print_sink)
    return _object_result(op, result, [desired, observed])


def lua_reflect_status(script: str, obj: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
                       print_sink: Callable[[str], None] | None = None) -> JSON:
    """``ReflectStatus(observedObj)`` -> the status to record (a table; nil is an error)."""
    op = Operation.INTERPRET_STATUS
    (result,) = _run(op, script, [obj], limits=limits, print_sink=print_sink)
    return resolve_empty_tables(_table(op, result, "the reflected status"))


def status_items_for_lua(items: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``AggregatedStatusItem`` values as a script sees them (Karmada marshals them to JSON: ``clusterName`` always,
    the other fields only when not at their zero value). ``None`` stays ``None`` (nil in Lua); an empty list stays
    a list (an empty table)."""
    if items is None:
        return None
    out = []
    for item in items:
        entry: dict[str, Any] = {"clusterName": item.get("clusterName", "")}
        for key in ("status", "applied", "appliedMessage", "health"):
            if item.get(key) not in (None, False, ""):
                entry[key] = item[key]
        out.append(entry)
    return out


def lua_aggregate_status(script: str, obj: JSON, items: Iterable[Mapping[str, Any]] | None, *,
                         limits: LuaLimits = DEFAULT_LIMITS,
                         print_sink: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``AggregateStatus(desiredObj, statusItems)`` -> the whole template with its aggregated status.

    ``None`` reaches the script as ``nil`` (what Karmada's status controller passes for a binding without items),
    a list, even an empty one, as a table (what ``karmadactl interpret`` and Karmada's customization tests pass).
    """
    op = Operation.AGGREGATE_STATUS
    (result,) = _run(op, script, [obj, status_items_for_lua(items)], limits=limits, print_sink=print_sink)
    return _object_result(op, result, [])


def lua_interpret_health(script: str, obj: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
                         print_sink: Callable[[str], None] | None = None) -> bool:
    """``InterpretHealth(observedObj)`` -> a boolean (anything else, nil included, is an error)."""
    op = Operation.INTERPRET_HEALTH
    (result,) = _run(op, script, [obj], limits=limits, print_sink=print_sink)
    if result.type != "boolean":
        raise _fail(op, f"must return a boolean, got {result.type} (return true or false on every path)")
    return bool(result.value)


def lua_get_dependencies(script: str, obj: JSON, *, limits: LuaLimits = DEFAULT_LIMITS,
                         print_sink: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """``GetDependencies(desiredObj)`` -> list of ``{apiVersion, kind, namespace, name, labelSelector}``."""
    op = Operation.INTERPRET_DEPENDENCY
    (result,) = _run(op, script, [obj], limits=limits, print_sink=print_sink)
    out = []
    for where, d in _result_tables(op, result, "dependencies"):
        dep: dict[str, Any] = {}
        for key in ("apiVersion", "kind", "namespace", "name"):
            s = _string_field(op, d, key, where)
            if s or key in ("apiVersion", "kind"):
                dep[key] = s
        if d.get("labelSelector") is not None:
            dep["labelSelector"] = d["labelSelector"]
        out.append(dep)
    try:
        native.verify_dependencies(out)
    except InterpreterError as e:
        raise _fail(op, e.message) from None
    return out


def lua_restore_state(script: str, obj: JSON, restore: Mapping[str, Any], *, limits: LuaLimits = DEFAULT_LIMITS,
                      print_sink: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``RestoreState(desiredObj, restore)`` -> the object to send, set to restart from ``restore.path``.

    ``restore`` is the checked restore input (:func:`~flotilla.interpreter.operations.restore_input`); its
    ``checkpointId`` is nil in Lua when unknown.
    """
    op = Operation.RESTORE_STATE
    (result,) = _run(op, script, [obj, dict(restore)], limits=limits, print_sink=print_sink)
    return _object_result(op, result, [obj])
