"""Cluster admission: the Karmada aggregated API server's defaulting and validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flotilla.apiserver.webhooks.cluster import (
    ClusterAdmission,
    default_cluster,
    default_resource_models,
    go_url_parse,
)

NOW = "2026-01-02T03:04:05Z"


def cluster(name: str = "member1", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"syncMode": "Push", **spec}}


def errors(obj: dict[str, Any], op: str = "CREATE") -> list[str]:
    plugin = ClusterAdmission(now=lambda: NOW)
    plugin.default(obj, None, op)  # type: ignore[arg-type]
    return [f"{c.field}: {c.message}" for c in plugin.validate(obj, None, op)]  # type: ignore[arg-type]


def test_no_execute_taints_get_time_added() -> None:
    obj = cluster(taints=[{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoSchedule"},
                          {"key": "c", "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}])
    default_cluster(obj, "CREATE", now=lambda: NOW)
    assert [t.get("timeAdded") for t in obj["spec"]["taints"]] == [NOW, None, "2020-01-01T00:00:00Z"]


def test_zone_migrates_to_zones() -> None:
    obj = cluster(zone="z1")
    default_cluster(obj, "CREATE")
    assert obj["spec"]["zones"] == ["z1"] and "zone" not in obj["spec"]
    both = cluster(zone="z1", zones=["z2"])
    assert errors(both) == ['spec.zone: Invalid value: "z1": Zone and Zones cannot co-exist']


def test_default_resource_models_on_create() -> None:
    obj = cluster()
    default_cluster(obj, "CREATE")
    models = obj["spec"]["resourceModels"]
    assert models == default_resource_models()
    assert models[0]["ranges"] == [{"name": "cpu", "min": "0", "max": "1"}, {"name": "memory", "min": "0", "max": "4Gi"}]
    assert models[7]["ranges"][1] == {"name": "memory", "min": "512Gi", "max": "1Ti"}
    assert models[8]["ranges"] == [{"name": "cpu", "min": "128", "max": "9223372036854775807"},
                                   {"name": "memory", "min": "1Ti", "max": "9223372036854775807"}]
    assert errors(cluster()) == []
    update = cluster()
    default_cluster(update, "UPDATE")
    assert "resourceModels" not in update["spec"]
    off = cluster()
    default_cluster(off, "CREATE", resource_modeling=False)
    assert "resourceModels" not in off["spec"]


def test_resource_models_standardized_and_validated() -> None:
    models = [
        {"grade": 1, "ranges": [{"name": "cpu", "min": "2", "max": "8"}]},
        {"grade": 0, "ranges": [{"name": "cpu", "min": "1", "max": "2"}]},
    ]
    obj = cluster(resourceModels=models)
    assert errors(obj) == []
    assert obj["spec"]["resourceModels"] == [
        {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "2"}]},
        {"grade": 1, "ranges": [{"name": "cpu", "min": "2", "max": "9223372036854775807"}]},
    ]
    gap = cluster(resourceModels=[{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "2"}]},
                                  {"grade": 1, "ranges": [{"name": "cpu", "min": "3", "max": "4"}]}])
    (msg,) = errors(gap)
    assert msg.startswith("spec.resourceModels: Invalid value: [")
    assert msg.endswith("Model intervals for resources must be contiguous and non-overlapping")
    same = cluster(resourceModels=[{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "2"}]},
                                   {"grade": 0, "ranges": [{"name": "cpu", "min": "2", "max": "4"}]}])
    assert errors(same)[0].endswith("The grade of each models should not be the same")
    names = cluster(resourceModels=[{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "2"}]},
                                    {"grade": 1, "ranges": [{"name": "memory", "min": "2", "max": "4"}]}])
    assert errors(names)[0].endswith("The resource types of each models should be the same")
    inverted = cluster(resourceModels=[{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "2Gi"}]},
                                       {"grade": 1, "ranges": [{"name": "cpu", "min": "2Gi", "max": "1Gi"}]},
                                       {"grade": 2, "ranges": [{"name": "cpu", "min": "1Gi", "max": "4Gi"}]}])
    assert errors(inverted)[0].endswith("The max value of each resource must be greater than the min value")


def test_taints() -> None:
    obj = cluster(taints=[
        {"key": "ok", "effect": "NoSchedule"},
        {"key": "bad key", "value": "-x", "effect": "PreferNoSchedule"},
        {"key": "ok", "value": "other", "effect": "NoSchedule"},
        {"key": "e", "effect": ""},
    ])
    msgs = errors(obj)
    assert msgs[0].startswith('spec.taints[1].key: Invalid value: "bad key": name part must consist of')
    assert msgs[1].startswith('spec.taints[1].value: Invalid value: "-x": a valid label must be an empty string')
    assert msgs[2] == 'spec.taints[1].effect: Unsupported value: "PreferNoSchedule": supported values: "NoSchedule", "NoExecute"'
    assert msgs[3] == ('spec.taints[2]: Duplicate value: {"key":"ok","value":"other","effect":"NoSchedule"}: '
                       "taints must be unique by key and effect pair")
    assert msgs[4] == "spec.taints[3].effect: Required value"
    assert len(msgs) == 5


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("https://10.0.0.1:6443", None),
        ("https://member1.example.com", None),
        ("http://[::1]:6443", None),
        ("10.0.0.1:6443", 'Invalid value: "10.0.0.1:6443": apiEndpoint must be a valid URL: parse "10.0.0.1:6443": '
                          "first path segment in URL cannot contain colon; desired format: hostname, hostname:port, "
                          "IP or IP:port"),
        ("member1", 'Invalid value: "": host must be provided; desired format: hostname, hostname:port, IP or IP:port'),
        ("localhost:6443", 'Invalid value: "": host must be provided; desired format: hostname, hostname:port, IP or '
                           "IP:port"),
        ("https://u:p@h", 'Invalid value: "u:p": user information is not permitted in the URL'),
        ("https://h#frag", 'Invalid value: "frag": fragments are not permitted in the URL'),
        ("https://h?a=b", 'Invalid value: "a=b": query parameters are not permitted in the URL'),
        ("https://h:port", 'Invalid value: "https://h:port": apiEndpoint must be a valid URL: parse "https://h:port": '
                           'invalid port ":port" after host; desired format: hostname, hostname:port, IP or IP:port'),
        ("://h", 'Invalid value: "://h": apiEndpoint must be a valid URL: parse "://h": missing protocol scheme; '
                 "desired format: hostname, hostname:port, IP or IP:port"),
    ],
)
def test_api_endpoint(endpoint: str, expected: str | None) -> None:
    msgs = errors(cluster(apiEndpoint=endpoint))
    if expected is None:
        assert msgs == []
    else:
        assert msgs == [f"spec.apiEndpoint: {expected}"]


def test_go_url_parse_host() -> None:
    url, err = go_url_parse("https://a.b:443/path")
    assert err is None and url is not None and url.host == "a.b:443" and url.scheme == "https"
    assert go_url_parse("https://a b")[1] == 'parse "https://a b": invalid character " " in host name'


def test_proxy_and_secret_refs_and_fields() -> None:
    obj = cluster(proxyURL="ftp://proxy", secretRef={"namespace": "", "name": "s"},
                  impersonatorSecretRef={"namespace": "karmada-cluster", "name": ""},
                  provider="not valid", region="eu-west-1", zones=["a", "b c"])
    assert errors(obj) == [
        "spec.secretRef.namespace: Required value",
        "spec.impersonatorSecretRef.name: Required value",
        'spec.proxyURL: Invalid value: "ftp://proxy": unsupported scheme "ftp", must be http, https, or socks5',
        'spec.provider: Invalid value: "not valid": a valid label must be an empty string or consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
        "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        'spec.zones[1]: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
        "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]
    assert errors(cluster(proxyURL="socks5://p:1080")) == []


def test_cluster_name() -> None:
    assert errors(cluster("a" * 49)) == ['metadata.name: Invalid value: "' + "a" * 49 + '": must be no more than 48 characters']
    assert errors(cluster("a.b")) == ['metadata.name: Invalid value: "a.b": must not contain dots']
    # names are only checked on create (they cannot change)
    assert errors(cluster("a.b"), "UPDATE") == []


def test_status_only_update_is_not_revalidated() -> None:
    plugin = ClusterAdmission(now=lambda: NOW)
    old = cluster(apiEndpoint="10.0.0.1:6443")  # stored before validation existed
    new = copy.deepcopy(old)
    new["status"] = {"conditions": []}
    plugin.default(new, old, "UPDATE")
    assert new["spec"] == old["spec"]
    assert plugin.validate(new, old, "UPDATE") == []
