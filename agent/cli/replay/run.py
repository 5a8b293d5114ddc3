"""Running the stored turns through the candidate pipeline, ``concurrency`` at a time.

The candidate's executor is the agent's own (:meth:`LoadedPipeline.executor`): the same
connectors, timeouts and deadline, the real services over HTTP. Only what it returns is
kept; nothing goes to the store, which the replay holds as a
:class:`~agent.store.reader.DialogReader` and so could not write to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack

from agent.cli.replay.compare import TurnDiff, compared, side_of
from agent.cli.replay.labels import stored_label
from agent.cli.replay.turns import StoredTurn
from agent.connectors.http import make_transport
from agent.state.storage_limits import StorageLimits
from agent.turn.base import LoadedPipeline, TurnExecutor


async def replay_one(executor: TurnExecutor, stored: StoredTurn) -> TurnDiff:
    """The stored turn run through ``executor`` and compared with what was stored."""
    result = await executor.run(stored.to_run())
    return compared(
        dialog_id=stored.dialog_id,
        user_id=stored.user_id,
        number=stored.number,
        human=stored.human,
        stored=side_of(stored.human, stored.bot),
        candidate=side_of(result.utterance, result.bot_utterance),
        guessed=stored.guessed,
        rating=stored.bot.rating,
        dialog_rating=stored.dialog_rating,
        label=stored_label(stored.human.attributes),
    )


async def replay(
    pipeline: LoadedPipeline,
    turns: AsyncIterator[StoredTurn],
    on_diff: Callable[[TurnDiff], None],
    *,
    concurrency: int,
    channel_type: str,
    limits: StorageLimits,
) -> None:
    """Each of ``turns`` through ``pipeline``, at most ``concurrency`` at once, each
    comparison handed to ``on_diff`` as it is done. Cancelled, it stops the turns in
    flight (none of which reaches ``on_diff``) and returns nothing more."""
    async with AsyncExitStack() as closing:
        transport = make_transport()
        closing.push_async_callback(transport.aclose)
        executor = await pipeline.executor(
            transport, closing, channel_type=channel_type, limits=limits
        )
        waiting: asyncio.Queue[StoredTurn | None] = asyncio.Queue(maxsize=concurrency * 2)

        async def work() -> None:
            while (stored := await waiting.get()) is not None:
                on_diff(await replay_one(executor, stored))

        async with asyncio.TaskGroup() as group:
            workers = [group.create_task(work()) for _ in range(concurrency)]
            async for stored in turns:
                await waiting.put(stored)
            for _ in workers:
                await waiting.put(None)
