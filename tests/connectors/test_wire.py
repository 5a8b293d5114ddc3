"""The agent's own HTTP/1.1 transport against real sockets: a server on 127.0.0.1 written
with asyncio's streams, so each test sends exactly the bytes a misbehaving service would
(a chunked stream held half-way, a connection closed mid-answer, no answer at all)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from agent.connectors.batching import Batcher
from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceTimeout,
    ServiceUnavailable,
)
from agent.connectors.http import HttpConnector
from agent.connectors.time_limit import time_limit
from agent.connectors.wire import WireTransport
from agent.sdk.models import DialogView
from agent.sdk.streaming import STREAM_MEDIA_TYPE, line
from tests.support.ports import free_port
from tests.support.views import view

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Service:
    """A server on 127.0.0.1 answering each request with ``answer``; it counts the
    connections it was opened."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.bodies: list[bytes] = []
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(h.split(b":", 1)[1])
                    for h in head.split(b"\r\n")
                    if h.lower().startswith(b"content-length:")
                )
                self.bodies.append(await reader.readexactly(length))
                await self.answer(reader, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def service(answer: Answer) -> AsyncIterator[Service]:
    served = Service(answer)
    server = await asyncio.start_server(served.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    served.url = f"http://127.0.0.1:{port}/respond"
    async with server:
        yield served


def json_answer(data: object) -> Answer:
    body = json.dumps(data).encode()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()

    return answer


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@asynccontextmanager
async def transport(max_connections: int = 16) -> AsyncIterator[WireTransport]:
    carrier = WireTransport(max_connections, keepalive=4.0)
    try:
        yield carrier
    finally:
        await carrier.aclose()


def dialog(text: str = "hi") -> DialogView:
    return DialogView.model_validate(view(text))


async def test_calls_are_answered_over_one_kept_connection() -> None:
    hypotheses = [[{"text": "hello", "confidence": 0.9}]]
    async with service(json_answer(hypotheses)) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=5)
        for text in ("one", "two", "three"):
            assert await connector.call([dialog(text)]) == hypotheses
    assert skill.connections == 1
    sent = [json.loads(body)["dialogs"][0]["utterances"][-1]["text"] for body in skill.bodies]
    assert sent == ["one", "two", "three"]


async def test_a_chunked_stream_is_read_as_it_arrives() -> None:
    rest_may_go = asyncio.Event()

    async def stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
            % STREAM_MEDIA_TYPE.encode()
        )
        writer.write(chunk(line("start", {"confidence": 0.5}) + line("token", "Once")))
        await writer.drain()
        await rest_may_go.wait()
        writer.write(chunk(line("token", " upon")))
        writer.write(chunk(line("end", [{"text": "Once upon", "confidence": 0.5}])))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with service(stream) as skill, transport() as carrier:
        connector = HttpConnector("story", skill.url, carrier, timeout=5)
        seen = []
        async for kind, value in connector.stream(dialog("Tell me a story")):
            seen.append((kind, value))
            if kind == "token":
                rest_may_go.set()  # the first token came before the server sent the rest
        assert seen == [
            ("start", {"confidence": 0.5}),
            ("token", "Once"),
            ("token", " upon"),
            ("end", [{"text": "Once upon", "confidence": 0.5}]),
        ]


async def test_a_connection_closed_mid_answer_fails_the_call_and_the_next_call_reconnects() -> None:
    calls = 0

    async def flaky(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[[")
            await writer.drain()
            writer.close()
            return
        await json_answer([[]])(reader, writer)

    async with service(flaky) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=5)
        with pytest.raises(ServiceUnavailable, match=r"connection to .* failed") as failed:
            await connector.call([dialog()])
        assert not failed.value.never_connected
        assert await connector.call([dialog()]) == [[]]
    assert skill.connections == 2


async def test_a_service_that_never_answers_times_out_and_its_connection_is_not_reused() -> None:
    calls = 0

    async def silent_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await reader.read()  # until the agent gives up and closes the connection
            writer.close()
            return
        await json_answer([[]])(reader, writer)

    async with service(silent_once) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=0.2)
        with pytest.raises(ServiceTimeout, match=r"no answer within 0\.2s"):
            await connector.call([dialog()])
        assert await connector.call([dialog()]) == [[]]
    assert skill.connections == 2


async def test_a_batch_sent_for_callers_under_their_time_limits_still_times_out() -> None:
    """A batch's request goes from a task of the batcher's: the callers' time limits end
    the callers, and the request needs its own timer to end too (else its task and its
    connection would wait for the silent service for ever)."""
    answered = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the agent gives up and closes the connection
        answered.set()
        writer.close()

    async with service(silent) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=0.2)
        batcher = Batcher(connector, batch_size=2)

        async def caller() -> None:
            async with time_limit(0.2):
                await batcher.submit(dialog())

        outcomes = await asyncio.gather(caller(), caller(), return_exceptions=True)
        assert all(isinstance(outcome, TimeoutError) for outcome in outcomes)
        await batcher.aclose()  # the batch's own request ended: nothing left waiting
        await answered.wait()  # and its connection was closed
    assert skill.connections == 1


async def test_a_refused_connection_says_the_service_was_never_reached() -> None:
    url = f"http://127.0.0.1:{free_port()}/respond"
    async with transport() as carrier:
        with pytest.raises(ServiceUnavailable, match=re.escape(f"cannot reach {url}")) as failed:
            await HttpConnector("skill", url, carrier, timeout=5).call([dialog()])
    assert failed.value.never_connected


async def test_an_endless_chunked_answer_is_refused_at_the_limit() -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        try:
            while True:
                writer.write(chunk(b" " * 65536))
                await writer.drain()
        except ConnectionError:
            writer.close()

    async with service(endless) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, 5, max_response_bytes=200_000)
        with pytest.raises(BadServiceResponse, match="over the 200000 bytes limit"):
            await connector.call([dialog()])


async def test_an_answer_declaring_more_than_the_limit_is_refused_unread_and_not_reused() -> None:
    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5000000\r\n\r\n[" + b" " * 1000
        )
        await writer.drain()

    async with service(huge) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, 5, max_response_bytes=200_000)
        for _ in range(2):
            with pytest.raises(BadServiceResponse, match="answer of 5000000 bytes is over the"):
                await connector.call([dialog()])
    assert skill.connections == 2  # the half-read answer's connection was not reused


async def test_a_connection_that_answered_a_server_error_is_not_reused() -> None:
    """uvicorn closes a connection after an app that raised past its 500; a call that took
    it from the pool before the close arrived failed as reset though the service was up.
    Here the server keeps it open, so only the pool's own rule opens a second one."""
    hypotheses = [[{"text": "hello", "confidence": 0.9}]]
    ok = json_answer(hypotheses)
    answered = 0

    async def fails_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal answered
        answered += 1
        if answered > 1:
            await ok(reader, writer)
            return
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 21\r\n\r\nInternal Server Error"
        )
        await writer.drain()

    async with service(fails_once) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=5)
        with pytest.raises(BadServiceStatus):
            await connector.call([dialog("one")])
        assert await connector.call([dialog("two")]) == hypotheses
    assert skill.connections == 2


async def test_a_service_saying_its_handler_broke_its_contract_is_a_bad_answer() -> None:
    body = json.dumps({"message": "the handler returned 2 items for 1 dialog"}).encode()

    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
            b"chorus-contract-error: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()

    async with service(broken) as skill, transport() as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=5)
        with pytest.raises(BadServiceResponse, match="returned 2 items for 1 dialog"):
            await connector.call([dialog()])


async def test_an_answer_ended_by_closing_the_connection_is_read_whole() -> None:
    async def old_style(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[{"ok": true}]')
        await writer.drain()
        writer.close()

    async with service(old_style) as annotator, transport() as carrier:
        connector = HttpConnector("annotator", annotator.url, carrier, timeout=5)
        assert await connector.call([dialog()]) == [{"ok": True}]
        assert await connector.call([dialog()]) == [{"ok": True}]
    assert annotator.connections == 2


async def test_the_pool_opens_no_more_connections_than_its_size() -> None:
    async with service(json_answer([[]])) as skill, transport(max_connections=2) as carrier:
        connector = HttpConnector("skill", skill.url, carrier, timeout=5)
        answers = await asyncio.gather(*(connector.call([dialog()]) for _ in range(8)))
    assert answers == [[[]]] * 8
    assert skill.connections == 2
