"""The Bot API's replies and updates as ``chorus telegram`` reads them, checked on arrival.

The Bot API is a boundary like any client: a reply whose fields are missing or of the wrong
type (a message without ``chat``, ``update_id: "abc"``, ``retry_after: "soon"``) must cost
only that reply or that update, never the bot. So each update is checked on its own: one
that does not fit is logged and skipped, and the poll's offset still moves past it, or a
restarted bot would meet it again. Only the fields the channel uses are declared; others
are ignored, as new Bot API fields appear.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

log = logging.getLogger("chorus.telegram")


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Parameters(_Read):
    retry_after: StrictInt | None = None


class Reply(_Read):
    """A Bot API reply's envelope: ``result`` on success, ``description`` otherwise."""

    ok: bool = False
    result: Any = None
    description: str | None = None
    parameters: Parameters | None = None


class Sender(_Read):
    id: StrictInt


class Chat(_Read):
    id: StrictInt


class PhotoSize(_Read):
    file_id: str
    file_size: StrictInt | None = None


class Media(_Read):
    """A voice message, an audio file, a video or a round video note."""

    file_id: str
    duration: StrictInt = 0
    file_size: StrictInt | None = None


class Message(_Read):
    message_id: StrictInt
    sender: Sender | None = Field(default=None, alias="from")
    chat: Chat
    text: str | None = None
    caption: str | None = None
    photo: list[PhotoSize] | None = None
    voice: Media | None = None
    audio: Media | None = None
    video: Media | None = None
    video_note: Media | None = None

    def has_media(self) -> bool:
        return bool(self.photo) or any((self.voice, self.audio, self.video, self.video_note))

    def said(self) -> str:
        """What the user said: the text, else a media message's caption, else ``''`` (a
        photo alone is a message too, as dp-agent's channel sends it)."""
        return self.text or self.caption or ""


class Update(_Read):
    update_id: StrictInt
    message: Message | None = None


class FileInfo(_Read):
    """``getFile``'s result: where the file is to be downloaded from.

    ``file_path`` is joined to the bot's file folder (``/file/bot<token>/``), so one that
    climbs out of it (``../../etc/passwd``), starts at the root, names a scheme or carries
    a query would have the bot fetch another address of the Bot API's host: it is refused
    (Telegram's own are ``photos/file_3.jpg``, ``voice/file_7.oga``)."""

    file_path: str = Field(min_length=1, max_length=1000)
    file_size: StrictInt | None = None

    @field_validator("file_path")
    @classmethod
    def _inside_the_file_folder(cls, path: str) -> str:
        segments = path.split("/")
        if (
            urlsplit(path).scheme
            or any(segment in ("", ".", "..") for segment in segments)
            or any(c in path for c in "\\%?#")
            or not path.isprintable()
        ):
            raise ValueError("must be a relative path inside the bot's file folder")
        return path

    def url(self, folder: str) -> str:
        """The file's address under ``folder``, each segment quoted: it cannot leave it."""
        return f"{folder}/" + "/".join(
            quote(segment, safe="") for segment in self.file_path.split("/")
        )


class _Numbered(_Read):
    update_id: StrictInt


def parse_updates(result: Any, limit: int) -> tuple[list[Update], int | None]:
    """The well-formed updates among the first ``limit`` of a ``getUpdates`` result, in
    order, and the highest ``update_id`` among those (malformed updates included, so the
    offset passes them). A server that sends more than it was asked for gets the rest
    asked for again: a batch's work stays bounded whatever comes back. A result that is
    not a list, or whose updates all lack a numeric ``update_id``, is a ``ValueError``."""
    if not isinstance(result, list):
        raise ValueError(f"getUpdates: result is a {type(result).__name__}, not a list")
    numbered: list[tuple[int, Any]] = []
    for raw in result:
        try:
            numbered.append((_Numbered.model_validate(raw).update_id, raw))
        except ValidationError:
            log.error("getUpdates: skipped an update without a numeric update_id: %.200r", raw)
    if result and not numbered:  # polling on at once would get the same again
        raise ValueError("getUpdates: no update of the result has a numeric update_id")
    numbered.sort(key=lambda pair: pair[0])
    numbered = numbered[:limit]
    updates: list[Update] = []
    for number, raw in numbered:
        try:
            updates.append(Update.model_validate(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            log.error("update %d skipped, it is malformed: %s", number, problems[:300])
    return updates, numbered[-1][0] if numbered else None
