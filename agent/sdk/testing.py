"""Test a service without the agent, a socket or this repository's test helpers.

    from agent.sdk.testing import ServiceClient, view

    def test_greets() -> None:
        with ServiceClient(service) as client:
            (hypotheses,) = client.respond(view("Hello!"))
        assert hypotheses[0]["text"] == "Hi!"

:func:`view` builds a dialog view as the agent sends it (JSON, not a model, so a test sees
exactly the wire format). :class:`ServiceClient` calls the service's app in-process over
httpx's ASGI transport, as Starlette's ``TestClient`` does: the request goes through the
same routing, validation and error handling as over HTTP (the app's lifespan runs too),
but nothing listens on a port, so a test starts in milliseconds and cannot collide with
another's port. A test that needs a real socket (the agent calling the service) still
starts a server.

It imports httpx (the ``chorus-sdk`` wheel's ``testing`` extra: ``pip install
'chorus-sdk[testing]'``) and anyio (Starlette's); the rest of the SDK does not import this
module, so a service's image needs neither.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, AsyncExitStack
from types import TracebackType
from typing import Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI

from agent.sdk.service import Service

JsonDict = dict[str, Any]

__all__ = ["ServiceClient", "hypothesis", "view"]


def view(
    *texts: str,
    human_attributes: JsonDict | None = None,
    bot_attributes: JsonDict | None = None,
    hypotheses: list[JsonDict] | None = None,
    annotations: JsonDict | None = None,
    dialog_id: str = "d1",
) -> JsonDict:
    """A dialog view of alternating human and bot utterances ending with the human's
    ``texts[-1]``; ``hypotheses`` and ``annotations`` go on that last human utterance."""
    if not texts:
        raise ValueError("a view needs at least one text: the human's message")
    speakers = ["human" if (len(texts) - i) % 2 else "bot" for i in range(len(texts))]
    utterances: list[JsonDict] = [
        {
            "speaker": s,
            "utt_id": f"u{i}",
            "text": t,
            "annotations": {},
            "attributes": {},
            "hypotheses": [],
            "active_skill": "x" if s == "bot" else None,
        }
        for i, (s, t) in enumerate(zip(speakers, texts, strict=True))
    ]
    if hypotheses:
        utterances[-1]["hypotheses"] = hypotheses
    if annotations:
        utterances[-1]["annotations"] = annotations
    return {
        "dialog_id": dialog_id,
        "utterances": utterances,
        "human": {"id": "h1", "attributes": human_attributes or {}, "profile": {}},
        "bot": {"id": "b1", "attributes": bot_attributes or {}, "persona": {}},
    }


def hypothesis(
    text: str, skill_name: str = "x", confidence: float = 0.5, **annotations: Any
) -> JsonDict:
    """A skill's hypothesis as candidate annotators and response selectors receive it."""
    return {
        "skill_name": skill_name,
        "text": text,
        "confidence": confidence,
        "annotations": annotations,
    }


class ServiceClient(AbstractContextManager["ServiceClient"]):
    """A synchronous client calling a service's app in-process; use it in a ``with``.

    ``raise_server_exceptions`` (on by default, as in Starlette's TestClient) lets an
    unexpected exception in the handler fail the test with its own traceback instead of a
    500; set it off to see the 500 a real client would get.
    """

    def __init__(self, app: Service | FastAPI, *, raise_server_exceptions: bool = True) -> None:
        self.app = app.app if isinstance(app, Service) else app
        self._raise = raise_server_exceptions
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._stack: AsyncExitStack | None = None
        self._client: httpx.AsyncClient | None = None

    def __enter__(self) -> ServiceClient:
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._portal.call(self._open)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        return self

    async def _open(self) -> None:
        self._stack = AsyncExitStack()
        await self._stack.enter_async_context(self.app.router.lifespan_context(self.app))
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=self._raise)
        self._client = await self._stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://service")
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._portal is not None and self._stack is not None:
            self._portal.call(self._stack.aclose)
        if self._portal_cm is not None:
            self._portal_cm.__exit__(exc_type, exc, tb)
        self._portal = self._portal_cm = self._stack = self._client = None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Any request, as ``httpx.Client.request`` takes it."""
        if self._portal is None or self._client is None:
            raise RuntimeError("use ServiceClient in a with block: with ServiceClient(app) as c")
        client = self._client

        async def send() -> httpx.Response:
            return await client.request(method, path, **kwargs)

        return self._portal.call(send)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def respond(self, *dialogs: JsonDict) -> list[Any]:
        """``POST /respond`` with a batch of dialog views; the answer, one item per dialog.
        A status other than 200 fails with the service's body in the message."""
        response = self.post("/respond", json={"dialogs": list(dialogs)})
        if response.status_code != 200:
            raise AssertionError(f"POST /respond answered {response.status_code}: {response.text}")
        answer: list[Any] = response.json()
        return answer

    def health(self) -> JsonDict:
        """``GET /health``: the service's name and role."""
        body: JsonDict = self.get("/health").json()
        return body
