"""Fixtures shared by the simulated-member tests."""

from __future__ import annotations

import pytest

from tests.integration.member import MemberThread, kubectl_for
from tests.support.apiserver import Kubectl


@pytest.fixture(scope="module")
def kubectl(member: MemberThread, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """The real kubectl against the test module's own ``member`` fixture (each module starts the member it needs)."""
    return kubectl_for(member, tmp_path_factory.mktemp("home"))


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    """A namespace named after the test (modules may define their own)."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
    return name
