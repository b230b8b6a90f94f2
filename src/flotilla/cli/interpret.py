"""``flotilla interpret``: run ResourceInterpreterCustomization scripts locally (like ``karmadactl interpret``).

Examples::

    flotilla interpret -f customization.yaml --operation InterpretHealth --observed-file observed.yaml
    flotilla interpret -f customization.yaml --operation Retain --desired-file d.yaml --observed-file o.yaml
    flotilla interpret -f customization.yaml --operation ReviseReplica --observed-file o.yaml --desired-replica 2
    flotilla interpret -f customization.yaml --operation AggregateStatus --observed-file o.yaml --status-file items.yaml
    flotilla interpret -f customization.yaml --operation RestoreState --desired-file d.yaml --restore-file r.yaml
    flotilla interpret -f customization.yaml --check

Each result is printed as ``---``, ``# [i/n] <name>:`` and the value as YAML, written as karmadactl writes it
(:mod:`flotilla.cli.goyaml`). Operation names are
matched ignoring case. Only the customizations' scripts run unless ``--with-builtin`` is given, which
lets Flotilla's built-in rules (third-party, native, default) answer when no script is defined.
Errors go to stderr, with exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from flotilla.cli import goyaml
from flotilla.cli.flags import add_command, run_alone

if TYPE_CHECKING:
    pass

__all__ = ["add_interpret_parser", "run_interpret", "main"]

_SUFFIXES = (".yaml", ".yml", ".json")


class UsageError(Exception):
    """Bad input: the message says what to fix."""


class _Loader(yaml.SafeLoader):
    """Safe YAML with timestamps left as strings, as Kubernetes reads them."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# ---------------------------------------------------------------------------------- arguments


def add_interpret_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``interpret`` sub-command to ``subparsers`` (sets ``fn`` to :func:`run_interpret`)."""
    from flotilla.interpreter.operations import Operation

    p = add_command(
        subparsers, "interpret", help="run ResourceInterpreterCustomization scripts locally (test, validate)",
        description="Validate and test ResourceInterpreterCustomization Lua scripts before applying them: "
                    "run one operation on local objects and print the results as YAML.",
        notes="operations: " + ", ".join(o.value for o in Operation) + " (case does not matter)",
        examples=["flotilla interpret -f customization.yaml --check",
                  "flotilla interpret -f customization.yaml --operation InterpretHealth --observed-file obs.yaml"])
    p.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                   help="file or directory with the customizations (YAML or JSON; repeatable; - for stdin)")
    p.add_argument("-R", "--recursive", action="store_true", help="read directories given with -f recursively")
    p.add_argument("--operation", default="", help="the operation to run: " + ", ".join(o.value for o in Operation))
    p.add_argument("--desired-file", default="", metavar="FILE",
                   help="the object passed as desiredObj (- for stdin)")
    p.add_argument("--observed-file", default="", metavar="FILE",
                   help="the object passed as observedObj (- for stdin)")
    p.add_argument("--status-file", default="", metavar="FILE",
                   help="AggregatedStatusItem objects (clusterName, status, applied, appliedMessage, health) passed "
                        "as statusItems, one per YAML document (a YAML list of them is accepted too; - for stdin)")
    p.add_argument("--desired-replica", type=int, default=0, metavar="N",
                   help="the desiredReplica argument of ReviseReplica (default 0)")
    p.add_argument("--restore-file", default="", metavar="FILE",
                   help="the restore argument of RestoreState: an object with path, kind (checkpoint|savepoint), "
                        "jobId, checkpointId, existed, nonce (YAML or JSON; - for stdin)")
    p.add_argument("--restore", default="", metavar="JSON",
                   help="the restore argument of RestoreState given inline, e.g. "
                        "'{\"path\": \"s3://b/ck/<jobId>/chk-42\", \"kind\": \"checkpoint\"}'")
    p.add_argument("--check", action="store_true",
                   help="validate the customizations and compile their scripts instead of running an operation")
    p.add_argument("--with-builtin", action="store_true",
                   help="when no script defines the operation, let Flotilla's built-in rules answer")
    p.set_defaults(fn=run_interpret)
    return p


# ------------------------------------------------------------------------------------ reading


def _files(name: str, recursive: bool) -> list[Path | None]:
    """``None`` stands for stdin."""
    if name == "-":
        return [None]
    if "://" in name:
        raise UsageError(f"{name}: URLs are not supported; download the file and give its path")
    path = Path(name)
    if path.is_dir():
        pattern = "**/*" if recursive else "*"
        found = sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in _SUFFIXES)
        if not found:
            raise UsageError(f"{name}: the directory has no .yaml, .yml or .json file")
        return list(found)
    if not path.exists():
        raise UsageError(f"{name}: no such file or directory")
    return [path]


def _documents(name: str, recursive: bool = False, stdin: TextIO | None = None) -> Iterator[tuple[str, Any]]:
    for path in _files(name, recursive):
        label = "stdin" if path is None else str(path)
        try:
            text = (stdin or sys.stdin).read() if path is None else path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{label}: cannot read: {e.strerror}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{label}: not UTF-8 text") from None
        try:
            docs = list(yaml.load_all(text, Loader=_Loader))  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as e:
            raise UsageError(f"{label}: not valid YAML or JSON: {e}") from None
        for doc in docs:
            if doc is None:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
                for item in doc["items"]:
                    yield label, item
            else:
                yield label, doc


def _one_object(option: str, name: str, stdin: TextIO | None) -> dict[str, Any]:
    from flotilla.interpreter import GVK, InterpreterError

    docs = list(_documents(name, stdin=stdin))
    if len(docs) != 1:
        raise UsageError(f"{option} {name} holds {len(docs)} objects; give exactly one")
    label, obj = docs[0]
    if not isinstance(obj, dict):
        raise UsageError(f"{label}: expected a Kubernetes object (a mapping), got {type(obj).__name__}")
    try:
        GVK.of(obj)
    except InterpreterError as e:
        raise UsageError(f"{label}: {e}") from None
    return obj


#: The fields of an AggregatedStatusItem and the JSON type each takes (``status`` takes any JSON value).
_ITEM_FIELDS: dict[str, tuple[type, ...] | None] = {
    "clusterName": (str,), "status": None, "applied": (bool,), "appliedMessage": (str,), "health": (str,)}


def status_item(label: str, doc: Any) -> dict[str, Any]:
    """One ``--status-file`` document as Karmada decodes it into an ``AggregatedStatusItem``: field names match
    ignoring case (an exact match wins), unknown fields are ignored, ``null`` is an unset field, a missing
    ``clusterName`` is ``""``; a field of the wrong type is an error naming it."""
    if not isinstance(doc, dict):
        raise UsageError(f"{label}: a status item must be an object (clusterName, status, applied, appliedMessage, "
                         f"health), got {type(doc).__name__}")
    item: dict[str, Any] = {"clusterName": ""}
    exact = {k for k in doc if k in _ITEM_FIELDS}
    for key, value in doc.items():
        field = key if key in exact else next((f for f in _ITEM_FIELDS if f.lower() == str(key).lower()
                                               and f not in exact), None)
        if field is None or value is None:
            continue
        types = _ITEM_FIELDS[field]
        if types is not None and (not isinstance(value, types) or (types == (str,) and isinstance(value, bool))):
            expected = "true or false" if types == (bool,) else "a string"
            where = f" of cluster {item['clusterName']!r}" if item["clusterName"] else ""
            raise UsageError(f"{label}: {field}{where} must be {expected}, got {value!r}")
        item[field] = value
    return item


def _status_items(name: str, stdin: TextIO | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for label, doc in _documents(name, stdin=stdin):
        for entry in doc if isinstance(doc, list) else [doc]:
            items.append(status_item(label, entry))
    return items


def _restore(args: argparse.Namespace, stdin: TextIO | None) -> dict[str, Any]:
    """The checked restore input of RestoreState, from ``--restore`` or ``--restore-file``."""
    from flotilla.interpreter import InterpreterError, restore_input

    if args.restore and args.restore_file:
        raise UsageError("give the restore input once: --restore or --restore-file, not both")
    if args.restore:
        label = "--restore"
        try:
            value = yaml.load(args.restore, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass; JSON is YAML
        except yaml.YAMLError as e:
            raise UsageError(f"--restore: not valid JSON: {e}") from None
    elif args.restore_file:
        docs = list(_documents(args.restore_file, stdin=stdin))
        if len(docs) != 1:
            raise UsageError(f"--restore-file {args.restore_file} holds {len(docs)} objects; give exactly one")
        label, value = docs[0]
    else:
        raise UsageError("RestoreState needs the restore input: give --restore-file FILE or --restore JSON "
                         "(path, kind, jobId, checkpointId, existed, nonce)")
    try:
        return restore_input(value)
    except InterpreterError as e:
        raise UsageError(f"{label}: {e.message.removeprefix('RestoreState: ')}") from None


def _customizations(args: argparse.Namespace, stdin: TextIO | None) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in args.filename:
        for label, doc in _documents(name, args.recursive, stdin):
            out.append((label, doc))
    return out


# ------------------------------------------------------------------------------------ output


def to_yaml(value: Any) -> str:
    """A value as ``karmadactl interpret`` prints it (Go's yaml.v3 of the value's JSON: :mod:`flotilla.cli.goyaml`)."""
    return goyaml.dump(value)


def print_results(results: Sequence[tuple[str, Any]], out: TextIO) -> None:
    for i, (name, value) in enumerate(results, 1):
        out.write("---\n")
        out.write(f"# [{i}/{len(results)}] {name}:\n")
        out.write(to_yaml(value))


# ---------------------------------------------------------------------------------- commands


def _check(customizations: list[tuple[str, dict[str, Any]]], out: TextIO) -> int:
    from flotilla.interpreter import InterpreterError, check_script, parse_customization
    from flotilla.interpreter.operations import Operation

    failed = False
    for label, doc in customizations:
        out.write("-----------------------------------\n")
        name = doc.get("metadata", {}).get("name") if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) else None
        out.write(f"SOURCE: {name or label}\n")
        try:
            ric = parse_customization(doc)
        except InterpreterError as e:
            failed = True
            out.write(f"ERROR: {e}\n")
            continue
        out.write(f"TARGET: {ric.target.api_version} {ric.target.kind}\n")
        out.write("RULES:\n")
        width = max(len(o.value) for o in Operation) + 1
        for op in Operation:
            script = ric.scripts.get(op, "")
            if not script and not op.karmada:
                continue  # Flotilla's operations are listed when set: a Karmada RIC's rules print as karmadactl's
            status = "UNSET"
            if script:
                try:
                    check_script(script)
                    status = "PASS"
                except InterpreterError as e:
                    failed = True
                    status = f"ERROR: {e}"
            out.write(f"    {op.value + ':':<{width}} {status}\n")
    return 1 if failed else 0


def _execute(args: argparse.Namespace, customizations: list[tuple[str, dict[str, Any]]], out: TextIO,
             err: TextIO, stdin: TextIO | None) -> int:
    from flotilla.interpreter import (
        GVK,
        CustomizationRegistry,
        InterpreterError,
        ResourceInterpreter,
        Source,
        parse_customization,
    )
    from flotilla.interpreter.customization import RIC_KIND
    from flotilla.interpreter.operations import Operation

    if not args.operation:
        raise UsageError("--operation is not set; use one of: " + ", ".join(o.value for o in Operation))
    try:
        op = Operation.parse(args.operation)
    except ValueError as e:
        raise UsageError(str(e)) from None
    rics = []
    for label, doc in customizations:
        try:
            rics.append(parse_customization(doc))
        except InterpreterError as e:
            raise UsageError(f"{label}: {e}") from None

    def lua_print(line: str) -> None:
        err.write(f"lua print: {line}\n")

    registry = CustomizationRegistry(rics, print_sink=lua_print)
    for conflict in registry.conflicts():
        err.write(f"warning: {conflict}; Karmada's admission webhook refuses this (the first by name is used)\n")

    desired = _one_object("--desired-file", args.desired_file, stdin) if args.desired_file else None
    observed = _one_object("--observed-file", args.observed_file, stdin) if args.observed_file else None
    # as karmadactl (since v1.17): without --status-file a Lua script gets nil, with one a table (maybe empty)
    items = _status_items(args.status_file, stdin) if args.status_file else None
    if op is not Operation.RESTORE_STATE and (args.restore or args.restore_file):
        raise UsageError(f"--restore and --restore-file are inputs of RestoreState, not of {op}")
    restore = _restore(args, stdin) if op is Operation.RESTORE_STATE else None
    target: dict[str, Any] | None
    if op is Operation.RETAIN:
        if desired is None or observed is None:
            raise UsageError("Retain needs both --desired-file (desiredObj) and --observed-file (observedObj)")
        target = desired
    else:
        if desired is None and observed is None:
            raise UsageError(f"{op} needs the object: give --observed-file or --desired-file")
        if desired is not None and observed is not None:
            raise UsageError(f"{op} takes one object: give only one of --desired-file and --observed-file")
        target = desired if desired is not None else observed
    assert target is not None
    gvk = GVK.of(target)

    interpreter = ResourceInterpreter(registry)
    source = interpreter.source(gvk, op)
    if source is not Source.CUSTOMIZATION and not args.with_builtin:
        if registry.rules_for(gvk) is None:
            targets = ", ".join(f"{t.api_version} {t.kind}" for t in registry.targets) or "none"
            raise UsageError(f"no {RIC_KIND} targets {gvk.api_version} {gvk.kind} (the object's apiVersion/kind "
                             f"must equal spec.target; targets found: {targets})")
        raise UsageError(f"the customization for {gvk.api_version} {gvk.kind} has no {op.hook_field} script: "
                         f"set spec.customizations.{op.hook_field}.luaScript to a script defining "
                         f"{op.lua_function}(...), or pass --with-builtin to use Flotilla's built-in rules")
    try:
        result = interpreter.interpret(op, desired=desired if op is Operation.RETAIN else target,
                                       observed=observed if op is Operation.RETAIN else None,
                                       status_items=items, replicas=args.desired_replica, restore=restore)
    except InterpreterError as e:
        err.write(f"error: {op} failed: {e}\n")
        return 1
    if source is not Source.CUSTOMIZATION:
        err.write(f"note: answered by the {source.value} interpreter, not a customization\n")
    print_results(result.named_values(), out)
    return 0


def run_interpret(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None,
                  stdin: TextIO | None = None) -> int:
    """Run the sub-command; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if not args.filename and not args.with_builtin:
            raise UsageError("no customization given: pass -f FILE (a ResourceInterpreterCustomization), "
                             "or --with-builtin to run only the built-in rules")
        if args.check and not args.filename:
            raise UsageError("--check needs the customizations to check: pass -f FILE")
        dashes = [o for o, v in (("-f", args.filename), ("--desired-file", [args.desired_file]),
                                 ("--observed-file", [args.observed_file]), ("--status-file", [args.status_file]),
                                 ("--restore-file", [args.restore_file]))
                  if "-" in v]
        if len(dashes) > 1:
            raise UsageError(f"only one input can come from stdin (-), got {', '.join(dashes)}")
        customizations = _customizations(args, stdin)
        if args.filename and not customizations:
            raise UsageError(f"no object found in {', '.join(args.filename)}")
        if args.check:
            return _check(customizations, out)
        return _execute(args, customizations, out, err, stdin)
    except UsageError as e:
        err.write(f"error: {e}\n")
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_alone("interpret", add_interpret_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
