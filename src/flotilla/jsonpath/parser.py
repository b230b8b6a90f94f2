"""Parser of kubectl's JSONPath template dialect (k8s.io/client-go/util/jsonpath).

The grammar is kubectl's, character for character, including its quirks:

* ``{...}`` starts an action anywhere in the text; a ``}`` outside an action is plain text; text
  is copied as is (no escapes).
* Inside an action: ``$`` and ``@`` (the current object) are no-ops, spaces separate, ``.name``
  is a field (read up to one of `` \\t\\r\\n.,[]$@{}``; ``\\`` escapes the next character and
  every backslash is then dropped, so ``a\\.b`` names the key ``a.b``); ``.*`` is the wildcard;
  ``..`` recursive descent; ``"..."``/``'...'`` a string with Go escapes; numbers; ``true``,
  ``false``; the keywords ``range`` and ``end``.
* ``[...]`` runs to the first ``]``: ``*``; ``i``; ``start:end:step``; ``'key'`` (parsed as
  ``.key``, so ``['a.b']`` is ``.a.b``; double quotes are not accepted); ``x,y,...`` a union
  whose branches are each parsed as ``[x]``.
* ``[?(left op right)]`` a filter (``op`` one of ``== != < <= > >=``), ``[?(left)]`` an
  existence test.

Where kubectl accepts a template at parse time that can never execute (an unknown identifier such
as ``{status.phase}``, an unknown filter operator such as ``=``, ``{end}`` without ``{range}``) or
executes it in a confusing way (``{range}`` with no ``{end}``), this parser rejects it, so that
admission can report the mistake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from flotilla.jsonpath import nodes
from flotilla.jsonpath.errors import JSONPathSyntaxError
from flotilla.jsonpath.formatting import is_int64

FILTER_OPERATORS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})

_TERMINATORS: Final = frozenset(" \t\r\n.,[]$@{}")
_DICT_KEY: Final = re.compile(r"'([^']*)'")
_SLICE: Final = re.compile(r"(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?")
_FILTER_COMPARISON: Final = re.compile(r"([^!<>=]+)([!<>=]+)(.+)", re.DOTALL)
_INT: Final = re.compile(r"[+-]?[0-9]+")
_FLOAT: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_SIMPLE_ESCAPES: Final = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_HEX_ESCAPE_LENGTHS: Final = {"x": 2, "u": 4, "U": 8}


@dataclass(frozen=True, slots=True)
class _Keyword:
    name: str  # "range" or "end"
    position: int


_Element = nodes.Step | _Keyword


def parse_nodes(template: str) -> tuple[nodes.Node, ...]:
    """Parse a whole template into its nodes; raises :class:`JSONPathSyntaxError`."""
    flat: list[nodes.Text | tuple[list[_Element], int]] = []
    pos = 0
    while pos < len(template):
        open_brace = template.find("{", pos)
        if open_brace < 0:
            flat.append(nodes.Text(template[pos:]))
            break
        if open_brace > pos:
            flat.append(nodes.Text(template[pos:open_brace]))
        action = _ActionParser(template, template, base=0, start=open_brace + 1, action_open=open_brace)
        flat.append((action.parse(), open_brace))
        pos = action.pos
    return _nest_ranges(template, flat)


def _nest_ranges(template: str, flat: list[nodes.Text | tuple[list[_Element], int]]) -> tuple[nodes.Node, ...]:
    # Each open {range}: its chain, position and the body collected so far.
    stack: list[tuple[nodes.Chain, int, list[nodes.Node]]] = []
    top: list[nodes.Node] = []
    for item in flat:
        body = stack[-1][2] if stack else top
        if isinstance(item, nodes.Text):
            body.append(item)
            continue
        elements, position = item
        keywords = [e for e in elements if isinstance(e, _Keyword)]
        steps = tuple(e for e in elements if not isinstance(e, _Keyword))
        if not keywords:
            body.append(nodes.Expression(steps, position))
        elif any(k.name == "end" for k in keywords):
            end = next(k for k in keywords if k.name == "end")
            if len(elements) != 1:
                raise JSONPathSyntaxError(
                    "'end' must stand alone in its action: {end}", end.position, template
                )
            if not stack:
                raise JSONPathSyntaxError("{end} without a matching {range}", position, template)
            chain, range_position, range_body = stack.pop()
            closed = nodes.Range(chain, tuple(range_body), range_position)
            (stack[-1][2] if stack else top).append(closed)
        elif len(keywords) > 1:
            raise JSONPathSyntaxError("more than one 'range' in one action", keywords[1].position, template)
        else:
            stack.append((steps, position, []))
    if stack:
        raise JSONPathSyntaxError("{range} without a matching {end}", stack[-1][1], template)
    return tuple(top)


def parse_chain(source: str, template: str, base: int) -> nodes.Chain:
    """Parse the inside of an action that has no braces (a filter side, a union branch ...).

    ``base`` is the offset in ``template`` of ``source[0]`` (for error positions).
    """
    elements = _ActionParser(source, template, base=base, start=0, action_open=None).parse()
    for element in elements:
        if isinstance(element, _Keyword):
            raise JSONPathSyntaxError(
                f"'{element.name}' is only allowed as an action of its own", element.position, template
            )
    return tuple(e for e in elements if not isinstance(e, _Keyword))


class _ActionParser:
    """Reads the steps of one action.

    With ``action_open`` set, ``source`` is the template, parsing starts after the ``{`` at that
    offset and stops after the matching ``}`` (left in ``pos``). Without it, ``source`` is a
    brace-less piece (built by the caller, placed at ``base`` in the template) read to its end.
    """

    def __init__(self, source: str, template: str, *, base: int, start: int, action_open: int | None) -> None:
        self.src = source
        self.template = template
        self.base = base
        self.pos = start
        self.action_open = action_open

    # -- helpers -----------------------------------------------------------------------------------

    def _error(self, message: str, index: int) -> JSONPathSyntaxError:
        position = min(max(self.base + index, 0), len(self.template))
        return JSONPathSyntaxError(message, position, self.template)

    def _sub_chain(self, source: str, base_index: int) -> nodes.Chain:
        return parse_chain(source, self.template, self.base + base_index)

    # -- the action loop ---------------------------------------------------------------------------

    def parse(self) -> list[_Element]:
        out: list[_Element] = []
        src = self.src
        while True:
            if self.pos >= len(src):
                if self.action_open is not None:
                    raise self._error("unclosed action: missing '}'", self.action_open)
                return out
            if src[self.pos] in "\r\n":
                raise self._error("unclosed action: line break before '}'", self.pos)
            rest = src.startswith
            if rest("}", self.pos):
                if self.action_open is None:
                    raise self._error("unexpected '}'", self.pos)
                self.pos += 1
                return out
            if rest("[?(", self.pos):
                out.append(self._filter())
                continue
            if rest("..", self.pos):
                if out and isinstance(out[-1], nodes.Recursive):
                    raise self._error("invalid multiple recursive descent", self.pos)
                self.pos += 2
                out.append(nodes.Recursive())
                if self.pos < len(src) and _is_alphanumeric(src[self.pos]):
                    out.append(self._field())
                continue
            ch = src[self.pos]
            if ch in " @$":
                self.pos += 1
            elif ch == "[":
                out.extend(self._array())
            elif ch in "\"'":
                out.append(self._quoted())
            elif ch == ".":
                self.pos += 1
                out.append(self._field())
            elif ch in "+-" or ch.isdecimal():
                out.append(self._number())
            elif _is_alphanumeric(ch):
                out.append(self._identifier(first_in_action=not out and self.action_open is not None))
            else:
                raise self._error(f"unrecognized character in action: {_describe_char(ch)}", self.pos)

    # -- tokens ------------------------------------------------------------------------------------

    def _field(self) -> nodes.Field | nodes.Wildcard:
        src = self.src
        start = self.pos
        while self.pos < len(src):
            ch = src[self.pos]
            if ch == "\\":
                self.pos = min(self.pos + 2, len(src))
            elif ch in _TERMINATORS:
                break
            else:
                self.pos += 1
        raw = src[start : self.pos]
        if raw == "*":
            return nodes.Wildcard()
        return nodes.Field(raw.replace("\\", ""))

    def _number(self) -> nodes.Literal:
        src = self.src
        start = self.pos
        if src[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(src) and (src[self.pos] == "." or src[self.pos].isdecimal()):
            self.pos += 1
        text = src[start : self.pos]
        if _INT.fullmatch(text) and is_int64(int(text)):
            return nodes.Literal(int(text))
        if _FLOAT.fullmatch(text):
            return nodes.Literal(float(text))
        raise self._error(f"cannot parse number {text}", start)

    def _identifier(self, *, first_in_action: bool) -> nodes.Literal | _Keyword:
        src = self.src
        start = self.pos
        while self.pos < len(src) and src[self.pos] not in _TERMINATORS:
            self.pos += 1
        word = src[start : self.pos]
        if word in ("true", "false"):
            return nodes.Literal(word == "true")
        if word in ("range", "end"):
            return _Keyword(word, min(max(self.base + start, 0), len(self.template)))
        hint = (
            f" (a field is written .{word})" if first_in_action and word.replace("_", "a").isalnum() else ""
        )
        raise self._error(f"unrecognized identifier {word}{hint}", start)

    def _quoted(self) -> nodes.Literal:
        src = self.src
        start = self.pos
        quote = src[start]
        self.pos += 1
        while True:
            if self.pos >= len(src) or src[self.pos] == "\n":
                raise self._error("unterminated quoted string", start)
            ch = src[self.pos]
            self.pos += 1
            if ch == quote and src[self.pos - 2] != "\\":
                break
        raw = src[start : self.pos]
        value = _unquote(raw)
        if value is None:
            raise self._error(f"unquote string {raw} error invalid syntax", start)
        return nodes.Literal(value)

    def _array(self) -> list[nodes.Step]:
        src = self.src
        start = self.pos
        close = start + 1
        while close < len(src) and src[close] not in "]\n":
            close += 1
        if close >= len(src) or src[close] == "\n":
            raise self._error("unterminated array: missing ']'", start)
        self.pos = close + 1
        content_start = start + 1
        text = src[content_start:close]
        if text == "*":
            text = ":"

        if "," in text:
            branches: list[nodes.Chain] = []
            offset = content_start
            for part in text.split(","):
                stripped = part.strip(" ")
                stripped_at = offset + (len(part) - len(part.lstrip(" ")))
                branches.append(self._sub_chain(f"[{stripped}]", stripped_at - 1))
                offset += len(part) + 1
            return [nodes.Union(tuple(branches))]

        key = _DICT_KEY.fullmatch(text)
        if key is not None:
            # kubectl reads ['key'] as .key: dots split, a backslash escapes
            return list(self._sub_chain("." + key.group(1), content_start))

        match = _SLICE.fullmatch(text)
        if match is None:
            raise self._error(f"invalid array index {text}", start)
        return [self._slice(match, start)]

    def _slice(self, match: re.Match[str], start: int) -> nodes.Slice:
        groups = [match.group(1) or "", match.group(2) or "", match.group(3) or ""]
        values: list[int | None] = [None, None, None]
        derived = False
        for i, group in enumerate(groups):
            if group:
                digits = group[1:] if i > 0 else group
                if i > 0 and digits == "":
                    continue
                number = _atoi(digits)
                if number is None:
                    raise self._error(f"array index {digits} is not a number", start)
                values[i] = number
            elif i == 1:
                values[1] = (values[0] or 0) + 1
                derived = True
        return nodes.Slice(values[0], values[1], values[2], derived)

    def _filter(self) -> nodes.Filter:
        src = self.src
        start = self.pos
        self.pos += 3
        content_start = self.pos
        begin = end = False
        pair = ""
        while True:
            if self.pos >= len(src) or src[self.pos] == "\n":
                raise self._error("unterminated filter: missing ')]'", start)
            ch = src[self.pos]
            self.pos += 1
            if ch in "\"'":
                if not begin:
                    begin, pair = True, ch
                    continue
                if src[self.pos - 2] != "\\" and ch == pair:
                    end = True
            elif ch == ")" and begin == end:
                break
        if self.pos >= len(src) or src[self.pos] != "]":
            raise self._error("unclosed array expect ]", self.pos)
        self.pos += 1
        text = src[content_start : self.pos - 2]
        comparison = _FILTER_COMPARISON.fullmatch(text)
        if comparison is None:
            return nodes.Filter(self._sub_chain(text, content_start), "exists", ())
        left_text, op, right_text = comparison.groups()
        left = self._sub_chain(left_text, content_start)
        right_at = content_start + len(left_text) + len(op)
        right = self._sub_chain(right_text, right_at)
        if op not in FILTER_OPERATORS:
            raise self._error(
                f"unrecognized filter operator {op} (use one of == != < <= > >=)",
                content_start + len(left_text),
            )
        return nodes.Filter(left, op, right)


def _is_alphanumeric(ch: str) -> bool:
    return ch == "_" or ch.isalpha() or ch.isdecimal()


def _describe_char(ch: str) -> str:
    code = f"U+{ord(ch):04X}"
    return f"{code} '{ch}'" if ch.isprintable() else code


def _atoi(text: str) -> int | None:
    if not _INT.fullmatch(text):
        return None
    number = int(text)
    return number if is_int64(number) else None


def _unquote(raw: str) -> str | None:
    """Go's ``strconv.Unquote`` extended to single quotes; ``None`` when the escapes are invalid."""
    quote = raw[0]
    body = raw[1:-1]
    if len(raw) < 2 or raw[-1] != quote:
        return None
    if "\\" not in body and quote not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == quote:
            return None
        if ch != "\\":
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        if i + 1 >= len(body):
            return None
        escape = body[i + 1]
        i += 2
        if escape in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escape])
        elif escape in _HEX_ESCAPE_LENGTHS:
            digits = body[i : i + _HEX_ESCAPE_LENGTHS[escape]]
            if len(digits) < _HEX_ESCAPE_LENGTHS[escape] or any(
                c not in "0123456789abcdefABCDEF" for c in digits
            ):
                return None
            i += len(digits)
            value = int(digits, 16)
            if escape == "x":
                out.append(value)
            elif value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                return None
            else:
                out += chr(value).encode("utf-8")
        elif escape in "01234567":
            digits = escape + body[i : i + 2]
            if len(digits) < 3 or any(c not in "01234567" for c in digits):
                return None
            i += 2
            value = int(digits, 8)
            if value > 255:
                return None
            out.append(value)
        elif escape in "'\"":
            if escape != quote:
                return None
            out.append(ord(escape))
        else:
            return None
    return out.decode("utf-8", errors="replace")
