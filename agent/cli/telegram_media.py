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
still answered, with what else it carries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
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
    """A file could not be fetched from Telegram or stored on the file server."""


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
            raise MediaError(f"file server {self._url}: {type(exc).__name__}: {exc}") from None
        parts = urlsplit(link)
        return parts._replace(scheme=self._origin.scheme, netloc=self._origin.netloc).geturl()


async def media_attributes(
    message: Message, download: Download, files: FileServer | None
) -> dict[str, Any]:
    """The utterance attributes for the message's photo, sound and video (none without a
    file server: there is nowhere the services could read them from)."""
    if files is None or not message.has_media():
        if message.has_media():
            log.warning(
                "message %d: its media are not passed on (CHORUS_TELEGRAM_FILE_SERVER_URL "
                "is not set)",
                message.message_id,
            )
        return {}
    attributes: dict[str, Any] = {}

    async def stored(what: str, file_id: str, name: str | None, content_type: str) -> str | None:
        try:
            path, content = await download(file_id)
            return await files.upload(name or path, content, content_type)
        except MediaError as exc:
            log.error("message %d: its %s is not passed on: %s", message.message_id, what, exc)
            return None

    if message.photo:
        largest = message.photo[-1]  # Telegram lists a photo's sizes smallest first
        link = await stored("photo", largest.file_id, f"{uuid4().hex}.jpg", "image/jpg")
        if link is not None:
            attributes["image"] = link
    sound = message.voice or message.audio or message.video_note
    if sound is not None:
        kind = "video/ogg" if message.video_note is not None else "audio/ogg"
        link = await stored("sound", sound.file_id, None, kind)
        if link is not None:
            attributes["sound_path"] = link
            attributes["sound_duration"] = sound.duration
            attributes["sound_type"] = (
                "voice_message" if sound is message.voice else "audio_attachment"
            )
    video = message.video_note or message.video
    if video is not None:
        link = await stored("video", video.file_id, None, "video/ogg")
        if link is not None:
            attributes["video_path"] = link
            attributes["video_duration"] = video.duration
            attributes["video_type"] = (
                "video_attachment" if video is message.video else "video_note"
            )
    return attributes
