"""Label selector parsing, matching and validation (apimachinery ``labels`` semantics)."""

from __future__ import annotations

from urllib.parse import unquote_plus

import pytest

from flotilla.kube.selectors import (
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    label_selector_from_dict,
    parse_label_selector,
)

WEB = {"app": "web", "tier": "frontend"}
DB = {"app": "db"}
BARE: dict[str, str] = {}


def matching(selector: str, *label_sets: dict[str, str]) -> list[bool]:
    parsed = parse_label_selector(selector)
    return [parsed.matches(labels) for labels in label_sets]


# -- operators ---------------------------------------------------------------------------------


def test_equals_matches_only_objects_with_that_value() -> None:
    assert matching("app=web", WEB, DB, BARE) == [True, False, False]


def test_double_equals_is_the_same_as_equals() -> None:
    assert matching("app==web", WEB, DB, BARE) == [True, False, False]
    assert parse_label_selector("app==web") == parse_label_selector("app=web")


def test_not_equals_also_matches_objects_without_the_key() -> None:
    assert matching("app!=web", WEB, DB, BARE) == [False, True, True]


def test_in_matches_any_listed_value_and_requires_the_key() -> None:
    assert matching("app in (web,db)", WEB, DB, BARE, {"app": "cache"}) == [True, True, False, False]


def test_notin_also_matches_objects_without_the_key() -> None:
    assert matching("app notin (web)", WEB, DB, BARE) == [False, True, True]


def test_bare_key_means_exists() -> None:
    assert matching("tier", WEB, DB, BARE) == [True, False, False]
    assert matching("tier", {"tier": ""}) == [True]


def test_bang_key_means_does_not_exist() -> None:
    assert matching("!tier", WEB, DB, BARE) == [False, True, True]


def test_greater_and_less_than_compare_integers() -> None:
    assert matching("replicas>2", {"replicas": "3"}, {"replicas": "2"}, {"replicas": "x"}, BARE) == [
        True,
        False,
        False,
        False,
    ]
    assert matching("replicas<2", {"replicas": "1"}, {"replicas": "2"}, BARE) == [True, False, False]


def test_comma_means_and() -> None:
    assert matching("app=web,tier=frontend", WEB, {"app": "web"}) == [True, False]
    assert matching("app in (web,db),!tier", WEB, DB, BARE) == [False, True, False]


def test_url_decoded_query_parameter_parses() -> None:
    decoded = unquote_plus("app+in+%28web%2Cdb%29%2C%21tier")
    assert decoded == "app in (web,db),!tier"
    selector = parse_label_selector(decoded)
    assert [str(r) for r in selector.requirements] == ["app in (db,web)", "!tier"]


def test_whitespace_between_tokens_is_ignored() -> None:
    spaced = parse_label_selector("  app  in ( web , db ) ,  ! tier , env = prod,x!= y ")
    assert spaced == parse_label_selector("app in (web,db),!tier,env=prod,x!=y")


def test_dns_prefixed_keys_are_accepted() -> None:
    assert matching("example.com/owner=team-a", {"example.com/owner": "team-a"}, {"owner": "team-a"}) == [
        True,
        False,
    ]
    assert matching("app.kubernetes.io/name in (web)", {"app.kubernetes.io/name": "web"}) == [True]


def test_empty_value_after_equals_selects_empty_label_values() -> None:
    assert matching("app=", {"app": ""}, {"app": "web"}, BARE) == [True, False, False]


def test_empty_parentheses_are_the_set_containing_the_empty_string() -> None:
    selector = parse_label_selector("app in ()")
    assert selector.requirements[0].values == ("",)
    assert parse_label_selector("app in (a,)").requirements[0].values == ("", "a")


def test_keywords_are_ordinary_values() -> None:
    assert matching("op=in", {"op": "in"}) == [True]
    assert matching("op in (in,notin)", {"op": "notin"}) == [True]


def test_empty_selector_matches_everything_including_no_labels() -> None:
    selector = parse_label_selector("")
    assert selector.empty
    assert selector.matches(None) and selector.matches(WEB)
    assert parse_label_selector(None).empty
    assert parse_label_selector("   ").empty


def test_non_empty_selector_is_not_empty_and_treats_none_as_no_labels() -> None:
    selector = parse_label_selector("!app")
    assert not selector.empty
    assert selector.matches(None)
    assert not parse_label_selector("app").matches(None)


def test_canonical_string_sorts_requirements_and_values() -> None:
    selector = parse_label_selector("z notin (b,a),app==web,  a,!b, n>3")
    assert str(selector) == "a,app=web,!b,n>3,z notin (a,b)"  # sorted by key, as upstream
    assert parse_label_selector(str(selector)) == selector


def test_duplicate_requirements_collapse() -> None:
    assert parse_label_selector("a=b,a=b") == parse_label_selector("a=b")


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "app in (a",  # unterminated set
        "=x",  # no key
        "app in a",  # set without parentheses
        "app in",  # set missing
        "app=web,",  # trailing comma
        ",app=web",  # leading comma
        "app=web tier=x",  # missing comma
        "app web",  # unknown operator
        "!app=web",  # ! takes only a key
        "!!app",
        "app=(web)",  # parenthesis is not a value
        "app in (a b)",  # missing comma in set
        "app in (a,b))",
        "app=a=b",
        "x>y",  # gt/lt need an integer
        "x<1.5",
        "(a)",
    ],
)
def test_malformed_selector_raises_selector_error(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


@pytest.mark.parametrize(
    "key",
    [
        "-app",  # must start alphanumeric
        "app-",  # must end alphanumeric
        "a" * 64,  # name part too long
        "Example.com/app",  # prefix must be lowercase
        "example.com/",  # empty name
        "/app",  # empty prefix
        "a/b/c",  # two slashes
        "ex_ample.com/app",  # underscore not allowed in the DNS prefix
        ("a" * 250) + ".com/x",  # prefix too long
        "app$",
    ],
)
def test_invalid_label_keys_are_rejected(key: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(f"{key}=x")
    with pytest.raises(SelectorError):
        parse_label_selector(key)


@pytest.mark.parametrize("key", ["a", "A_b.C-d9", "a" * 63, "example.com/App_1", "a.b-c.d/x", "9"])
def test_valid_label_keys_are_accepted(key: str) -> None:
    assert parse_label_selector(f"{key}=x").matches({key: "x"})


@pytest.mark.parametrize("value", ["-x", "x-", "x" * 64, "a/b", "a:b", "_x"])
def test_invalid_label_values_are_rejected(value: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(f"app={value}")
    with pytest.raises(SelectorError):
        parse_label_selector(f"app in (ok,{value})")


def test_selector_error_carries_a_message() -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector("=x")
    assert "found '='" in info.value.message
    assert isinstance(info.value, ValueError)


def test_requirement_create_validates_operator_arity() -> None:
    with pytest.raises(SelectorError):
        Requirement.create("a", Operator.IN, [])
    with pytest.raises(SelectorError):
        Requirement.create("a", Operator.EQUALS, ["x", "y"])
    with pytest.raises(SelectorError):
        Requirement.create("a", Operator.EXISTS, ["x"])
    with pytest.raises(SelectorError):
        Requirement.create("a", "bogus", ["x"])
    assert Requirement.create("a", "in", ["y", "x", "y"]).values == ("x", "y")


# -- metav1.LabelSelector ------------------------------------------------------------------------


def test_dict_selector_combines_match_labels_and_expressions() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    good = {"app": "web", "tier": "edge", "owner": "x"}
    assert selector.matches(good)
    assert not selector.matches({**good, "env": "dev"})
    assert not selector.matches({**good, "legacy": "1"})
    assert not selector.matches({**good, "tier": "backend"})
    assert not selector.matches({"app": "web", "tier": "edge"})
    assert selector == parse_label_selector("app=web,tier in (frontend,edge),env notin (dev),owner,!legacy")


def test_empty_dict_selector_matches_everything_and_none_matches_nothing() -> None:
    assert label_selector_from_dict({}).matches({"a": "b"})
    assert label_selector_from_dict({}).empty
    nothing = label_selector_from_dict(None)
    assert nothing == LabelSelector.nothing()
    assert not nothing.empty
    assert not nothing.matches({}) and not nothing.matches({"a": "b"})


@pytest.mark.parametrize(
    "sel",
    [
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]},
        {"matchExpressions": [{"operator": "Exists"}]},
        {"matchExpressions": [{"key": "-a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["-bad"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]},
        {"matchExpressions": {"key": "a"}},
        {"matchExpressions": ["a"]},
        {"matchLabels": {"a": 1}},
        {"matchLabels": {"bad key": "x"}},
        {"matchLabels": {"a": "bad value"}},
        {"matchLabels": ["a"]},
        ["not", "a", "map"],
    ],
)
def test_invalid_dict_selectors_raise_selector_error(sel: object) -> None:
    with pytest.raises(SelectorError):
        label_selector_from_dict(sel)  # type: ignore[arg-type]
