"""Garbage-collector settings for the long-running server processes (API server, embedded control plane).

CPython's cyclic collector runs a young collection every 700 net allocations and, now and then, a full one
over every tracked container in the process. A control plane allocates at a high rate (every request and
watch event decodes and builds JSON objects) and keeps a large heap of long-lived objects (the store's
history, informer caches), so with the default thresholds it spends a quarter of its CPU and pauses of
hundreds of milliseconds in the collector (measured during `flotilla bench failover`), almost all of it on
objects that reference counting frees anyway: JSON objects do not form cycles.

:func:`tune_gc` (called once start-up is done) moves what start-up made into the permanent generation
(``gc.freeze``: modules, types, schemas are never collected again) and raises the thresholds, so that most
temporary objects are freed before a collection ever looks at them and full collections are rare. Cyclic
garbage (e.g. exceptions holding their frames) is still collected, only less often.
"""

from __future__ import annotations

import gc
from typing import Final

#: allocations (net) between young collections, young collections per middle one, middle per full one
THRESHOLDS: Final = (50_000, 20, 20)


def tune_gc() -> None:
    """Freeze what exists now and raise the collector's thresholds (process-wide; call once start-up is done)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
