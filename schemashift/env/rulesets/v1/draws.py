"""The generator v1 draws its tasks with: `random.Random`'s stream, fewer Python frames per draw.

Building a task makes about a hundred `choice` and `randint` draws, and `random.Random` spends
three Python frames on each (choice -> _randbelow; randint -> randrange -> _randbelow), which made
them a fifth of a fresh v1 episode's reset (and `sample` spends one on every pick). `Draws` does
the same arithmetic in one frame: each method returns what `random.Random`'s returns and takes
the same bits from the same Mersenne Twister, so every seed draws the task it always drew
(tests/env/v1/test_draws.py holds the two equal over random call sequences; the pinned v1
vectors hold the tasks).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class Draws(random.Random):
    def choice(self, seq: Sequence[T]) -> T:
        """`random.Random.choice`: `seq[_randbelow(len(seq))]` by rejection sampling."""
        n = len(seq)
        if not n:
            raise IndexError("Cannot choose from an empty sequence")
        # `self.getrandbits(k)` each time, not a bound method kept in a local: most draws take one
        # try, and a method call made in place builds no bound method.
        k = n.bit_length()
        r = self.getrandbits(k)
        while r >= n:
            r = self.getrandbits(k)
        return seq[r]

    def randint(self, a: int, b: int) -> int:
        """`random.Random.randint` (`a + _randbelow(b - a + 1)`); anything but two ordered ints
        takes the library's own path, with its errors."""
        if type(a) is not int or type(b) is not int or b < a:
            return super().randint(a, b)
        n = b - a + 1
        k = n.bit_length()
        r = self.getrandbits(k)
        while r >= n:
            r = self.getrandbits(k)
        return a + r

    def shuffle(self, x: list[Any]) -> None:
        """`random.Random.shuffle`: a swap with `_randbelow(i + 1)` for each i from the end, in one
        frame instead of two per element."""
        getrandbits = self.getrandbits
        for i in reversed(range(1, len(x))):
            n = i + 1
            k = n.bit_length()
            j = getrandbits(k)
            while j >= n:
                j = getrandbits(k)
            x[i], x[j] = x[j], x[i]

    def sample(self, population: Sequence[T], k: int, *, counts: Sequence[int] | None = None) -> list[T]:
        """`random.Random.sample` for a list or tuple: its two algorithms (a pool, or a set of the
        indices taken), chosen as it chooses them, in one frame; anything else takes the
        library's own path, with its errors."""
        n = len(population)
        if counts is not None or type(population) not in (list, tuple) or not 0 <= k <= n:
            return super().sample(population, k, counts=counts)
        getrandbits = self.getrandbits
        result: list[T] = [None] * k  # type: ignore[list-item]
        setsize = 21  # random.Random.sample's own arithmetic
        if k > 5:
            setsize += 4 ** math.ceil(math.log(k * 3, 4))
        if n <= setsize:
            pool = list(population)
            for i in range(k):
                m = n - i
                bits = m.bit_length()
                j = getrandbits(bits)
                while j >= m:
                    j = getrandbits(bits)
                result[i] = pool[j]
                pool[j] = pool[m - 1]
            return result
        bits = n.bit_length()
        selected: set[int] = set()
        for i in range(k):
            j = getrandbits(bits)
            while j >= n or j in selected:
                j = getrandbits(bits)
            selected.add(j)
            result[i] = population[j]
        return result
