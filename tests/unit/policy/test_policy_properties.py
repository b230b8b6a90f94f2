"""Property-based tests of the policy decision functions."""

from __future__ import annotations

import copy
import json
import math
import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.policy.claims import claim, claim_of, claim_patch, unclaim
from flotilla.policy.matching import (
    best_policy,
    best_propagation_policy,
    can_preempt,
    explicit_priority,
    policy_precision,
)
from flotilla.policy.naming import SAFE_ENCODE_ALPHABET, generate_binding_name, generate_work_name
from flotilla.policy.overrides import (
    ImageComponents,
    OverrideError,
    applied_overrides_json,
    apply_overriders,
    apply_overrides,
    go_json_dumps,
    parse_image,
)

settings.register_profile("policy", max_examples=150, deadline=None)
settings.load_profile("policy")

LABEL_VALUES = st.sampled_from(["web", "db", "cache"])
TEMPLATE = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["nginx", "redis", "api"]),
        "app": LABEL_VALUES,
        "namespace": st.sampled_from(["default", "prod"]),
    }
).map(
    lambda t: {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": t["name"], "namespace": t["namespace"], "labels": {"app": t["app"]}},
    }
)
SELECTOR = st.one_of(
    st.builds(
        lambda n: {"apiVersion": "apps/v1", "kind": "Deployment", "name": n},
        st.sampled_from(["nginx", "redis"]),
    ),
    st.builds(
        lambda v: {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "labelSelector": {"matchLabels": {"app": v}},
        },
        LABEL_VALUES,
    ),
    st.just({"apiVersion": "apps/v1", "kind": "Deployment"}),
    st.just({"apiVersion": "apps/v1", "kind": "StatefulSet"}),
)
POLICY_BODY = st.tuples(
    st.lists(SELECTOR, min_size=1, max_size=3),
    st.one_of(st.none(), st.integers(-3, 3)),
    st.sampled_from(["default", "prod"]),
)


def make_policies(bodies: list[tuple[Any, Any, str]], kind: str) -> list[dict[str, Any]]:
    policies = []
    for i, (selectors, priority, namespace) in enumerate(bodies):
        spec: dict[str, Any] = {"resourceSelectors": selectors}
        if priority is not None:
            spec["priority"] = priority
        meta: dict[str, Any] = {"name": f"{kind.lower()}-{i:02d}"}
        if kind == "PropagationPolicy":
            meta["namespace"] = namespace
        policies.append({"kind": kind, "metadata": meta, "spec": spec})
    return policies


@given(TEMPLATE, st.lists(POLICY_BODY, max_size=8), st.lists(POLICY_BODY, max_size=8), st.randoms())
def test_best_policy_does_not_depend_on_list_order(template, pp_bodies, cpp_bodies, rnd) -> None:
    policies = make_policies(pp_bodies, "PropagationPolicy")
    cluster_policies = make_policies(cpp_bodies, "ClusterPropagationPolicy")
    expected = best_policy(template, policies, cluster_policies)
    rnd.shuffle(policies)
    rnd.shuffle(cluster_policies)
    assert best_policy(template, policies, cluster_policies) == expected


@given(TEMPLATE, st.lists(POLICY_BODY, max_size=8))
def test_best_policy_is_maximal_in_priority_precision_and_name(template, pp_bodies) -> None:
    policies = make_policies(pp_bodies, "PropagationPolicy")
    best = best_propagation_policy(template, policies)
    candidates = [
        p
        for p in policies
        if p["metadata"]["namespace"] == template["metadata"]["namespace"]
        and policy_precision(template, p) > 0
    ]
    if not candidates:
        assert best is None
        return
    assert best is not None

    def rank(p: dict[str, Any]) -> tuple[int, int]:
        return explicit_priority(p), int(policy_precision(template, p))

    for other in candidates:
        assert rank(other) <= rank(best)
        if rank(other) == rank(best):
            assert best["metadata"]["name"] <= other["metadata"]["name"]


@given(TEMPLATE, st.lists(POLICY_BODY, min_size=1, max_size=6), st.lists(POLICY_BODY, max_size=6))
def test_a_matching_namespaced_policy_always_wins_over_cluster_policies(
    template, pp_bodies, cpp_bodies
) -> None:
    policies = make_policies(pp_bodies, "PropagationPolicy")
    _, is_cluster = best_policy(template, policies, make_policies(cpp_bodies, "ClusterPropagationPolicy"))
    if best_propagation_policy(template, policies) is not None:
        assert not is_cluster


POLICY_FOR_PREEMPTION = st.builds(
    lambda cluster, name, priority: {
        "kind": "ClusterPropagationPolicy" if cluster else "PropagationPolicy",
        "metadata": {"name": name} if cluster else {"name": name, "namespace": "default"},
        "spec": {"priority": priority, "preemption": "Always"},
    },
    st.booleans(),
    st.sampled_from(["a", "b", "c"]),
    st.integers(-2, 2),
)


@given(POLICY_FOR_PREEMPTION, POLICY_FOR_PREEMPTION)
def test_preemption_is_never_mutual(a, b) -> None:
    assert not (can_preempt(a, b) and can_preempt(b, a))


NAME = st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9:.-]{0,40}", fullmatch=True)
KIND = st.sampled_from(["Deployment", "ConfigMap", "ClusterRole", "Pod"])


@given(KIND, NAME, st.sampled_from(["", "default", "Prod"]))
def test_generated_names_are_lowercase_and_colon_free(kind, name, namespace) -> None:
    binding = generate_binding_name(kind, name)
    work = generate_work_name(kind, name, namespace)
    assert binding == binding.lower() and ":" not in binding
    prefix, _, suffix = work.rpartition("-")
    assert prefix == name.replace(":", ".").lower()
    assert suffix and set(suffix) <= set(SAFE_ENCODE_ALPHABET)
    assert generate_work_name(kind, name, namespace) == work
    assert generate_work_name(kind, name.upper(), namespace) == generate_work_name(
        kind, name.lower(), namespace
    )


PATH_COMPONENT = st.from_regex(r"[a-z0-9]+(?:[._-][a-z0-9]+)?", fullmatch=True)
IMAGE = st.builds(
    ImageComponents,
    hostname=st.sampled_from(["", "registry.io", "localhost", "localhost:5000", "my.reg:443"]),
    repository=st.lists(PATH_COMPONENT, min_size=1, max_size=3).map("/".join),
    tag=st.one_of(st.just(""), st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)),
).flatmap(
    lambda c: st.one_of(
        st.just(c),
        st.builds(
            lambda hex_: ImageComponents(c.hostname, c.repository, "", "sha256:" + hex_),
            st.from_regex(r"[a-f0-9]{64}", fullmatch=True),
        ),
    )
)


@given(IMAGE)
def test_valid_image_references_round_trip(components) -> None:
    # A first path component without '.', ':' and other than localhost is not a registry.
    if components.hostname == "" and "/" in components.repository:
        first = components.repository.split("/")[0]
        if "." in first:
            return
    text = str(components)
    assert parse_image(text) == components
    assert str(parse_image(text)) == text


LABELS = st.dictionaries(
    st.sampled_from(["a", "b", "example.com/c", "d"]), st.sampled_from(["1", "2"]), max_size=4
)


@given(LABELS, LABELS)
def test_labels_add_then_remove_leaves_only_untouched_keys(existing, changes) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": existing}}
    added = apply_overriders(obj, {"labelsOverrider": [{"operator": "add", "value": changes}]})
    assert added["metadata"]["labels"] == {**existing, **changes}
    removed = apply_overriders(added, {"labelsOverrider": [{"operator": "remove", "value": changes}]})
    assert removed["metadata"]["labels"] == {k: v for k, v in existing.items() if k not in changes}
    assert obj["metadata"]["labels"] == existing


OVERRIDE_POLICY = st.builds(
    lambda replicas, label, selector: {
        "kind": "OverridePolicy",
        "metadata": {"name": "", "namespace": "default"},
        "spec": {
            **({"resourceSelectors": [selector]} if selector else {}),
            "overrideRules": [
                {
                    "overriders": {
                        "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": replicas}],
                        "labelsOverrider": [{"operator": "add", "value": {"last": label}}],
                    }
                }
            ],
        },
    },
    st.integers(0, 9),
    st.sampled_from(["x", "y", "z"]),
    st.one_of(st.none(), SELECTOR),
)


@given(st.lists(OVERRIDE_POLICY, max_size=6), st.randoms())
def test_apply_overrides_does_not_depend_on_policy_order_and_never_mutates(policies, rnd) -> None:
    for i, policy in enumerate(policies):
        policy["metadata"]["name"] = f"op-{i}"
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 1},
    }
    cluster = {"metadata": {"name": "m1"}}
    snapshot = copy.deepcopy((manifest, policies))
    result, applied = apply_overrides(manifest, cluster, policies, [])
    assert (manifest, policies) == snapshot
    shuffled = list(policies)
    rnd.shuffle(shuffled)
    assert apply_overrides(manifest, cluster, shuffled, []) == (result, applied)
    encoded = applied_overrides_json(applied)
    if applied:
        assert encoded is not None
        decoded = json.loads(encoded)
        assert [i["policyName"] for i in decoded] == sorted(a.policy_name for a in applied)
    else:
        assert encoded is None


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_json_floats_parse_back_to_the_same_value(value) -> None:
    text = go_json_dumps(value)
    assert "e-0" not in text
    parsed = json.loads(text, parse_int=float)  # Go writes integral floats without a fraction
    assert parsed == value and math.copysign(1.0, parsed) == math.copysign(1.0, value)


TEMPLATE_LABELS = st.dictionaries(st.sampled_from(["app", "tier", "example.com/x"]), st.just("v"), max_size=3)
CLAIMING_POLICY = st.sampled_from(
    [
        {
            "kind": "PropagationPolicy",
            "metadata": {
                "name": "pp",
                "namespace": "default",
                "labels": {"propagationpolicy.karmada.io/permanent-id": "1"},
            },
        },
        {
            "kind": "ClusterPropagationPolicy",
            "metadata": {"name": "cpp", "labels": {"clusterpropagationpolicy.karmada.io/permanent-id": "2"}},
        },
    ]
)


@given(TEMPLATE_LABELS, CLAIMING_POLICY)
def test_claim_is_idempotent_and_unclaim_restores_user_labels(labels, policy) -> None:
    template = {"kind": "Deployment", "metadata": {"name": "x", "namespace": "default", "labels": labels}}
    claimed = claim(template, policy)
    assert claim_patch(claimed, policy) is None
    ref = claim_of(claimed)
    assert ref is not None and ref.name == policy["metadata"]["name"]
    freed = unclaim(claimed, cluster_scoped=ref.cluster_scoped)
    assert claim_of(freed) is None
    assert freed["metadata"]["labels"] == labels


@given(st.text(alphabet=string.printable, max_size=30))
def test_parse_image_either_parses_or_raises_override_error(text) -> None:
    try:
        parse_image(text)
    except OverrideError:
        pass
