"""KeyedLocks: passes for one key take turns, other keys do not wait, and nothing stays behind."""

from __future__ import annotations

import asyncio

from flotilla.runtime.keyed_locks import KeyedLocks


async def test_passes_for_one_key_take_turns_and_other_keys_do_not_wait() -> None:
    locks = KeyedLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with locks.hold("a"):
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        async with locks.hold("a"):
            order.append("second in")

    async def other() -> None:
        async with locks.hold("b"):
            order.append("other in")

    t1 = asyncio.create_task(first())
    await first_in.wait()
    t2 = asyncio.create_task(second())
    await other()
    await asyncio.sleep(0)
    assert order == ["first in", "other in"]
    release.set()
    await asyncio.gather(t1, t2)
    assert order == ["first in", "other in", "first out", "second in"]
    assert len(locks) == 0


async def test_a_pass_that_fails_or_is_cancelled_leaves_no_lock_behind() -> None:
    locks = KeyedLocks()
    try:
        async with locks.hold("a"):
            raise ValueError("boom")
    except ValueError:
        pass
    held = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("a"):
            held.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(holder())
    await held.wait()
    waiter = asyncio.create_task(locks.hold("a").__aenter__())
    await asyncio.sleep(0)
    waiter.cancel()
    task.cancel()
    await asyncio.gather(task, waiter, return_exceptions=True)
    assert len(locks) == 0
