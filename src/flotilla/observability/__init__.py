"""Observability: Kubernetes Events for what controllers do."""

from flotilla.observability.events import EventRecorder

__all__ = ["EventRecorder"]
