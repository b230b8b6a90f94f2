"""``flotilla interpret`` answers as ``karmadactl interpret`` for the behaviours Karmada's shipped customizations rely on.

Each case is a small ResourceInterpreterCustomization of our own with desired/observed/status files, run the way a
Karmada user runs ``karmadactl interpret``; the expected text is what Karmada prints, worked out from its Go glue
(status items marshalled to JSON then decoded into Lua, empty tables decided from reference objects, the result
turned into JSON and written by yaml.v3) and from gopher-lua (pairs in insertion order, numbers as Go writes them).
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flotilla.main import build_parser

KIND = "apiVersion: example.io/v1\nkind: Gadget\n"


def aggregated(status: str) -> str:
    """What karmadactl prints for AggregateStatus of GADGET with ``status`` (its YAML lines under ``status:``)."""
    return ("---\n# [1/1] aggregatedStatus:\napiVersion: example.io/v1\nkind: Gadget\nmetadata:\n    name: g1\n"
            "    namespace: shop\nspec:\n    size: 2\n" + textwrap.dedent(status))


def customization(operation_field: str, script: str) -> str:
    body = textwrap.indent(textwrap.dedent(script).strip() + "\n", " " * 8)
    return (f"apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\n"
            f"metadata:\n  name: gadgets\nspec:\n  target:\n    apiVersion: example.io/v1\n    kind: Gadget\n"
            f"  customizations:\n    {operation_field}:\n      luaScript: |\n{body}")


GADGET = KIND + "metadata:\n  name: g1\n  namespace: shop\nspec:\n  size: 2\n"


@dataclass(frozen=True)
class Case:
    id: str
    operation: str
    hook: str
    script: str
    expected: str
    desired: str | None = None
    observed: str | None = None
    status: str | None = None
    args: tuple[str, ...] = field(default=())


CASES = [
    # ------------------------------------------------------------------------- how status items reach the script
    Case("no-status-file-is-nil", "AggregateStatus", "statusAggregation", """
        function AggregateStatus(desiredObj, statusItems)
          desiredObj.status = { items = type(statusItems) }
          return desiredObj
        end""", desired=GADGET, expected=aggregated("""\
        status:
            items: nil
        """)),
    Case("empty-status-file-is-an-empty-table", "AggregateStatus", "statusAggregation", """
        function AggregateStatus(desiredObj, statusItems)
          desiredObj.status = { items = type(statusItems) .. " of " .. #statusItems }
          return desiredObj
        end""", desired=GADGET, status="", expected=aggregated("""\
        status:
            items: table of 0
        """)),
    Case("status-items-decode-as-go-structs", "AggregateStatus", "statusAggregation", """
        function AggregateStatus(desiredObj, statusItems)
          local seen = {}
          for i = 1, #statusItems do
            local item = statusItems[i]
            seen[i] = string.format("[%s] applied=%s health=%s message=%s status=%s", item.clusterName,
              tostring(item.applied), tostring(item.health), tostring(item.appliedMessage), type(item.status))
          end
          desiredObj.status = { seen = seen }
          return desiredObj
        end""", desired=GADGET, status="""\
        apiVersion: example.io/v1
        kind: Gadget
        metadata: {name: g1}
        status: {ready: 1}
        ---
        ClusterName: member2
        applied: false
        appliedMessage: ""
        health: Healthy
        status: 7
        ---
        clusterName: member3
        applied: true
        """, expected=aggregated("""\
        status:
            seen:
                - '[] applied=nil health=nil message=nil status=table'
                - '[member2] applied=nil health=Healthy message=nil status=number'
                - '[member3] applied=true health=nil message=nil status=nil'
        """)),
    # ------------------------------------------------------------------------------------- empty tables, nils
    Case("empty-tables-in-an-aggregated-status", "AggregateStatus", "statusAggregation", """
        function AggregateStatus(desiredObj, statusItems)
          desiredObj.status = { inner = { conditions = {}, counts = {} }, conditions = {} }
          return desiredObj
        end""", desired=GADGET, status="clusterName: member1\n", expected=aggregated("""\
        status:
            inner: {}
        """)),
    Case("retain-decides-empty-tables-from-desired-and-observed", "Retain", "retention", """
        function Retain(desiredObj, observedObj)
          desiredObj.spec.selector = observedObj.spec.selector
          desiredObj.spec.extra = {}
          return desiredObj
        end""", desired=KIND + "metadata:\n  name: g1\nspec:\n  labels: {}\n  ports: []\n",
         observed=KIND + "metadata:\n  name: g1\nspec:\n  selector: []\n", expected="""\
        ---
        # [1/1] retained:
        apiVersion: example.io/v1
        kind: Gadget
        metadata:
            name: g1
        spec:
            labels: {}
            ports: []
            selector: []
        """),
    Case("nulls-in-arrays-are-dropped-before-the-script-runs", "InterpretStatus", "statusReflection", """
        function ReflectStatus(observedObj)
          return { count = #observedObj.status.list, missing = observedObj.status.gone == nil }
        end""", observed=KIND + "metadata:\n  name: g1\nstatus:\n  gone: null\n  list: [a, null, b]\n",
         expected="""\
        ---
        # [1/1] status:
        count: 2
        missing: true
        """),
    # ---------------------------------------------------------------------------------- gopher-lua semantics
    Case("pairs-follows-insertion-order", "AggregateStatus", "statusAggregation", """
        function AggregateStatus(desiredObj, statusItems)
          local latest = {}
          for i = 1, #statusItems do
            for _, c in ipairs(statusItems[i].status.conditions) do
              latest[c.type] = c
            end
          end
          local conditions = {}
          for _, c in pairs(latest) do
            table.insert(conditions, c.type)
          end
          local order = {}
          for k in pairs({ zulu = 1, alpha = 2, mike = 3 }) do order[#order + 1] = k end
          local mixed = {}
          mixed.b = 1
          mixed[3] = 1
          mixed.a = 1
          mixed[1] = 1
          mixed.b = nil
          mixed.b = 2
          local keys = {}
          for k in pairs(mixed) do keys[#keys + 1] = tostring(k) end
          desiredObj.status = { conditions = conditions, constructor = order, mixed = keys }
          return desiredObj
        end""", desired=GADGET, status="""\
        clusterName: member1
        status:
          conditions: [{type: Created}, {type: Succeeded}, {type: Running}]
        ---
        clusterName: member2
        status:
          conditions: [{type: Failed}, {type: Created}]
        """, expected=aggregated("""\
        status:
            conditions:
                - Created
                - Succeeded
                - Running
                - Failed
            constructor:
                - zulu
                - alpha
                - mike
            mixed:
                - "1"
                - "3"
                - b
                - a
        """)),
    Case("numbers-become-strings-as-in-go", "InterpretStatus", "statusReflection", """
        function ReflectStatus(observedObj)
          return { texts = { tostring(1e15), tostring(1 / 3), tostring(1234567.5), tostring(0.00001),
                             tostring(2 ^ 53), tostring(observedObj.spec.size / 4) } }
        end""", observed=GADGET, expected="""\
        ---
        # [1/1] status:
        texts:
            - "1000000000000000"
            - "0.3333333333333333"
            - "1.2345675e+06"
            - "1e-05"
            - "9007199254740992"
            - "0.5"
        """),
    # ------------------------------------------------------------------------------------ karmadactl's YAML
    Case("numbers-and-strings-print-as-yaml-v3", "InterpretStatus", "statusReflection", """
        function ReflectStatus(observedObj)
          return { bytes = 1000000, ratio = 0.25, small = 12, since = "2024-01-01T00:00:00Z", one = "1",
                   yes = "yes", schedule = "*/5 * * * *", note = "ready\\nsince boot", a10 = 1, a9 = 2 }
        end""", observed=GADGET, expected="""\
        ---
        # [1/1] status:
        a9: 2
        a10: 1
        bytes: 1e+06
        note: |-
            ready
            since boot
        one: "1"
        ratio: 0.25
        schedule: '*/5 * * * *'
        since: "2024-01-01T00:00:00Z"
        small: 12
        "yes": "yes"
        """),
    Case("components-print-as-karmadactl", "InterpretComponent", "componentResource", """
        function GetComponents(desiredObj)
          return {
            { name = "jobmanager", replicas = 1,
              replicaRequirements = { resourceRequest = { cpu = "0.5", memory = "1024Mi" } } },
            { name = "taskmanager", replicas = desiredObj.spec.size,
              replicaRequirements = { nodeClaim = { tolerations = { { key = "gpu", operator = "Exists" } } },
                                      resourceRequest = { cpu = 2 } } },
          }
        end""", desired=GADGET, expected="""\
        ---
        # [1/1] components:
        - name: jobmanager
          replicaRequirements:
            resourceRequest:
                cpu: 500m
                memory: 1Gi
          replicas: 1
        - name: taskmanager
          replicaRequirements:
            nodeClaim:
                tolerations:
                    - key: gpu
                      operator: Exists
            resourceRequest:
                cpu: "2"
          replicas: 2
        """),
    Case("no-components-is-null", "InterpretComponent", "componentResource", """
        function GetComponents(desiredObj)
          return nil
        end""", desired=GADGET, expected="""\
        ---
        # [1/1] components:
        null
        """),
    Case("replica-is-truncated-to-int32", "InterpretReplica", "replicaResource", """
        function GetReplicas(desiredObj)
          return desiredObj.spec.size * 1.4, nil
        end""", desired=GADGET, expected="""\
        ---
        # [1/2] replica:
        2
        ---
        # [2/2] requires:
        null
        """),
]


def run(tmp_path: Path, case: Case) -> tuple[int, str, str]:
    argv = ["interpret", "-f", str(_write(tmp_path, "ric.yaml", customization(case.hook, case.script))),
            "--operation", case.operation, *case.args]
    for option, text in (("--desired-file", case.desired), ("--observed-file", case.observed),
                         ("--status-file", case.status)):
        if text is not None:
            argv += [option, str(_write(tmp_path, option.strip("-") + ".yaml", textwrap.dedent(text)))]
    args = build_parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = args.fn(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_interpret_answers_as_karmadactl(tmp_path: Path, case: Case) -> None:
    code, out, err = run(tmp_path, case)
    assert code == 0, err
    assert out == textwrap.dedent(case.expected)


def test_a_status_item_of_the_wrong_type_is_refused_with_its_field(tmp_path: Path) -> None:
    case = Case("bad-applied", "AggregateStatus", "statusAggregation",
                "function AggregateStatus(d, s) return d end", desired=GADGET,
                status="clusterName: member1\napplied: maybe\n", expected="")
    code, out, err = run(tmp_path, case)
    assert code == 1 and out == ""
    assert "applied of cluster 'member1' must be true or false, got 'maybe'" in err
