"""``flotilla jsonpath``: evaluate a kubectl JSONPath template on local objects, offline.

Examples::

    flotilla jsonpath '{.status.jobStatus.jobId}' -f flinkdeployment.yaml
    kubectl get fdep orders -o json | flotilla jsonpath '{.status.jobStatus.checkpointInfo}'
    flotilla jsonpath '{range .items[*]}{.metadata.name}{"\\n"}{end}' -f list.json --allow-missing-keys

The output is what ``kubectl get -o jsonpath=TEMPLATE`` prints for the same objects: no trailing newline, a
``List`` (any kind ending in ``List`` with ``items``) printed once per item, several YAML documents one after
the other. Missing keys are errors unless ``--allow-missing-keys`` (kubectl's default is to allow them; this
command is strict by default because state-preservation rules are evaluated strictly). Numbers print as
Flotilla's state preservation prints them, so integral numbers are integers (``1734462491693``) where kubectl
prints a float read from ``1.734462491693e12`` in Go's exponent form (D7, label-safe values).

To test a ``statePreservation`` rule, run it on the *reflected status* (``status.aggregatedStatus[].status``
of the binding), not on the whole object: ``kubectl get rb NAME -o json | flotilla jsonpath
'{.status.aggregatedStatus[0].status}' --allow-missing-keys`` shows it.

Errors go to stderr with exit status 1; objects that render are still printed (as kubectl does).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from flotilla.cli.flags import add_command, run_alone

if TYPE_CHECKING:
    pass

__all__ = ["add_jsonpath_parser", "main", "run_jsonpath"]


class UsageError(Exception):
    """Bad input: the message says what to fix."""


class _Loader(yaml.SafeLoader):
    """Safe YAML with timestamps kept as strings and ``1e6``-style numbers read as floats, as kubectl does."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def add_jsonpath_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``jsonpath`` sub-command to ``subparsers`` (sets ``fn`` to :func:`run_jsonpath`)."""
    p = add_command(
        subparsers, "jsonpath", help="evaluate a kubectl JSONPath template on local YAML/JSON objects",
        description="Print what `kubectl get -o jsonpath=TEMPLATE` prints for local objects, offline. "
                    "Useful to test state-preservation rules (run them on the reflected status).",
        examples=["flotilla jsonpath '{.jobStatus.jobId}' -f status.yaml"])
    p.add_argument("template", metavar="TEMPLATE", help="a kubectl JSONPath template, e.g. '{.metadata.name}'")
    p.add_argument("-f", "--filename", default="-", metavar="FILE",
                   help="YAML or JSON file with the object(s); - (the default) reads stdin")
    p.add_argument("--allow-missing-keys", action="store_true",
                   help="print nothing for a missing key instead of failing (kubectl's "
                        "--allow-missing-template-keys)")
    p.set_defaults(fn=run_jsonpath)
    return p


def _read(name: str, stdin: TextIO | None) -> tuple[str, str]:
    if name == "-":
        source = stdin or sys.stdin
        if stdin is None and source.isatty():
            raise UsageError("no input: pass -f FILE, or pipe the object(s) into the command")
        return "stdin", source.read()
    path = Path(name)
    if path.is_dir():
        raise UsageError(f"{name}: is a directory; give a file")
    try:
        return name, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{name}: no such file or directory") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name}: not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"{name}: cannot read: {e.strerror}") from None


def _documents(label: str, text: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # perhaps YAML flow style, or several JSON documents: let YAML try
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        raise UsageError(f"{label}: not valid YAML or JSON: {e}") from None


def _objects(documents: Sequence[Any]) -> Iterator[Any]:
    for doc in documents:
        if (isinstance(doc, dict) and isinstance(doc.get("items"), list)
                and str(doc.get("kind", "")).endswith("List")):
            yield from doc["items"]
        else:
            yield doc


def run_jsonpath(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None,
                 stdin: TextIO | None = None) -> int:
    """Run the sub-command; returns the exit status."""
    from flotilla.failover.state import similar_keys
    from flotilla.jsonpath import JSONPathError, JSONPathMissingKeyError, JSONPathSyntaxError, parse

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        try:
            template = parse(args.template)
        except JSONPathSyntaxError as e:
            pointer = " " * e.position + "^"
            raise UsageError(f"error parsing jsonpath {args.template}: {e.message} (at position {e.position})\n"
                             f"  {args.template}\n  {pointer}") from None
        label, text = _read(args.filename, stdin)
        objects = list(_objects(_documents(label, text)))
        if not objects:
            raise UsageError(f"{label}: no object found")
    except UsageError as e:
        err.write(f"error: {e}\n")
        return 1
    status = 0
    for index, obj in enumerate(objects):
        try:
            rendered = template.render(obj, allow_missing_keys=args.allow_missing_keys)
        except JSONPathError as e:
            status = 1
            where = _describe(obj, index, len(objects))
            hint = ""
            if isinstance(e, JSONPathMissingKeyError):
                similar = similar_keys(e.key, obj)
                if similar:
                    hint = "; similar keys: " + ", ".join(f"{k} (at {p})" for k, p in similar)
                if not args.allow_missing_keys:
                    hint += " (pass --allow-missing-keys to print nothing instead)"
            err.write(f"error: executing jsonpath {args.template} on {where}: {e}{hint}\n")
            continue
        out.write(rendered)
    out.flush()
    return status


def _describe(obj: Any, index: int, count: int) -> str:
    if isinstance(obj, dict):
        meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        kind, name = obj.get("kind"), meta.get("name")
        if kind and name:
            ns = meta.get("namespace")
            return f"{kind} {ns + '/' if ns else ''}{name}"
    return f"object {index + 1} of {count}" if count > 1 else "the object"


def main(argv: Sequence[str] | None = None) -> int:
    return run_alone("jsonpath", add_jsonpath_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
