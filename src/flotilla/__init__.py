"""Flotilla: a multi-cluster Kubernetes control plane with stateful failover."""
__version__ = "0.1.0"
