"""Records that controllers keep as JSON in an object's annotations, read defensively: users and other tools can
write any text there, so an annotation that is missing, empty, not text or not JSON reads as no record."""

from __future__ import annotations

import json
from typing import Any

from flotilla.kube.objects import as_map

__all__ = ["json_annotation"]


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
