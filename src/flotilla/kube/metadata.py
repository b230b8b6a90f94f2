"""An object's labels and annotations read defensively: users and other tools can write anything there.

:func:`string_map` (with :func:`string_labels` and :func:`string_annotations`) keeps the entries whose values are
strings, in a fresh dict the caller may change; :func:`json_annotation` reads a record that a controller keeps as
JSON in an annotation, where an annotation that is missing, empty, not text or not JSON reads as no record.
"""

from __future__ import annotations

import json
from typing import Any

from flotilla.kube.objects import as_map, meta_of

__all__ = ["json_annotation", "string_annotations", "string_labels", "string_map"]


def string_map(value: Any) -> dict[str, str]:
    """The entries of ``value`` (a mapping; anything else has none) whose values are strings, as a new dict."""
    return {str(k): v for k, v in as_map(value).items() if isinstance(v, str)}


def string_labels(obj: Any) -> dict[str, str]:
    """:func:`string_map` of the object's ``metadata.labels``."""
    return string_map(meta_of(obj).get("labels"))


def string_annotations(obj: Any) -> dict[str, str]:
    """:func:`string_map` of the object's ``metadata.annotations``."""
    return string_map(meta_of(obj).get("annotations"))


def json_annotation(annotations: Any, key: str) -> Any:
    """The JSON document in annotation ``key`` of ``annotations`` (an object's annotations; anything that is not a
    mapping has none), or None when there is no readable one. The caller checks the document's shape."""
    raw = as_map(annotations).get(key)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
