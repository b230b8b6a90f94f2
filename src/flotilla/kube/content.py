"""apimachinery's content validators (names, DNS labels and subdomains, label keys and values) with its exact
error messages (``must not contain dots``, ``regex used for validation is '...'``).

Every validator takes ``legacy``: the wording of earlier apimachinery releases, which Flotilla's API server
reproduces for object metadata and label selectors (lengths said in characters, and a DNS label holding dots
given the general label message), while Karmada's admission reports the current wording (lengths in bytes, ``must
not contain dots``). Lengths are counted in bytes either way, as Go's ``len`` counts them.
"""

from __future__ import annotations

import re

# (``fullmatch``: Go's ``$`` matches only at the very end, Python's also before a final newline)

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}$")
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character"
)
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")


def regex_error(msg: str, regex: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{regex}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{regex}')"


def max_len_error(length: int, *, legacy: bool = False) -> str:
    return f"must be no more than {length} {'characters' if legacy else 'bytes'}"


def byte_len(text: str) -> int:
    """The length of ``text`` as Go's ``len`` counts it: bytes of its UTF-8 encoding."""
    return len(text.encode())


def _too_long(value: str, length: int, legacy: bool) -> list[str]:
    return [max_len_error(length, legacy=legacy)] if byte_len(value) > length else []


def dns1123_subdomain_errors(value: str, *, legacy: bool = False) -> list[str]:
    errs = _too_long(value, 253, legacy)
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1123_label_errors(value: str, *, legacy: bool = False) -> list[str]:
    errs = _too_long(value, 63, legacy)
    if _DNS1123_LABEL_RE.fullmatch(value):
        return errs
    if not legacy and _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append("must not contain dots")
    else:
        errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def label_key_errors(value: str, *, legacy: bool = False) -> list[str]:
    """``content.IsLabelKey`` (= ``IsQualifiedName``): optional DNS-subdomain prefix and ``/``, then a name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix, legacy=legacy))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    errs.extend("name part " + m for m in _too_long(name, 63, legacy))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str, *, legacy: bool = False) -> list[str]:
    errs = _too_long(value, 63, legacy)
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs
