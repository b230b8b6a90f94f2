"""A sorted set of strings with cheap inserts, removals and ordered range scans.

Keys are kept in a list of sorted chunks (each at most ``2 * CHUNK`` long), so an insert or a
removal moves at most one chunk's worth of pointers instead of the whole key space.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

CHUNK = 512


class SortedKeys:
    """A sorted set of ``str``; ``add`` and ``discard`` are O(log n + CHUNK)."""

    __slots__ = ("_chunks", "_maxes", "_len")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        ordered = sorted(set(keys))
        self._chunks: list[list[str]] = [ordered[i : i + CHUNK] for i in range(0, len(ordered), CHUNK)]
        self._maxes: list[str] = [chunk[-1] for chunk in self._chunks]
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            yield from chunk

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return False
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        return j < len(chunk) and chunk[j] == key

    def add(self, key: str) -> None:
        """Insert ``key`` (no-op if present)."""
        maxes = self._maxes
        if not maxes:
            self._chunks.append([key])
            maxes.append(key)
            self._len = 1
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):
            i -= 1
            chunk = self._chunks[i]
            chunk.append(key)
            maxes[i] = key
        else:
            chunk = self._chunks[i]
            j = bisect_left(chunk, key)
            if j < len(chunk) and chunk[j] == key:
                return
            chunk.insert(j, key)
        self._len += 1
        if len(chunk) > 2 * CHUNK:
            self._chunks[i : i + 1] = [chunk[:CHUNK], chunk[CHUNK:]]
            maxes[i : i + 1] = [chunk[CHUNK - 1], chunk[-1]]

    def discard(self, key: str) -> None:
        """Remove ``key`` if present."""
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return
        chunk = self._chunks[i]
        j = bisect_left(chunk, key)
        if j == len(chunk) or chunk[j] != key:
            return
        del chunk[j]
        self._len -= 1
        if not chunk:
            del self._chunks[i]
            del self._maxes[i]
        elif j == len(chunk):
            self._maxes[i] = chunk[-1]

    def iter_from(self, start: str, *, inclusive: bool = True) -> Iterator[str]:
        """The keys ``>= start`` (``> start`` when not ``inclusive``), in order.

        The set must not be modified while the iterator is in use.
        """
        find = bisect_left if inclusive else bisect_right
        chunks = self._chunks
        i = find(self._maxes, start)
        if i == len(chunks):
            return
        chunk = chunks[i]
        for j in range(find(chunk, start), len(chunk)):
            yield chunk[j]
        for k in range(i + 1, len(chunks)):
            yield from chunks[k]
