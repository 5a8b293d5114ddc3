"""Answers with a large language model behind any OpenAI-compatible chat-completions API.

The prompt is a system message in the bot's persona (``bot.attributes["persona"]``, else
``bot.persona``, else a short default) followed by the dialog window as user/assistant
messages. The model's reply is the hypothesis, with the configured confidence.

When the retrieval annotator found passages of the knowledge base for the turn, the system
prompt carries them, numbered, and the model is told to cite them ([1], [2]) and to say it
does not know when they do not cover the question; the numbers its reply writes are
resolved to the passages' sources in the hypothesis' ``citations`` (docs/knowledge.md).

The reply is streamed: the skill asks the endpoint for ``stream: true`` (OpenAI's
``data: {chunk}`` Server-Sent Events, ending ``data: [DONE]``) and yields each piece as it
comes, so an agent that calls the skill for a streamed answer can pass the tokens on to the
user while the model still writes (``LLM_STREAM=false`` asks for whole completions, for
an endpoint that cannot stream; one that answers a whole completion anyway is read too).

Settings come from ``LLM_*`` environment variables (or ``.env``), read once when the app is
built; without ``LLM_BASE_URL`` the skill answers ``[]`` and ``/health`` still answers. Bad
settings never stop the process (``chorus run`` would lose its whole stack to one skill):
the skill logs one line naming the variable, stays healthy, and answers every ``/respond``
with a 503 carrying that line, so the agent records it in each turn's ``errors`` and the
other skills answer as usual.

A failing endpoint is not hidden: a timeout, a non-2xx answer or a body that is not a chat
completion makes ``/respond`` answer 502 with what went wrong, so the agent records the
error and loses only this skill's output for the turn.

One ``httpx.AsyncClient`` serves the skill's whole life, held open by the service's
lifespan: it opens when the server starts (or the agent, when its pipeline calls the skill
in its own process) and closes when it stops, in the event loop that uses it. A client
created lazily on the first request would never be closed and would stay bound to the loop
that first used it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
from fastapi import FastAPI, HTTPException, status
from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.sdk import BotView, DialogView, Service, SkillHypothesis, StreamEnd, StreamStart

logger = logging.getLogger(__name__)

ENV_PREFIX = "LLM_"
DEFAULT_SYSTEM_PROMPT = (
    "You are Chorus, a friendly assistant in a chatbot made of many small skills. "
    "Answer in one to three short sentences."
)
STYLE = "Stay in character and answer in one to three short sentences."
#: How much of a failing endpoint's body goes into the error message.
EXCERPT_CHARS = 200
#: Seconds a stream's body may go on after its ``[DONE]`` before the skill hangs up
#: (:func:`_read_to_end`); an endpoint ends it at once.
DONE_LINGER = 0.2


class SettingsError(ValueError):
    """A setting is wrong; the message names the environment variable."""


class LLMSettings(BaseSettings):
    """The endpoint and how to call it. Unset ``LLM_BASE_URL`` disables the skill."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", env_ignore_empty=True
    )

    base_url: str | None = Field(
        default=None, description="e.g. https://api.openai.com/v1; unset: disabled"
    )
    model: str | None = Field(default=None, min_length=1, description="e.g. gpt-4o-mini")
    api_key: SecretStr | None = Field(default=None, description="sent as a Bearer token")
    timeout: float = Field(default=8.0, gt=0, le=300, description="seconds per request")
    confidence: float = Field(default=0.7, ge=0, le=1, description="of every hypothesis")
    max_tokens: int = Field(default=200, ge=1, le=100_000)
    temperature: float = Field(default=0.7, ge=0, le=2)
    stream: bool = Field(default=True, description="ask the endpoint for stream: true")
    knowledge_min_confidence: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="the least confidence of the turn's best retrieved passage for the "
        "turn's passages to go into the prompt",
    )
    stream_usage: bool = Field(
        default=True,
        description="ask a streaming endpoint for its token usage "
        "(stream_options.include_usage), which the agent counts against the skill's budget",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, e.g. https://api.openai.com/v1")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _model_named(self) -> LLMSettings:
        if self.base_url and not self.model:
            raise ValueError(
                f"{ENV_PREFIX}MODEL is required when {ENV_PREFIX}BASE_URL is set: the model's "
                "name on that server, e.g. llama3.2 (Ollama) or the one vLLM or llama.cpp's "
                "server was started with"
            )
        return self

    @property
    def enabled(self) -> bool:
        return self.base_url is not None

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"


def load_settings() -> LLMSettings:
    """Read the settings, or fail with the bad variable's name in the message."""
    try:
        return LLMSettings()
    except ValidationError as exc:
        problems = "; ".join(
            (f"{ENV_PREFIX}{str(e['loc'][0]).upper()}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        raise SettingsError(f"bad settings: {problems}") from None


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class _ReplyMessage(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _ReplyMessage


class Usage(BaseModel):
    """OpenAI's ``usage``: the tokens a completion cost."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)


class ChatCompletion(BaseModel):
    """The part of OpenAI's chat-completion answer the skill reads."""

    choices: list[_Choice] = Field(min_length=1)
    usage: Usage | None = None


class _Delta(BaseModel):
    content: str | None = None


class _ChunkChoice(BaseModel):
    delta: _Delta = Field(default_factory=_Delta)


class ChatCompletionChunk(BaseModel):
    """The part of a streamed chunk (``chat.completion.chunk``) the skill reads; the last
    chunks may have no choices (usage only)."""

    choices: list[_ChunkChoice] = Field(default_factory=list)
    usage: Usage | None = None


class PersonaFacts(BaseModel):
    """What a persona (the smalltalk skill's format, or any subset) says about the bot."""

    name: str | None = None
    description: str | None = None
    lives: str | None = None
    likes: list[str] = Field(default_factory=list)
    hobbies: list[str] = Field(default_factory=list)
    favourites: dict[str, str] = Field(default_factory=dict)


class LLMError(Exception):
    """The endpoint failed: timed out, unreachable, non-2xx, or not a chat completion."""


def persona_of(bot: BotView) -> Mapping[str, Any]:
    stored = bot.attributes.get("persona")
    return stored if isinstance(stored, Mapping) and stored else bot.persona


def persona_prompt(persona: Mapping[str, Any]) -> str | None:
    """The persona as sentences, or None when it says nothing usable."""
    try:
        facts = PersonaFacts.model_validate(persona)
    except ValidationError:
        logger.warning("persona ignored: it does not fit the persona format")
        return None
    who = ", ".join(part for part in (facts.name, facts.description) if part)
    sentences = [f"You are {who}."] if who else []
    if facts.lives:
        sentences.append(f"You live {facts.lives}.")
    if facts.likes:
        sentences.append(f"You like {', '.join(facts.likes)}.")
    if facts.hobbies:
        sentences.append(f"Your hobbies: {', '.join(facts.hobbies)}.")
    if facts.favourites:
        favourites = "; ".join(f"{thing}: {value}" for thing, value in facts.favourites.items())
        sentences.append(f"Your favourite things: {favourites}.")
    return " ".join(sentences) if sentences else None


def system_prompt(dialog: DialogView) -> str:
    """The persona's prompt (or the default), and the user's name when a skill learnt it."""
    persona = persona_prompt(persona_of(dialog.bot))
    prompt = f"{persona} {STYLE}" if persona else DEFAULT_SYSTEM_PROMPT
    name = dialog.human.attributes.get("name")
    return f"{prompt} The user's name is {name}." if isinstance(name, str) and name else prompt


def conversation(dialog: DialogView, passages: list[Passage] | None = None) -> list[ChatMessage]:
    """System prompt, then the window's non-empty utterances in order, as strict chat
    templates (Llama's, Mistral's, Gemma's) take them: the first turn is the user's and the
    roles alternate.

    The window is the newest utterances, so once it slides it can begin with the bot's line
    (a window of 6 is bot, human, bot, human, bot, human): that line is left out, since such
    templates refuse the whole request. Two lines of one speaker in a row (the bot's empty
    answer between them is skipped) become one message.
    """
    turns: list[ChatMessage] = []
    for utterance in dialog.utterances:
        if not utterance.text.strip():
            continue
        role: Literal["user", "assistant"] = "user" if utterance.speaker == "human" else "assistant"
        if not turns and role == "assistant":
            continue
        if turns and turns[-1].role == role:
            turns[-1] = ChatMessage(role=role, content=f"{turns[-1].content}\n{utterance.text}")
        else:
            turns.append(ChatMessage(role=role, content=utterance.text))
    prompt = system_prompt(dialog)
    if passages:
        prompt = f"{prompt}\n\n{knowledge_prompt(passages)}"
    return [ChatMessage(role="system", content=prompt), *turns]


#: What the model is told about the passages it is given (docs/knowledge.md).
KNOWLEDGE_PROMPT = (
    "Passages of the documentation that may answer the user's last message follow. If the "
    "message asks about what they cover, answer from them only and cite each passage you "
    "use by its number in square brackets, like [1] or [2]. If the message asks about the "
    "documentation and the passages do not cover it, say that you do not know; never "
    "invent an answer."
)
_CITATION = re.compile(r"\[(\d{1,2})\]")


class Passage(BaseModel):
    """The part of a retrieved passage (the retrieval annotator's
    ``annotations["retrieval"]["passages"]``) the prompt and citations use."""

    source: str
    section: str = ""
    headings: list[str] = Field(default_factory=list)
    link: str
    text: str
    confidence: float = Field(ge=0, le=1)


class _Retrieved(BaseModel):
    passages: list[Passage] = Field(default_factory=list)


def passages_of(dialog: DialogView, floor: float) -> list[Passage]:
    """The retrieved passages the prompt carries (:func:`given`), best first: none when the
    turn is not about the knowledge base (small talk keeps its usual prompt)."""
    found = dialog.human_utterance.annotations.get("retrieval")
    try:
        retrieved = _Retrieved.model_validate(found) if isinstance(found, dict) else None
    except ValidationError:
        return []
    if not retrieved:
        return []
    sure = [p.confidence for p in retrieved.passages]
    return [retrieved.passages[at] for at in given(sure, floor)]


def given(confidences: Sequence[float], floor: float) -> list[int]:
    """The places of the passages the prompt carries, of a turn's passages with these
    ``confidences`` (best first, as the retrieval annotator returns them): every one when
    the best is at least ``floor`` sure, else none. A passage with no confidence (one
    quoting the question as an example, :func:`shared.knowledge.retrieval.quotes`) is
    never given, and the best is the first of the others.

    The floor judges the turn, not each passage: a passage's confidence weighs its lead
    over another file's best, so the passages after the first, from the neighbouring
    pages a stranger's question is often about, sit under it by construction. A floor on
    each passage left a right file out for 5 of the tuning sets' 245 answerable questions
    and 4 of the checking sets' 194 that the turn's six passages held, while a floor on the
    best one gives them all and fewer unanswerable questions passages (bench/knowledge.py,
    docs/performance.md "Knowledge base")."""
    kept = [at for at, sure in enumerate(confidences) if sure > 0]
    return kept if kept and confidences[kept[0]] >= floor else []


def knowledge_prompt(passages: list[Passage]) -> str:
    """The passages, numbered as the model is to cite them."""
    numbered = "\n\n".join(
        f"[{n}] {p.source}, {' > '.join(p.headings) or p.section}:\n{p.text}"
        for n, p in enumerate(passages, start=1)
    )
    return f"{KNOWLEDGE_PROMPT}\n\n{numbered}"


def citations(text: str, passages: list[Passage]) -> list[dict[str, Any]]:
    """The passages the reply cites ([1], [2]), in order of first citation, resolved to
    their sources; a number the prompt did not give is ignored."""
    cited: list[dict[str, Any]] = []
    seen: set[int] = set()
    for match in _CITATION.finditer(text):
        number = int(match.group(1))
        if 1 <= number <= len(passages) and number not in seen:
            seen.add(number)
            passage = passages[number - 1]
            cited.append(
                {
                    "n": number,
                    "source": passage.source,
                    "section": passage.section,
                    "headings": passage.headings,
                    "link": passage.link,
                }
            )
    return cited


def _copy_usage(reported: Usage, into: Usage) -> None:
    into.prompt_tokens = reported.prompt_tokens
    into.completion_tokens = reported.completion_tokens
    into.total_tokens = reported.total_tokens or reported.prompt_tokens + reported.completion_tokens


async def _read_to_end(lines: AsyncIterator[str]) -> None:
    """What follows a stream's ``[DONE]`` read (its body's last, empty chunk), so that the
    client's pool keeps the connection for the next request: httpx closes a connection
    whose response is closed before its end, and then every request opened a new one (a
    connect, and an accept by the endpoint's server, before its request was written). An
    endpoint that keeps its body open past ``[DONE]`` is hung up on after
    :data:`DONE_LINGER` seconds, as before."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DONE_LINGER):
            async for _ in lines:
                pass


def _excerpt(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


class ChatModel:
    """The endpoint, through one ``httpx.AsyncClient`` that is open while :meth:`open` is."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._http: httpx.AsyncClient | None = None
        # parsed once: httpx parses a URL given as text on every request, checking it
        # character by character, which was the largest part of the skill's CPU before
        # its request left (docs/performance.md, "The services in the agent's process")
        self._endpoint = httpx.URL(settings.endpoint)

    def _body(self, messages: list[ChatMessage], max_tokens: int | None) -> dict[str, Any]:
        """The request; ``max_tokens``: the agent's budget for the call, when below ours."""
        limit = self.settings.max_tokens if max_tokens is None else max_tokens
        return {
            "model": self.settings.model,
            "max_tokens": min(self.settings.max_tokens, limit),
            "temperature": self.settings.temperature,
            "messages": [m.model_dump() for m in messages],
        }

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        key = self.settings.api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        async with httpx.AsyncClient(timeout=self.settings.timeout, headers=headers) as http:
            self._http = http
            try:
                yield
            finally:
                self._http = None

    async def complete(
        self, messages: list[ChatMessage], max_tokens: int | None = None, usage: Usage | None = None
    ) -> str | None:
        """The model's reply (None when it is empty); :class:`LLMError` when the call fails.
        ``usage`` is filled with what the endpoint reports."""
        completion = self._parse(await self._post(self._body(messages, max_tokens)))
        if usage is not None and completion.usage is not None:
            _copy_usage(completion.usage, usage)
        content = completion.choices[0].message.content
        return content.strip() if content and content.strip() else None

    async def stream(
        self, messages: list[ChatMessage], max_tokens: int | None = None, usage: Usage | None = None
    ) -> AsyncIterator[str]:
        """The model's reply in pieces as the endpoint sends them (leading whitespace
        dropped); :class:`LLMError` when the call fails, before or during the reply.
        ``usage`` is filled with the tokens the endpoint reports (its last chunk's
        ``usage``), ``max_tokens`` caps the reply below ``LLM_MAX_TOKENS``.

        ``LLM_TIMEOUT`` bounds each read and the whole reply, checked as pieces arrive: an
        ``asyncio.timeout`` cannot span the yields, which the SDK may resume in another
        task."""
        if not self.settings.stream:
            whole = await self.complete(messages, max_tokens, usage)
            if whole:
                yield whole
            return
        if self._http is None:
            raise RuntimeError("the LLM client is not open: run the app with its lifespan")
        body = {**self._body(messages, max_tokens), "stream": True}
        if self.settings.stream_usage:
            body["stream_options"] = {"include_usage": True}
        timeout = self.settings.timeout
        deadline = time.monotonic() + timeout
        started = False
        try:
            async with self._http.stream("POST", self._endpoint, json=body) as response:
                if not response.is_success:
                    await response.aread()
                    raise LLMError(f"answered HTTP {response.status_code}: {_excerpt(response)}")
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    await response.aread()  # a whole completion: the endpoint does not stream
                    completion = self._parse(response)
                    if usage is not None and completion.usage is not None:
                        _copy_usage(completion.usage, usage)
                    content = completion.choices[0].message.content
                    if content and content.strip():
                        yield content.strip()
                    return
                lines = response.aiter_lines()
                async for event_line in lines:
                    if time.monotonic() > deadline:
                        raise LLMError(f"reply not complete within {timeout:g}s (LLM_TIMEOUT)")
                    data = event_line.removeprefix("data:").strip()
                    if not event_line.startswith("data:") or not data:
                        continue
                    if data == "[DONE]":
                        await _read_to_end(lines)
                        return
                    piece = self._piece(data, usage)
                    if not started:
                        piece = piece.lstrip()
                    if piece:
                        started = True
                        yield piece
        except httpx.TimeoutException:
            raise LLMError(f"no answer within {timeout:g}s (LLM_TIMEOUT)") from None
        except httpx.HTTPError as exc:
            raise LLMError(f"unreachable: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _piece(data: str, usage: Usage | None = None) -> str:
        try:
            chunk = ChatCompletionChunk.model_validate_json(data)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            excerpt = data[:EXCERPT_CHARS] + ("…" if len(data) > EXCERPT_CHARS else "")
            raise LLMError(
                f"streamed something that is not a chunk ({problem}): {excerpt}"
            ) from None
        if usage is not None and chunk.usage is not None:
            _copy_usage(chunk.usage, usage)
        return "".join(c.delta.content or "" for c in chunk.choices[:1])

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        if self._http is None:
            raise RuntimeError("the LLM client is not open: run the app with its lifespan")
        timeout = self.settings.timeout
        try:
            # httpx's timeout bounds each phase; this one bounds the whole exchange.
            async with asyncio.timeout(timeout):
                response = await self._http.post(self._endpoint, json=body)
        except (TimeoutError, httpx.TimeoutException):
            raise LLMError(f"no answer within {timeout:g}s (LLM_TIMEOUT)") from None
        except httpx.HTTPError as exc:
            raise LLMError(f"unreachable: {type(exc).__name__}: {exc}") from None
        if not response.is_success:
            raise LLMError(f"answered HTTP {response.status_code}: {_excerpt(response)}")
        return response

    @staticmethod
    def _parse(response: httpx.Response) -> ChatCompletion:
        try:
            return ChatCompletion.model_validate_json(response.content)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise LLMError(
                f"answered something that is not a chat completion ({problem}): "
                f"{_excerpt(response)}"
            ) from None


def create_service(settings: LLMSettings | None = None) -> Service:
    """The skill for ``settings`` (default: from the environment)."""
    settings = settings or load_settings()
    model = ChatModel(settings) if settings.enabled else None
    service = Service(
        "llm", description="Answers with an OpenAI-compatible chat model.", never_changes_view=True
    )

    @service.skill
    async def llm(dialog: DialogView) -> AsyncIterator[StreamStart | str | StreamEnd]:
        passages = passages_of(dialog, settings.knowledge_min_confidence)
        messages = conversation(dialog, passages)
        if model is None or messages[-1].role != "user":  # nothing of the user's to answer
            return
        usage = Usage()
        written: list[str] = []
        pieces = model.stream(messages, dialog.max_tokens, usage)
        try:
            # The first piece before the start: a failing endpoint is the request's 502,
            # and an empty reply is no hypothesis.
            first = await anext(pieces, None)
            if first is None:
                return
            yield StreamStart(confidence=settings.confidence, llm_model=str(settings.model))
            yield first
            written.append(first)
            async for piece in pieces:
                written.append(piece)
                yield piece
            # Known once the reply is written: the tokens, which the agent counts against
            # the budget, and the passages the reply cites, which go into its attributes.
            end: dict[str, Any] = {}
            if usage.total_tokens:
                end["usage"] = usage.model_dump()
            cited = citations("".join(written), passages)
            if cited:
                end["citations"] = cited
            if end:
                yield StreamEnd(**end)
        except LLMError as exc:
            logger.warning(
                "dialog %s: LLM endpoint %s %s", dialog.dialog_id, settings.endpoint, exc
            )
            raise HTTPException(status.HTTP_502_BAD_GATEWAY, detail=f"LLM endpoint {exc}") from None

    if model is not None:
        service.lifespan(model.open)
    return service


def create_app(settings: LLMSettings | None = None) -> FastAPI:
    """The skill's app for ``settings`` (default: from the environment)."""
    return create_service(settings).app


def misconfigured_service(problem: str) -> Service:
    """A healthy skill that refuses every turn with ``problem`` (503): the agent records it
    as this skill's error and the rest of the pipeline answers."""
    service = Service(
        "llm", description="Answers with an OpenAI-compatible chat model.", never_changes_view=True
    )

    @service.skill
    async def llm(dialog: DialogView) -> list[SkillHypothesis]:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, detail=f"LLM skill is misconfigured: {problem}"
        )

    return service


def service_from_environment() -> Service:
    """The skill for the environment's settings; bad settings give
    :func:`misconfigured_service` and one log line naming the variable, never a traceback
    that stops the process."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        logger.error("llm skill is misconfigured, every turn records it as an error: %s", exc)
        return misconfigured_service(str(exc))
    return create_service(settings)


def app_from_environment() -> FastAPI:
    """The app for the environment's settings (:func:`service_from_environment`)."""
    return service_from_environment().app


def __getattr__(name: str) -> Any:
    """``app``, built when first asked for (uvicorn's ``skills.llm.app:app``): importing
    the module, as the agent does to call the skill in its own process
    (``skills.llm.app:service_from_environment``), reads no setting and logs nothing."""
    if name == "app":
        app = app_from_environment()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
