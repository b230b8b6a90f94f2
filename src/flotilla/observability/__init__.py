"""Observability: Prometheus metrics and structured logs (Events are written by the client's
:class:`flotilla.client.events.EventRecorder`)."""
