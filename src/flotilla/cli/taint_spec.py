"""``taint clusters NAME key[=value]:Effect[-]``: parsing the arguments and computing the new taints, as karmadactl
(and kubectl for nodes) do it. Pure; the command is :mod:`flotilla.cli.taint_commands`.

* ``key=value:Effect`` / ``key:Effect`` adds (or, with ``--overwrite``, replaces) the taint with that key and
  effect; ``key:Effect-`` removes it; ``key-`` removes every taint with that key.
* Effects: ``NoSchedule``, ``PreferNoSchedule``, ``NoExecute`` are accepted here as karmadactl accepts them; the API
  server then refuses what a Cluster cannot carry (``PreferNoSchedule``, as Karmada's API server does).
* Without ``--overwrite``, adding a taint whose key and effect are already on the cluster is refused.
* The result is ``tainted`` (only additions), ``untainted`` (only removals) or ``modified`` (both, or
  ``--overwrite``), as karmadactl prints it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from flotilla.kube.validation import label_value_errors, qualified_name_errors

__all__ = ["TaintSpecError", "TaintUpdate", "UNSCHEDULABLE_TAINT_KEY", "apply_update", "parse_taint_args",
           "split_resources_and_taints"]

EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: ``karmadactl cordon`` / ``uncordon``'s taint (with effect NoSchedule).
UNSCHEDULABLE_TAINT_KEY: Final = "cluster.karmada.io/unschedulable"
TAINTED: Final = "tainted"
UNTAINTED: Final = "untainted"
MODIFIED: Final = "modified"


class TaintSpecError(ValueError):
    """A taint argument or update that cannot be done; the message is karmadactl's."""


@dataclass(frozen=True)
class TaintUpdate:
    add: tuple[dict[str, str], ...]
    remove: tuple[dict[str, str], ...]  # effect "" = every effect of that key


def _taint_str(taint: Mapping[str, Any]) -> str:
    value = taint.get("value") or ""
    effect = taint.get("effect") or ""
    out = str(taint.get("key"))
    if value:
        out += "=" + str(value)
    if effect:
        out += ":" + str(effect)
    return out


def _check_effect(effect: str) -> None:
    if effect not in EFFECTS:
        raise TaintSpecError(f"invalid taint effect: {effect}, unsupported taint effect")


def _parse_one(spec: str) -> dict[str, str]:
    parts = spec.split(":")
    value = ""
    effect = ""
    if len(parts) == 1:
        key = parts[0]
    elif len(parts) == 2:
        effect = parts[1]
        _check_effect(effect)
        kv = parts[0].split("=")
        if len(kv) > 2:
            raise TaintSpecError(f"invalid taint spec: {spec}")
        key = kv[0]
        if len(kv) == 2:
            value = kv[1]
            errs = label_value_errors(value)
            if errs:
                raise TaintSpecError(f"invalid taint spec: {spec}, {'; '.join(errs)}")
    else:
        raise TaintSpecError(f"invalid taint spec: {spec}")
    errs = qualified_name_errors(key)
    if errs:
        raise TaintSpecError(f"invalid taint spec: {spec}, {'; '.join(errs)}")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def split_resources_and_taints(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``clusters NAME... TAINT...`` -> (resource words, taint specs): a word with ``=``, ``:`` or a trailing
    ``-`` is a taint, and every resource comes first."""
    resources: list[str] = []
    taints: list[str] = []
    for word in args:
        is_taint = "=" in word or ":" in word or word.endswith("-")
        if is_taint:
            taints.append(word)
        elif taints:
            raise TaintSpecError(f"all resources must be specified before taint changes: {word}")
        else:
            resources.append(word)
    return resources, taints


def parse_taint_args(specs: Sequence[str]) -> TaintUpdate:
    if not specs:
        raise TaintSpecError("at least one taint update is required")
    add: list[dict[str, str]] = []
    remove: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        if spec.endswith("-"):
            key, _, effect = spec[:-1].partition(":")
            if effect:
                _check_effect(effect)
            remove.append({"key": key, "effect": effect})
            continue
        taint = _parse_one(spec)
        if not taint["effect"]:
            raise TaintSpecError(f"invalid taint spec: {spec}")
        if (taint["key"], taint["effect"]) in seen:
            raise TaintSpecError(f"duplicated taints with the same key and effect: {_taint_str(taint)}")
        seen.add((taint["key"], taint["effect"]))
        add.append(taint)
    conflicts = [f'{{"{r["key"]}":"{r["effect"]}"}}' for a in add for r in remove
                 if a["key"] == r["key"] and (not r["effect"] or a["effect"] == r["effect"])]
    if conflicts:
        raise TaintSpecError("can not both modify and remove the following taint(s) in the same command: "
                             + ", ".join(conflicts))
    return TaintUpdate(tuple(add), tuple(remove))


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def apply_update(cluster_name: str, current: Sequence[Mapping[str, Any]] | None, update: TaintUpdate, *,
                 overwrite: bool) -> tuple[str, list[dict[str, Any]]]:
    """(operation, new taints) for one cluster; TaintSpecError with karmadactl's message when refused.

    Taints that are kept keep every field they had (``timeAdded`` included); a replaced taint is new.
    """
    old = [dict(t) for t in current or () if isinstance(t, Mapping)]
    if not overwrite:
        exists = [a["key"] for a in update.add for t in old if _same(a, t)]
        if exists:
            raise TaintSpecError(f"cluster {cluster_name} already has {','.join(exists)} taint(s) with same "
                                 f"effect(s) and --overwrite is false")
    new: list[dict[str, Any]] = [dict(a) for a in update.add]
    for t in old:
        if not any(_same(t, n) for n in new):
            new.append(t)
    added = len(old) != len(new)
    errors: list[str] = []
    removed = False
    for r in update.remove:
        before = len(new)
        if r["effect"]:
            new = [t for t in new if not _same(t, r)]
        else:
            new = [t for t in new if t.get("key") != r["key"]]
        removed = len(new) != before
        if not removed:
            errors.append(f'taint "{_taint_str(r)}" not found')
    if errors:
        raise TaintSpecError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    if (added and removed) or overwrite:
        return MODIFIED, new
    if added:
        return TAINTED, new
    return UNTAINTED, new
