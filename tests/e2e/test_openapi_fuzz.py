"""schemathesis against the API server's own ``/openapi/v3`` documents: a real ``flotilla apiserver`` process on
SQLite gets generated requests (valid and invalid) for every operation of every group-version it publishes. No
request may get a 5xx or end the process; afterwards the store must still be consistent, also after a restart.

The run is bounded: ``FLOTILLA_FUZZ_SECONDS`` (default 15) is the fuzzing budget, spent in rounds over every
operation (the first round, one generated case per operation, always runs in full; later rounds run more cases). ``make soak`` runs it with a larger budget:
``FLOTILLA_FUZZ_SECONDS=600 pytest tests/e2e/test_openapi_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.openapi import from_url

from tests.support.apiserver import ServerProcess

NS = "fuzz"
NAMES = ("seeded", "fuzz-obj")
BUDGET = float(os.environ.get("FLOTILLA_FUZZ_SECONDS", "15"))
SEED = int(os.environ.get("FLOTILLA_FUZZ_SEED", "0")) or random.randrange(1 << 30)
TIMEOUT = 10.0


@dataclass
class Finding:
    method: str
    url: str
    status: int | str
    detail: str

    def __str__(self) -> str:
        return f"{self.method} {self.url} -> {self.status}: {self.detail[:4000]}"


def _seed_objects(url: str) -> None:
    """A namespace and a few objects with the names the generated requests aim at, so that reads and writes of
    existing objects are exercised too, not only 404s."""
    s = requests.Session()

    def post(path: str, obj: dict[str, Any]) -> None:
        r = s.post(url + path, json=obj, timeout=TIMEOUT)
        assert r.status_code in (201, 409), (path, r.status_code, r.text)

    post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for name in NAMES:
        post(f"/api/v1/namespaces/{NS}/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
        post(f"/apis/policy.karmada.io/v1alpha1/namespaces/{NS}/propagationpolicies",
             {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}]}})
        post("/apis/policy.karmada.io/v1alpha1/clustertaintpolicies",
             {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": name},
              "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})


def _operations(url: str) -> list[Any]:
    index = requests.get(url + "/openapi/v3", timeout=TIMEOUT).json()
    ops: list[Any] = []
    for gv in sorted(index["paths"]):
        schema = from_url(f"{url}/openapi/v3/{gv}")
        schema.validate()  # a valid OpenAPI 3.0 document, or the test fails here
        for result in schema.get_all_operations():
            ops.append(result.ok())  # so does an operation schemathesis cannot read
    return ops


def _strategy(op: Any) -> Any:
    params = {p.name for p in op.path_parameters}
    fixed = st.fixed_dictionaries({k: st.just(NS) if k == "namespace" else st.sampled_from(NAMES) for k in params})
    aimed = fixed.flatmap(lambda pp: op.as_strategy(path_parameters=pp))
    return st.one_of(aimed, op.as_strategy(), op.as_strategy(generation_mode=GenerationMode.NEGATIVE))


def _send(case: Any, url: str, session: requests.Session) -> requests.Response:
    query = dict(case.query or {})
    if "watch" in query:
        query["timeoutSeconds"] = "1"  # a watch that the fuzzer opens ends by itself
    case.query = query
    return case.call(base_url=url, session=session, timeout=TIMEOUT)


def fuzz(url: str, proc: ServerProcess, budget: float, seed: int) -> tuple[int, int, list[Finding]]:
    """Rounds over every operation until the budget is spent; returns (requests, operations, findings)."""
    ops = _operations(url)
    session = requests.Session()
    findings: list[Finding] = []
    sent = 0
    deadline = time.monotonic() + budget
    rng = random.Random(seed)
    per_op = 1
    while True:
        order = list(ops)
        rng.shuffle(order)
        for op in order:
            if per_op > 1 and time.monotonic() > deadline:  # the first round (each operation once) is always run
                return sent, len(ops), findings

            @hypothesis_seed(rng.randrange(1 << 30))
            @settings(max_examples=per_op, deadline=None, database=None, derandomize=False, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=_strategy(op))
            def one(case: Any) -> None:
                nonlocal sent
                sent += 1
                try:
                    reply = _send(case, url, session)
                except requests.RequestException as e:
                    findings.append(Finding(case.method, case.formatted_path, "no reply",
                                            f"{e!r} query={case.query!r} body={case.body!r}"))
                    return
                if reply.status_code >= 500:
                    findings.append(Finding(case.method, reply.request.url or "", reply.status_code,
                                            f"body={case.body!r} reply={reply.text}"))

            one()
            assert proc.proc is not None
            if proc.proc.poll() is not None:
                findings.append(Finding(op.method.upper(), op.path, "server exited", str(proc.proc.returncode)))
                return sent, len(ops), findings
        per_op = min(per_op * 2, 8)


# ---------------------------------------------------------------------------------------------- consistency


def _listable(url: str) -> list[tuple[str, str, bool]]:
    """(collection path prefix, plural, namespaced) of every served resource that can be listed."""
    out: list[tuple[str, str, bool]] = []
    roots = ["/api/v1"]
    for group in requests.get(url + "/apis", timeout=TIMEOUT).json()["groups"]:
        roots += [f"/apis/{v['groupVersion']}" for v in group["versions"]]
    for root in roots:
        for res in requests.get(url + root, timeout=TIMEOUT).json()["resources"]:
            if "/" not in res["name"] and "list" in res.get("verbs", []):
                out.append((root, res["name"], res["namespaced"]))
    return out


def _item_path(root: str, plural: str, namespaced: bool, obj: dict[str, Any]) -> str:
    md = obj["metadata"]
    if namespaced:
        return f"{root}/namespaces/{md['namespace']}/{plural}/{md['name']}"
    return f"{root}/{plural}/{md['name']}"


Kind = tuple[str, str, bool]  # (collection path prefix, plural, namespaced)


def snapshot(url: str) -> dict[Kind, dict[str, dict[str, Any]]]:
    """Every stored object, by kind and path; every list must answer 200."""
    objects: dict[Kind, dict[str, dict[str, Any]]] = {}
    for root, plural, namespaced in _listable(url):
        reply = requests.get(f"{url}{root}/{plural}", timeout=TIMEOUT)
        assert reply.status_code == 200, (root, plural, reply.status_code, reply.text)
        objects[(root, plural, namespaced)] = {
            _item_path(root, plural, namespaced, item): item for item in reply.json()["items"]}
    return objects


def check_consistent(url: str) -> dict[Kind, dict[str, dict[str, Any]]]:
    """The server answers, every object listed reads back and re-applies unchanged, a watch from revision 0
    replays every object."""
    assert requests.get(url + "/healthz", timeout=TIMEOUT).status_code == 200
    objects = snapshot(url)
    assert any(objects.values()), "the store lists nothing at all"
    session = requests.Session()
    for kind_objects in objects.values():
        for path, listed in kind_objects.items():
            got = session.get(url + path, timeout=TIMEOUT)
            assert got.status_code == 200, (path, got.status_code, got.text)
            read = got.json()
            if read["metadata"]["resourceVersion"] != listed["metadata"]["resourceVersion"]:
                continue  # a controller of the server (e.g. garbage collection) wrote it meanwhile
            assert read == listed, path
            again = session.put(url + path, data=json.dumps(read), headers={"Content-Type": "application/json"},
                                timeout=TIMEOUT)
            assert again.status_code == 200, (path, again.status_code, again.text)
            assert again.json() == read, f"re-applying {path} unchanged changed it"

    def replay(kind: Kind) -> tuple[Kind, int, list[dict[str, Any]]]:
        root, plural, _ = kind
        reply = requests.get(f"{url}{root}/{plural}?watch=1&resourceVersion=0&timeoutSeconds=1", timeout=TIMEOUT)
        # one event a line, split on "\n" only: a fuzzed key may hold \x85 or \u2028, which JSON leaves raw in a
        # string and str.splitlines() would take for line breaks
        return kind, reply.status_code, [json.loads(line) for line in reply.text.split("\n") if line.strip()]

    with ThreadPoolExecutor(16) as pool:  # each watch lasts its timeoutSeconds: run them side by side
        for (root, plural, namespaced), code, events in pool.map(replay, list(objects)):
            assert code == 200, (root, plural, code)
            assert all(e["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") for e in events), events[:3]
            added = {_item_path(root, plural, namespaced, e["object"]) for e in events if e["type"] == "ADDED"}
            missing = set(objects[(root, plural, namespaced)]) - added
            assert not missing, (root, plural, sorted(missing)[:5])
    return objects


def drain(proc: ServerProcess) -> list[str]:
    """The server's output lines, read as they come (a full pipe would block the server)."""
    lines: list[str] = []
    out = proc.proc.stdout if proc.proc is not None else None
    if out is not None:
        threading.Thread(target=lambda: lines.extend(out), daemon=True).start()
    return lines


@pytest.fixture
def process(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data", storage_url="sqlite://", extra=["--insecure"])
    (tmp_path / "data").mkdir()
    proc.start()
    yield proc
    proc.stop()


def test_every_openapi_document_is_valid_openapi_3(process: ServerProcess) -> None:
    """Was not: parameters carried ``uniqueItems`` beside their schema (OpenAPI 3 allows it only inside)."""
    index = requests.get(process.url + "/openapi/v3", timeout=TIMEOUT).json()
    assert "apis/policy.karmada.io/v1alpha1" in index["paths"]
    for gv in sorted(index["paths"]):
        from_url(f"{process.url}/openapi/v3/{gv}").validate()


@pytest.mark.timeout(int(BUDGET) + 240)
def test_schemathesis_finds_no_5xx_and_the_store_stays_consistent(process: ServerProcess) -> None:
    url = process.url
    output = drain(process)
    _seed_objects(url)
    sent, n_ops, findings = fuzz(url, process, BUDGET, SEED)
    print(f"openapi fuzz: seed={SEED} budget={BUDGET:.0f}s operations={n_ops} requests={sent} "
          f"findings={len(findings)}")
    assert not findings, f"seed {SEED}:\n" + "\n".join(map(str, findings[:20]))
    assert sent >= n_ops
    tracebacks = [i for i, line in enumerate(output) if line.startswith("Traceback")]
    assert not tracebacks, "".join(output[tracebacks[0] - 1: tracebacks[0] + 30])  # an error no reply showed
    before = check_consistent(url)
    port = int(url.rsplit(":", 1)[1])
    process.stop()
    process.start(port)
    after = snapshot(process.url)
    assert set(after) == set(before)
    for kind, kind_objects in before.items():
        assert set(after[kind]) == set(kind_objects), kind
        for path, obj in kind_objects.items():
            assert after[kind][path]["metadata"]["uid"] == obj["metadata"]["uid"], path
            if after[kind][path]["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]:
                assert after[kind][path] == obj, path
