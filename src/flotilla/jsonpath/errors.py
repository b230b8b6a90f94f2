"""The exceptions the JSONPath package raises on purpose."""

from __future__ import annotations


class JSONPathError(Exception):
    """Base class of every JSONPath error (syntax and evaluation)."""


class JSONPathSyntaxError(JSONPathError):
    """A template that cannot be parsed.

    ``position`` is the 0-based character offset in ``template`` where the problem was found; for a
    construct that is never closed (an action, a bracket, a filter, a quoted string) it is the
    offset of the character that opened it.
    """

    def __init__(self, message: str, position: int, template: str = "") -> None:
        super().__init__(f"{message} (at position {position})")
        self.message = message
        self.position = position
        self.template = template


class JSONPathEvaluationError(JSONPathError):
    """A template that parsed but failed on the given data (kubectl prints "error executing jsonpath")."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JSONPathMissingKeyError(JSONPathEvaluationError):
    """A field was found on none of the values it was applied to, and missing keys are not allowed.

    The message is kubectl's: ``<key> is not found``.
    """

    def __init__(self, key: str) -> None:
        super().__init__(f"{key} is not found")
        self.key = key
