"""Photos, voice and video of a Telegram message, handed to the services as dp-agent's
Telegram channel hands them: each file is fetched from Telegram, uploaded to the file
server (Dream's ``FILE_SERVER_URL``: ``POST`` a multipart ``file``, answered with
``{"downloadLink": ...}``), and its link becomes an attribute of the user's utterance:

* a photo (its largest size): ``image``;
* a voice message, an audio file or a video note: ``sound_path``, ``sound_duration`` and
  ``sound_type`` (``voice_message``, else ``audio_attachment``);
* a video or a video note: ``video_path``, ``video_duration`` and ``video_type``
  (``video_attachment`` or ``video_note``).

The link's scheme and host are the file server's as the bot reaches it (a file server
behind a proxy names itself otherwise), so the services on the same network can read it.
A file that cannot be fetched or uploaded costs only its own attribute: the message is
still answered, with what else it carries, and the user is told which file did not reach
the bot (:meth:`Media.note`). Each file has ``MEDIA_DEADLINE`` seconds, all told, to be
fetched and stored: a per-read timeout alone lets a server sending a byte now and then
hold the message for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.cli.telegram_updates import Message
from agent.sdk.errors import ChorusError

log = logging.getLogger("chorus.telegram")

#: Downloads a file from Telegram by its ``file_id``: its ``file_path`` and content.
Download = Callable[[str], Awaitable[tuple[str, bytes]]]


class MediaError(ChorusError):
    """A file could not be fetched from Telegram or stored on the file server; ``why`` is
    what the user is told (the message is for the log, and may name servers)."""

    def __init__(self, message: str, *, why: str = "it could not be fetched") -> None:
        super().__init__(message)
        self.why = why


class _Uploaded(BaseModel):
    model_config = ConfigDict(extra="ignore")

    download_link: str = Field(alias="downloadLink", min_length=1)


class FileServer:
    """The file server media are uploaded to, as Dream's services read them."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._origin = urlsplit(url)

    async def upload(self, name: str, content: bytes, content_type: str) -> str:
        """The file's link, on the file server's scheme and host."""
        try:
            reply = await self._http.post(
                self._url, files={"file": (name, content, content_type)}, timeout=60.0
            )
            reply.raise_for_status()
            link = _Uploaded.model_validate_json(reply.content).download_link
        except (httpx.HTTPError, ValidationError) as exc:
            raise MediaError(
                f"file server {self._url}: {type(exc).__name__}: {exc}",
                why="it could not be stored",
            ) from None
        parts = urlsplit(link)
        return parts._replace(scheme=self._origin.scheme, netloc=self._origin.netloc).geturl()


@dataclass(slots=True)
class Media:
    """What a message's media give the services, and what did not make it."""

    attributes: dict[str, Any] = field(default_factory=dict)
    #: the files not passed on, each with why, as the user is told: "photo: it took too long"
    lost: list[tuple[str, str]] = field(default_factory=list)

    def note(self) -> str:
        """What the answer says of the files that did not reach the services ('' if none):
        without it, a user whose photo was dropped gets an answer that ignores it."""
        return "\n".join(
            f"(Your {what} did not reach me: {why}. Please send it again.)"
            for what, why in dict.fromkeys(self.lost)  # a video note is its sound and video
        )


async def media_attributes(
    message: Message, download: Download, files: FileServer | None, deadline: float
) -> Media:
    """The utterance attributes for the message's photo, sound and video (none without a
    file server: there is nowhere the services could read them from); each file is
    fetched and stored within ``deadline`` seconds, or is lost."""
    media = Media()
    if files is None or not message.has_media():
        if message.has_media():
            log.warning(
                "message %d: its media are not passed on (CHORUS_TELEGRAM_FILE_SERVER_URL "
                "is not set)",
                message.message_id,
            )
        return media
    attributes = media.attributes

    async def stored(what: str, file_id: str, name: str | None, content_type: str) -> str | None:
        try:
            try:
                async with asyncio.timeout(deadline):
                    path, content = await download(file_id)
                    return await files.upload(name or path, content, content_type)
            except TimeoutError:
                raise MediaError(
                    f"not fetched and stored within {deadline:g}s (MEDIA_DEADLINE)",
                    why="it took too long to arrive",
                ) from None
        except MediaError as exc:
            log.error("message %d: its %s is not passed on: %s", message.message_id, what, exc)
            media.lost.append((what, exc.why))
            return None

    if message.photo:
        largest = message.photo[-1]  # Telegram lists a photo's sizes smallest first
        link = await stored("photo", largest.file_id, f"{uuid4().hex}.jpg", "image/jpg")
        if link is not None:
            attributes["image"] = link
    sound = message.voice or message.audio or message.video_note
    if sound is not None:
        content_type = "video/ogg" if message.video_note is not None else "audio/ogg"
        what = (
            "voice message"
            if sound is message.voice
            else "audio"
            if sound is message.audio
            else "video note"
        )
        link = await stored(what, sound.file_id, None, content_type)
        if link is not None:
            attributes["sound_path"] = link
            attributes["sound_duration"] = sound.duration
            attributes["sound_type"] = (
                "voice_message" if sound is message.voice else "audio_attachment"
            )
    video = message.video_note or message.video
    if video is not None:
        what = "video" if video is message.video else "video note"
        link = await stored(what, video.file_id, None, "video/ogg")
        if link is not None:
            attributes["video_path"] = link
            attributes["video_duration"] = video.duration
            attributes["video_type"] = (
                "video_attachment" if video is message.video else "video_note"
            )
    return media
