"""Generated names (Karmada's pkg/util/names)."""

from __future__ import annotations

import pytest

from flotilla.policy.naming import (
    SAFE_ENCODE_ALPHABET,
    cluster_name_from_execution_space,
    depended_by_label_key,
    fnv32a,
    generate_binding_name,
    generate_binding_reference_key,
    generate_derived_service_name,
    generate_endpoint_slice_name,
    generate_estimator_service_name,
    generate_execution_space_name,
    generate_impersonation_secret_name,
    generate_policy_name,
    generate_role_name,
    generate_service_account_name,
    generate_work_name,
    gvk_string,
    is_execution_space,
    is_reserved_namespace,
    namespaced_key,
    safe_encode_string,
    work_name_for,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [("", 0x811C9DC5), ("a", 0xE40C292C), ("foobar", 0xBF9CF968)],
)
def test_fnv32a_matches_the_published_test_vectors(data: str, expected: int) -> None:
    assert fnv32a(data) == expected
    assert fnv32a(data.encode()) == expected


def test_safe_encode_maps_each_digit_through_the_k8s_alphabet() -> None:
    # '0' is code point 48: 48 % 27 = 21 -> '4'; '9' is 57: 57 % 27 = 3 -> 'f'.
    assert safe_encode_string("0") == "4"
    assert safe_encode_string("9") == "f"
    assert safe_encode_string("0123456789") == "".join(
        SAFE_ENCODE_ALPHABET[ord(c) % 27] for c in "0123456789"
    )


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("Deployment", "nginx", "nginx-deployment"),
        ("Pods", "pod", "pod-pods"),
        ("pods", "Pod", "pod-pods"),
        ("Role", "system:controller:tom", "system.controller.tom-role"),
        ("ClusterRole", "system::tom", "system..tom-clusterrole"),
        ("RoleBinding", "system::tt:tom", "system..tt.tom-rolebinding"),
        ("ClusterRoleBinding", "system:tt:tom", "system.tt.tom-clusterrolebinding"),
    ],
)
def test_binding_name_is_lowercased_name_dash_kind_with_colons_as_dots(
    kind: str, name: str, expected: str
) -> None:
    assert generate_binding_name(kind, name) == expected


def test_binding_name_is_not_truncated_for_long_names() -> None:
    name = "x" * 250
    assert generate_binding_name("Deployment", name) == name + "-deployment"


def test_work_name_reference_value_from_the_spec() -> None:
    assert generate_work_name("Deployment", "nginx", "default") == "nginx-687f7fb96f"


def test_work_name_hashes_namespace_name_kind_lowercased() -> None:
    name = generate_work_name("Pods", "Work:Pod", "Default")
    assert name == "work.pod-" + safe_encode_string(str(fnv32a("default-work.pod-pods")))


def test_work_name_for_cluster_scoped_objects_hashes_name_and_kind_only() -> None:
    assert generate_work_name("Pod", "pod", "") == "pod-" + safe_encode_string(str(fnv32a("pod-pod")))
    assert generate_work_name("ClusterRole", "system:admin", "").startswith("system.admin-")


def test_work_name_differs_between_namespaces_and_kinds() -> None:
    names = {
        generate_work_name("Deployment", "nginx", "default"),
        generate_work_name("Deployment", "nginx", "other"),
        generate_work_name("Service", "nginx", "default"),
        generate_work_name("Deployment", "nginx", ""),
    }
    assert len(names) == 4


def test_work_name_for_reads_kind_name_and_namespace_of_an_object() -> None:
    obj = {"kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default"}}
    assert work_name_for(obj) == "nginx-687f7fb96f"


def test_execution_space_round_trip() -> None:
    assert generate_execution_space_name("member1") == "karmada-es-member1"
    assert cluster_name_from_execution_space("karmada-es-member1") == "member1"
    assert is_execution_space("karmada-es-member1")
    assert not is_execution_space("default")


def test_cluster_name_of_a_namespace_without_the_prefix_is_an_error() -> None:
    with pytest.raises(ValueError, match="wrong format"):
        cluster_name_from_execution_space("default")


def test_bare_execution_space_prefix_gives_the_empty_cluster_name() -> None:
    assert cluster_name_from_execution_space("karmada-es-") == ""


@pytest.mark.parametrize(
    ("namespace", "reserved"),
    [
        ("karmada-system", True),
        ("karmada-cluster", True),
        ("karmada-es-m1", True),
        ("default", False),
        ("kube-system", False),
        ("karmada-systemx", False),
    ],
)
def test_reserved_namespaces(namespace: str, reserved: bool) -> None:
    assert is_reserved_namespace(namespace) is reserved


def test_namespaced_key() -> None:
    assert namespaced_key("default", "pod") == "default/pod"
    assert namespaced_key("", "pod") == "pod"


def test_binding_reference_keys_do_not_collide_on_dash_boundaries() -> None:
    keys = {
        generate_binding_reference_key("prod-xxx", "mytest-deployment"),
        generate_binding_reference_key("qa-xxx", "mytest-deployment"),
        generate_binding_reference_key("", "mytest-deployment"),
        generate_binding_reference_key("a", "b-c"),
        generate_binding_reference_key("a-b", "c"),
    }
    assert len(keys) == 5


def test_depended_by_label_key_hashes_namespace_slash_name() -> None:
    key = depended_by_label_key("default", "nginx-deployment")
    assert key == "resourcebinding.karmada.io/depended-by-" + safe_encode_string(
        str(fnv32a("default/nginx-deployment"))
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "expected"),
    [("apps/v1", "Deployment", "apps/v1, Kind=Deployment"), ("v1", "Pod", "/v1, Kind=Pod")],
)
def test_gvk_string_is_the_go_format(api_version: str, kind: str, expected: str) -> None:
    assert gvk_string(api_version, kind) == expected


def test_policy_name_reference_values() -> None:
    assert generate_policy_name("ns-foo", "foo", "rand") == "foo-b4978784"
    assert generate_policy_name("ns-foo", "system:foo", "rand") == "system.foo-b4978784"


def test_policy_name_is_lowercased_but_hash_input_is_not() -> None:
    assert generate_policy_name("NS", "Foo", "g") == "foo-" + safe_encode_string(str(fnv32a("NSg")))


def test_member_side_helper_names() -> None:
    assert generate_service_account_name("m1") == "karmada-m1"
    assert generate_role_name("karmada-m1") == "karmada-controller-manager:karmada-m1"
    assert generate_impersonation_secret_name("m1") == "m1-impersonator"
    assert generate_endpoint_slice_name("eps", "m1") == "imported-m1-eps"
    assert generate_derived_service_name("svc") == "derived-svc"
    assert generate_estimator_service_name("m1") == "karmada-scheduler-estimator-m1"
