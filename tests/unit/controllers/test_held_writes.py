"""HeldWrites: one write per key held back, written oldest first by one task once the turn allows."""

from __future__ import annotations

import asyncio

from flotilla.runtime.held_writes import HeldWrites


def _no_place(turn):  # type: ignore[no-untyped-def]
    async def wrapped() -> bool:
        await turn()
        return False
    return wrapped


async def _drained(held: HeldWrites[int]) -> None:
    """Wait (at most half a second) until nothing is held any more."""
    for _ in range(50):
        if not len(held):
            return
        await asyncio.sleep(0.01)


class _Gate:
    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.turns = 0
        self.done_calls: list[bool] = []

    async def turn(self) -> bool:
        await self.open.wait()
        self.turns += 1
        return True

    def done(self, took: bool) -> None:
        self.done_calls.append(took)


async def test_held_writes_wait_for_the_turn_keep_one_per_key_and_go_oldest_first() -> None:
    gate, written, failed = _Gate(), [], []

    async def write(key: str, item: int) -> None:
        written.append((key, item))

    held: HeldWrites[int] = HeldWrites("t", gate.turn, gate.done, write, failed.append, batch=1)
    held.hold("a", 1)
    held.hold("b", 2)
    held.hold("a", 3)  # replaces a's write and keeps its place
    held.hold("c", 4)
    held.drop("c")  # a pass of c's own writes anew
    await asyncio.sleep(0.01)
    assert written == [] and len(held) == 2 and "a" in held
    gate.open.set()
    await _drained(held)
    assert written == [("a", 3), ("b", 2)]
    assert gate.done_calls == [True, True] and failed == []
    await held.close()


async def test_a_failed_held_write_is_handed_back_and_the_rest_still_go() -> None:
    gate, written, failed = _Gate(), [], []
    gate.open.set()

    async def write(key: str, item: int) -> None:
        if key == "bad":
            raise RuntimeError("conflict")
        written.append(key)

    held: HeldWrites[int] = HeldWrites("t", gate.turn, gate.done, write, failed.append, batch=1)
    held.hold("bad", 1)
    held.hold("good", 2)
    await _drained(held)
    await asyncio.sleep(0.01)
    assert failed == ["bad"] and written == ["good"]
    assert gate.done_calls == [True, True]  # every turn taken is given back
    await held.close()


async def test_closing_forgets_what_is_held() -> None:
    gate, written = _Gate(), []

    async def write(key: str, item: int) -> None:
        written.append(key)

    held: HeldWrites[int] = HeldWrites("t", gate.turn, gate.done, write, lambda key: None)
    held.hold("a", 1)
    await held.close()
    gate.open.set()
    await asyncio.sleep(0.02)
    assert written == [] and len(held) == 0


async def test_one_turn_writes_up_to_a_batch_so_a_long_burst_still_drains() -> None:
    """A turn that is no place beside busy controllers (they are done, or the longest wait is over) writes up to a
    batch; a place beside them (``turn`` True) one write."""
    gate, written = _Gate(), []
    gate.open.set()
    gate.turn = _no_place(gate.turn)  # type: ignore[method-assign]

    async def write(key: str, item: int) -> None:
        written.append(key)

    held: HeldWrites[int] = HeldWrites("t", gate.turn, gate.done, write, lambda key: None, batch=3)
    for i in range(7):
        held.hold(f"k{i}", i)
    await _drained(held)
    assert written == [f"k{i}" for i in range(7)]
    assert gate.turns == 3  # 3 + 3 + 1
    await held.close()

    beside, written[:] = _Gate(), []
    beside.open.set()
    held = HeldWrites("t", beside.turn, beside.done, write, lambda key: None, batch=3)
    for i in range(3):
        held.hold(f"k{i}", i)
    await _drained(held)
    assert written == ["k0", "k1", "k2"] and beside.turns == 3  # one at a time
    await held.close()
