"""Karmada's resource types as client ``Resource`` values (one place for group/version/plural/kind/scope)."""

from __future__ import annotations

from flotilla.kube.resources import Resource

CLUSTERS = Resource("cluster.karmada.io", "v1alpha1", "clusters", "Cluster", False)
PROPAGATION_POLICIES = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True)
CLUSTER_PROPAGATION_POLICIES = Resource("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies",
                                        "ClusterPropagationPolicy", False)
OVERRIDE_POLICIES = Resource("policy.karmada.io", "v1alpha1", "overridepolicies", "OverridePolicy", True)
CLUSTER_OVERRIDE_POLICIES = Resource("policy.karmada.io", "v1alpha1", "clusteroverridepolicies",
                                     "ClusterOverridePolicy", False)
CLUSTER_TAINT_POLICIES = Resource("policy.karmada.io", "v1alpha1", "clustertaintpolicies", "ClusterTaintPolicy", False)
RESOURCE_BINDINGS = Resource("work.karmada.io", "v1alpha2", "resourcebindings", "ResourceBinding", True)
CLUSTER_RESOURCE_BINDINGS = Resource("work.karmada.io", "v1alpha2", "clusterresourcebindings",
                                     "ClusterResourceBinding", False)
WORKS = Resource("work.karmada.io", "v1alpha1", "works", "Work", True)
RESOURCE_INTERPRETER_CUSTOMIZATIONS = Resource("config.karmada.io", "v1alpha1", "resourceinterpretercustomizations",
                                               "ResourceInterpreterCustomization", False)
WORKLOAD_REBALANCERS = Resource("apps.karmada.io", "v1alpha1", "workloadrebalancers", "WorkloadRebalancer", False)
