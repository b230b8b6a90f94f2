"""Pure helpers for Kubernetes objects: label and field selectors, patches, validation, Go-compatible regular
expressions, timestamps, durations, quantities, JSON copies and diffs, and the ``Resource`` value that names a
kind's REST endpoint. Everything here is a pure function or a value type; it imports nothing else of Flotilla, so
the API server, the client and every decision package can build on it."""
