"""``meta.k8s.io/v1`` Table responses for ``kubectl get``: columns from printers or printer columns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flotilla.apiserver.resource_types import PrinterColumn, ResourceType
from flotilla.kube.times import human_age

TABLE_ACCEPT_MARK = "as=Table"


def wants_table(accept: str) -> bool:
    return TABLE_ACCEPT_MARK in accept and "g=meta.k8s.io" in accept


def _column_def(name: str, type_: str, description: str = "", priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


_NAME = _column_def("Name", "string", "Name must be unique within a namespace.", 0, "name")
_AGE = _column_def("Age", "string", "CreationTimestamp is a timestamp representing when this object was created.")


def _evaluate(path: str, obj: dict[str, Any]) -> list[Any]:
    from flotilla.jsonpath import JSONPathError, evaluate

    try:
        return evaluate(path, obj, allow_missing_keys=True)
    except JSONPathError:
        return []


def _cell(col: PrinterColumn, obj: dict[str, Any], now: datetime) -> Any:
    values = _evaluate(col.json_path, obj)
    if not values:
        return None
    value = values[0] if len(values) == 1 else values
    if col.type == "date" and isinstance(value, str):
        return human_age(value, now)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if col.type == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if col.type == "string" and not isinstance(value, str):
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if not isinstance(value, (dict, list)) else value
    return value


def _columns_for(rt: ResourceType) -> tuple[list[dict[str, Any]], Any]:
    """Column definitions and a row function (obj, now) -> cells."""
    from flotilla.apiserver.builtin_kinds import CUSTOM_TABLES

    printer = CUSTOM_TABLES.get((rt.group, rt.kind)) if not rt.from_crd else None
    if printer is not None:
        return printer.column_definitions(), printer.cells
    if rt.printer_columns:
        cols = [_NAME] + [
            _column_def(c.name, c.type if c.type != "date" else "date", c.description, c.priority, c.format)
            for c in rt.printer_columns
        ]
        has_age = any(c.type == "date" and c.json_path.strip("{}").strip() == ".metadata.creationTimestamp"
                      for c in rt.printer_columns)
        if not has_age:
            cols.append(_AGE)

        def cells(obj: dict[str, Any], now: datetime) -> list[Any]:
            row = [obj.get("metadata", {}).get("name")]
            row.extend(_cell(c, obj, now) for c in rt.printer_columns)
            if not has_age:
                row.append(human_age(obj.get("metadata", {}).get("creationTimestamp"), now))
            return row

        return cols, cells

    def default_cells(obj: dict[str, Any], now: datetime) -> list[Any]:
        md = obj.get("metadata", {})
        return [md.get("name"), human_age(md.get("creationTimestamp"), now)]

    return [_NAME, _AGE], default_cells


def _row_object(obj: dict[str, Any], include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def build_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    include_object: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
    with_columns: bool = True,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    columns, cells = _columns_for(rt)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        ro = _row_object(obj, include_object)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    table: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": columns if with_columns else [],
        "rows": rows,
    }
    return table
