"""The queue keys of the controllers that handle both kinds of binding: made and read back by runtime.base."""

from __future__ import annotations

import pytest

from flotilla.api.resources import CLUSTER_RESOURCE_BINDINGS, RESOURCE_BINDINGS
from flotilla.runtime.base import binding_key, split_binding_key


def test_a_binding_key_reads_back_as_its_kind_and_cache_key() -> None:
    rb = {"metadata": {"namespace": "ns", "name": "web"}}
    crb = {"metadata": {"name": "all"}}
    assert split_binding_key(binding_key(rb, False) or "") == (RESOURCE_BINDINGS, "ns/web")
    assert split_binding_key(binding_key(crb, True) or "") == (CLUSTER_RESOURCE_BINDINGS, "all")
    assert binding_key({"metadata": {}}, False) is None


@pytest.mark.parametrize("key", ["", "rb|web", "crb|a|b", "rb|ns|a|b", "work|ns|a"])
def test_any_other_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="malformed key"):
        split_binding_key(key)
