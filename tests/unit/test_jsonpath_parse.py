"""Parsing templates: what is accepted, and syntax errors with messages and positions."""

from __future__ import annotations

import pytest

from flotilla.jsonpath import JSONPathSyntaxError, Template, parse, parse_expression
from flotilla.jsonpath.nodes import (
    Expression,
    Field,
    Filter,
    Literal,
    Range,
    Recursive,
    Slice,
    Text,
    Union,
    Wildcard,
)


def test_template_splits_into_text_expressions_and_ranges() -> None:
    template = parse('NAME {range .items[*]}{.metadata.name}{"\\n"}{end}')
    assert template.nodes == (
        Text("NAME "),
        Range(
            (Field("items"), Slice(None, None, None)),
            (
                Expression((Field("metadata"), Field("name")), 22),
                Expression((Literal("\n"),), 38),
            ),
            5,
        ),
    )


def test_steps_of_each_construct() -> None:
    (node,) = parse("{$..name.*[1][-1:][::2]['a','b'][?(@.x>=1)]}").nodes
    assert isinstance(node, Expression)
    assert node.chain == (
        Recursive(),
        Field("name"),
        Wildcard(),
        Slice(1, 2, None, True),
        Slice(-1, None, None),
        Slice(None, None, 2),
        Union(((Field("a"),), (Field("b"),))),
        Filter((Field("x"),), ">=", (Literal(1),)),
    )


def test_escaped_characters_in_field_names() -> None:
    (node,) = parse(r"{.a\.b.c\ d.\*}").nodes
    assert isinstance(node, Expression)
    assert node.chain == (Field("a.b"), Field("c d"), Field("*"))


def test_closing_brace_outside_an_action_is_text() -> None:
    assert parse("x}y{.a}}").nodes == (Text("x}y"), Expression((Field("a"),), 3), Text("}"))


def test_braces_inside_quotes_and_brackets_do_not_end_the_action() -> None:
    (node,) = parse('{.l[?(@.s=="}")]}').nodes
    assert isinstance(node, Expression)
    assert node.chain == (Field("l"), Filter((Field("s"),), "==", (Literal("}"),)))


def test_templates_are_values() -> None:
    assert parse("{.a}") == parse("{.a}")
    assert hash(parse("{.a}")) == hash(parse("{.a}"))
    assert parse("{.a}") != parse("{.b}")
    assert repr(parse("{.a}")) == "Template('{.a}')"
    assert isinstance(parse_expression(".a"), Template)


@pytest.mark.parametrize(
    ("template", "message", "position"),
    [
        ("{.status.phase", "unclosed action: missing '}'", 0),
        ("name: {.status.phase", "unclosed action: missing '}'", 6),
        ("{.a\n}", "unclosed action: line break before '}'", 3),
        ("{.a[0}", "unterminated array: missing ']'", 3),
        ('{.a[?(@.x=="y"}', "unterminated filter: missing ')]'", 3),
        ('{.a[?(@.s=="s"))]}', "unclosed array expect ]", 15),
        ('{"abc}', "unterminated quoted string", 1),
        ("{{.a}}", "unrecognized character in action: U+007B '{'", 1),
        ("{.a\t}", "unrecognized character in action: U+0009", 3),
        ("{.a,b}", "unrecognized character in action: U+002C ','", 3),
        ('{.a[?(@.c=~"x")]}', "unrecognized character in action: U+007E '~'", 10),
        ("{.l[1:2:3:4]}", "invalid array index 1:2:3:4", 3),
        ("{.l[1:x]}", "invalid array index 1:x", 3),
        ("{.l[+1]}", "invalid array index +1", 3),
        ('{.m["key"]}', 'invalid array index "key"', 3),
        ("{.l[99999999999999999999]}", "array index 99999999999999999999 is not a number", 3),
        ("{....a}", "invalid multiple recursive descent", 3),
        ('{"\\q"}', 'unquote string "\\q" error invalid syntax', 1),
        ('{"\\uD800"}', 'unquote string "\\uD800" error invalid syntax', 1),
        ("{1.2.3}", "cannot parse number 1.2.3", 1),
        ("{-}", "cannot parse number -", 1),
        ("{status.phase}", "unrecognized identifier status (a field is written .status)", 1),
        ("{.a[?(@.x=1)]}", "unrecognized filter operator = (use one of == != < <= > >=)", 9),
        ("{.a[?(@.x=>1)]}", "unrecognized filter operator => (use one of == != < <= > >=)", 9),
        ("{end}", "{end} without a matching {range}", 0),
        ("{range .a}{.b}", "{range} without a matching {end}", 0),
        ("{range .a}{.b end}", "'end' must stand alone in its action: {end}", 14),
        ("{range range .a}{end}", "more than one 'range' in one action", 7),
        ("{.a[?(@.b==range)]}", "'range' is only allowed as an action of its own", 11),
    ],
)
def test_syntax_errors_have_message_and_position(template: str, message: str, position: int) -> None:
    with pytest.raises(JSONPathSyntaxError) as caught:
        parse(template)
    assert caught.value.message == message
    assert caught.value.position == position
    assert caught.value.template == template
    assert str(caught.value) == f"{message} (at position {position})"


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        (".a[0", 2),
        ("status[", 6),
        ("  .a[?(@.x=1)]", 10),
        ("{.a", 0),
        ("$.a b", 4),
    ],
)
def test_expression_error_positions_point_into_what_was_written(expression: str, position: int) -> None:
    with pytest.raises(JSONPathSyntaxError) as caught:
        parse_expression(expression)
    assert caught.value.position == position
    assert caught.value.template == expression


@pytest.mark.parametrize(
    "template",
    [
        "",
        "plain text",
        "{}",
        "{ }",
        "{$}",
        "{@}",
        "{.}",
        "{..}",
        "{.a[]}",
        "{.a[?()]}",
        "{.a[*,0]}",
        "{true}{false}{1}{-1.5}{'x'}",
        "{range}{end}",
        "{.items[*] range}{end}",
        "{range .a[*]}{range .b[*]}{end}{end}",
        "{.metadata.labels.app\\.kubernetes\\.io/name}",
        "{.a[?(@.b == 'c')]}",
        '{.a[?(@.b=="x\\"y")]}',
        "{.é.日本}",
    ],
)
def test_templates_kubectl_accepts_parse(template: str) -> None:
    assert parse(template).source == template
