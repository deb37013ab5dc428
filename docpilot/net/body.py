"""Reading an HTTP response body as every asker must: within a bound, or to its end for reuse.

A service decides how much it sends; these read no more of it than the caller can use,
so a body without end costs bounded memory.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

DRAIN_S = 1.0
"""The longest ``drain`` waits for the rest of a body."""


async def read_at_most(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """The body's first ``limit`` bytes at most, and whether that is the whole body.

    Reading stops once more than ``limit`` bytes have arrived; the caller then closes the
    connection, since the rest of the body was never read.
    """
    parts: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        if size + len(piece) > limit:
            parts.append(piece[: limit - size])
            return b"".join(parts), False
        parts.append(piece)
        size += len(piece)
    return b"".join(parts), True


async def drain(response: aiohttp.ClientResponse) -> None:
    """Read what follows a stream's end mark to the end of the body, so the connection can serve the next turn.

    What is read is dropped, and the wait is at most ``DRAIN_S``.
    """
    if response.content.at_eof():
        return
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with asyncio.timeout(DRAIN_S):
            async for _ in response.content.iter_any():
                pass
