"""The model stage's deadline: one timer for the stage, that cuts a wait and never the work between waits."""

from __future__ import annotations

import asyncio

import pytest

from docpilot.server.turn import _Deadline


async def _now(value: int) -> int:
    return value


def test_a_wait_past_the_deadline_raises_timeout_error():
    async def run() -> None:
        deadline = _Deadline(0.05)
        assert await deadline.wait(_now(1)) == 1
        with pytest.raises(TimeoutError):
            await deadline.wait(asyncio.sleep(10))
        with pytest.raises(TimeoutError):  # and every wait after it, at once
            await deadline.wait(_now(2))
        deadline.close()

    asyncio.run(run())


def test_work_between_waits_is_never_cut_by_the_deadline():
    async def run() -> None:
        deadline = _Deadline(0.05)
        await deadline.wait(_now(1))
        await asyncio.sleep(0.15)  # the consumer's own work, past the deadline: not cancelled
        with pytest.raises(TimeoutError):
            await deadline.wait(_now(2))
        deadline.close()

    asyncio.run(run())


def test_a_cancelled_consumer_is_cancelled_not_timed_out():
    async def run() -> None:
        deadline = _Deadline(10)
        task = asyncio.create_task(deadline.wait(asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline.close()

    asyncio.run(run())


# Regression: asyncio.timeout around each piece armed and cancelled a timer per piece, 64
# for an extractive answer's words, about 0.2 ms of CPU a served question.
def test_a_stage_of_many_pieces_arms_one_timer():
    async def run() -> int:
        loop = asyncio.get_running_loop()
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        deadline = _Deadline(10)
        for piece in range(200):
            await deadline.wait(_now(piece))
        armed = len(loop._scheduled) - before  # type: ignore[attr-defined]
        deadline.close()
        return armed

    assert asyncio.run(run()) == 1
