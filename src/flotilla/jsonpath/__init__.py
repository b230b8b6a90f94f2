"""kubectl's JSONPath template dialect (``kubectl get -o jsonpath=...``), as pure functions.

>>> pod = {"metadata": {"name": "web-0"}, "status": {"phase": "Running"}}
>>> parse("{.metadata.name}: {.status.phase}").render(pod)
'web-0: Running'
>>> evaluate(".status.phase", pod)
['Running']

``parse`` accepts whole templates (text and ``{...}`` actions, ``{range}...{end}``);
``parse_expression``/``evaluate`` accept one expression with or without braces, as printer
columns (``.status.phase``) and Karmada state-preservation rules (``{ .jobStatus.jobId }``) write
them. Missing keys are errors unless ``allow_missing_keys=True`` (kubectl's
``--allow-missing-template-keys``); out-of-range indexes are errors either way, as in kubectl.
"""

from flotilla.jsonpath.errors import (
    JSONPathError,
    JSONPathEvaluationError,
    JSONPathMissingKeyError,
    JSONPathSyntaxError,
)
from flotilla.jsonpath.formatting import format_value
from flotilla.jsonpath.template import Template, evaluate, parse, parse_expression

__all__ = [
    "JSONPathError",
    "JSONPathEvaluationError",
    "JSONPathMissingKeyError",
    "JSONPathSyntaxError",
    "Template",
    "evaluate",
    "format_value",
    "parse",
    "parse_expression",
]
