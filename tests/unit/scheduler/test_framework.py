"""The plugin seam: the runners apply whatever plugins they are given, the registered ones by default."""

from __future__ import annotations

from typing import Any

from flotilla.scheduler.errors import FilterFailure
from flotilla.scheduler.framework import (
    MAX_SCORE,
    FilterContext,
    FilterPlugin,
    ScorePlugin,
    run_filters,
    score_clusters,
)
from flotilla.scheduler.model import BindingSpec, Cluster, parse_binding_spec, parse_cluster
from flotilla.scheduler.plugins import FILTER_PLUGINS, SCORE_PLUGINS

from .builders import NOW, binding, cluster

NO_CANARY_REASON = "cluster(s) is a canary"


class NoCanary:
    """A filter of the test's own: clusters labelled ``canary`` are not used."""

    name = "NoCanary"

    def filter(self, ctx: FilterContext, cluster: Cluster) -> str | None:
        return NO_CANARY_REASON if "canary" in cluster.labels else None


class PreferGold:
    """A score of the test's own: clusters labelled ``tier=gold`` are preferred."""

    name = "PreferGold"

    def score(self, spec: BindingSpec, cluster: Cluster) -> int:
        return MAX_SCORE if cluster.labels.get("tier") == "gold" else 0


def ctx_for(rb: dict[str, Any]) -> FilterContext:
    return FilterContext(spec=parse_binding_spec(rb["spec"]), now=NOW)


def test_registered_plugins_are_karmadas_in_order() -> None:
    assert [plugin.name for plugin in FILTER_PLUGINS] == [
        "ClusterAffinity",
        "SpreadConstraint",
        "APIEnablement",
        "TaintToleration",
        "ClusterEviction",
    ]
    assert [plugin.name for plugin in SCORE_PLUGINS] == ["ClusterLocality", "ClusterAffinity"]


def test_a_filter_plugin_given_to_the_runner_decides() -> None:
    canary = parse_cluster(cluster("m1", labels={"canary": "yes"}))
    ctx = ctx_for(binding({}))
    assert run_filters(ctx, canary) is None  # the registered filters let it pass
    plugins: tuple[FilterPlugin, ...] = (*FILTER_PLUGINS, NoCanary())
    assert run_filters(ctx, canary, plugins) == FilterFailure("NoCanary", NO_CANARY_REASON)
    assert run_filters(ctx, parse_cluster(cluster("m2")), plugins) is None


def test_the_first_failing_plugin_in_the_given_order_is_reported() -> None:
    canary = parse_cluster(cluster("m1", labels={"canary": "yes"}))
    ctx = ctx_for(binding({"clusterAffinity": {"clusterNames": ["m2"]}}))
    assert run_filters(ctx, canary, (*FILTER_PLUGINS, NoCanary())) == FilterFailure(
        "ClusterAffinity", "cluster(s) did not match the placement cluster affinity constraint"
    )
    assert run_filters(ctx, canary, (NoCanary(), *FILTER_PLUGINS)) == FilterFailure("NoCanary", NO_CANARY_REASON)
    assert run_filters(ctx, canary, ()) is None  # no plugin, no failure


def test_a_score_plugin_given_to_the_runner_adds_to_the_total() -> None:
    spec = parse_binding_spec(binding({}, clusters={"m1": 1})["spec"])
    clusters = [parse_cluster(cluster("m1")), parse_cluster(cluster("m2", labels={"tier": "gold"}))]
    assert score_clusters(spec, clusters) == {"m1": 100, "m2": 0}  # ClusterLocality
    plugins: tuple[ScorePlugin, ...] = (*SCORE_PLUGINS, PreferGold())
    assert score_clusters(spec, clusters, plugins) == {"m1": 100, "m2": 100}
    assert score_clusters(spec, clusters, (PreferGold(), PreferGold())) == {"m1": 0, "m2": 200}
