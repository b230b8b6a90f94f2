from __future__ import annotations

from flotilla.apiserver.controllers.compactor import Compactor
from flotilla.storage import CompactedError
from flotilla.storage.memory import MemoryStore


async def test_compactor_drops_history_up_to_the_previous_tick() -> None:
    store = MemoryStore()
    try:
        first = await store.create("/registry/configmaps/default/a", b"{}")
        await store.update("/registry/configmaps/default/a", b'{"x":1}', first)
        compactor = Compactor(store, interval=0)
        assert await compactor.compact_to(first)
        assert await store.compacted_revision() == first
        assert not await compactor.compact_to(first)  # already done: no error, nothing happens
        try:
            await store.watch("/registry/", first - 1)
        except CompactedError:
            pass
        else:
            raise AssertionError("a watch from before the compaction must fail")
        kv = await store.get("/registry/configmaps/default/a")
        assert kv is not None and kv.value == b'{"x":1}'
    finally:
        await store.close()
