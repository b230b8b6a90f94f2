"""A CRD's OpenAPI ``pattern`` through the real kubectl: enforced on custom resources with kube-apiserver's error,
and a pattern Go cannot compile refusing the CRD itself."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.apiserver import Kubectl, ServerThread

pytestmark = pytest.mark.kubectl

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pets.zoo.flotilla.test
spec:
  group: zoo.flotilla.test
  scope: Namespaced
  names: {plural: pets, singular: pet, kind: Pet}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                feedEvery: {type: string, pattern: '^[0-9]+(s|m|h)$'}
                toys:
                  type: array
                  items:
                    type: object
                    properties:
                      name: {type: string, pattern: '^[a-z][a-z-]*$'}
            status:
              type: object
              properties:
                mood: {type: string, pattern: '^(happy|hungry)$'}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(tmp_path_factory.mktemp("crd-pattern")).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def kubectl(server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = Kubectl(server.kubeconfig, tmp_path_factory.mktemp("home"))
    k.run("apply", "-f", "-", input=CRD)
    deadline = time.monotonic() + 30
    while k.run("get", "pets", check=False).returncode != 0:  # served once the CRD is registered
        assert time.monotonic() < deadline, "CRD not served"
        time.sleep(0.1)
    return k


def apply(kubectl: Kubectl, manifest: str) -> subprocess.CompletedProcess[str]:
    return kubectl.run("apply", "-f", "-", input=textwrap.dedent(manifest), check=False)


def pet(name: str, spec: str) -> str:
    return f"""
    apiVersion: zoo.flotilla.test/v1
    kind: Pet
    metadata: {{name: {name}, namespace: default}}
    spec:
{textwrap.indent(textwrap.dedent(spec), "      ")}
    """


def test_valid_custom_resource_is_stored(kubectl: Kubectl) -> None:
    done = apply(kubectl, pet("rex", "feedEvery: 15m\ntoys: [{name: ball}]"))
    assert done.returncode == 0, done.stderr
    got = json.loads(kubectl.run("get", "pet", "rex", "-o", "json").stdout)
    assert got["spec"] == {"feedEvery": "15m", "toys": [{"name": "ball"}]}


def test_pattern_violation_gets_kube_apiserver_error(kubectl: Kubectl) -> None:
    done = apply(kubectl, pet("whenever", "feedEvery: whenever\ntoys: [{name: ok}, {name: Spiky Ball}]"))
    assert done.returncode != 0
    assert ('The Pet "whenever" is invalid: \n'
            """* spec.feedEvery: Invalid value: "whenever": spec.feedEvery in body should match '^[0-9]+(s|m|h)$'\n"""
            """* spec.toys[1].name: Invalid value: "Spiky Ball": spec.toys[1].name in body should match """
            "'^[a-z][a-z-]*$'") in done.stderr, done.stderr
    assert kubectl.run("get", "pet", "whenever", check=False).returncode != 0


def test_pattern_is_a_search_and_dollar_is_end_of_text(kubectl: Kubectl) -> None:
    done = apply(kubectl, pet("newline", 'feedEvery: "15m\\n"'))
    assert done.returncode != 0
    assert """spec.feedEvery: Invalid value: "15m\\n": spec.feedEvery in body should match""" in done.stderr


def test_status_pattern_is_enforced_on_the_status_subresource(server: ServerThread, kubectl: Kubectl) -> None:
    assert apply(kubectl, pet("moody", "feedEvery: 1h")).returncode == 0
    done = kubectl.run("patch", "pet", "moody", "--subresource=status", "--type=merge",
                       "-p", '{"status": {"mood": "grumpy"}}', check=False)
    assert done.returncode != 0
    assert """status.mood: Invalid value: "grumpy": status.mood in body should match '^(happy|hungry)$'""" in done.stderr
    kubectl.run("patch", "pet", "moody", "--subresource=status", "--type=merge", "-p", '{"status": {"mood": "happy"}}')


def test_crd_with_a_pattern_go_rejects_is_refused_with_422(server: ServerThread, kubectl: Kubectl) -> None:
    bad = CRD.replace("pets.zoo", "birds.zoo").replace("plural: pets, singular: pet, kind: Pet",
                                                       "plural: birds, singular: bird, kind: Bird")
    bad = bad.replace("'^[0-9]+(s|m|h)$'", "'^(?!never)[a-z]+$'")
    done = kubectl.run("apply", "-f", "-", input=bad, check=False)
    assert done.returncode != 0
    assert ("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[feedEvery].pattern: Invalid value: "
            '"^(?!never)[a-z]+$": must be a valid regular expression, but isn\'t: error parsing regexp: invalid or '
            "unsupported Perl syntax: `(?!`") in done.stderr, done.stderr
    req = urllib.request.Request(
        f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", method="POST",
        data=json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": "birds.zoo.flotilla.test"},
                         "spec": {"group": "zoo.flotilla.test", "scope": "Namespaced",
                                  "names": {"plural": "birds", "kind": "Bird"},
                                  "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                                      "openAPIV3Schema": {"type": "object", "properties": {
                                          "spec": {"type": "string", "pattern": "a++"}}}}}]}}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    status = json.loads(e.value.read())
    assert e.value.code == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "a++": must be a valid regular expression, but isn\'t: error parsing regexp: '
                   "invalid nested repetition operator: `++`",
        "field": "spec.versions[0].schema.openAPIV3Schema.properties[spec].pattern"}]


def test_cr_violation_is_a_422_status_with_causes(server: ServerThread, kubectl: Kubectl) -> None:
    req = urllib.request.Request(
        f"{server.url}/apis/zoo.flotilla.test/v1/namespaces/default/pets", method="POST",
        data=json.dumps({"apiVersion": "zoo.flotilla.test/v1", "kind": "Pet", "metadata": {"name": "x"},
                         "spec": {"feedEvery": "daily"}}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    status = json.loads(e.value.read())
    assert e.value.code == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid",
        "message": """Invalid value: "daily": spec.feedEvery in body should match '^[0-9]+(s|m|h)$'""",
        "field": "spec.feedEvery"}]
