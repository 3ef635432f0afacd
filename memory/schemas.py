"""Schemas the JSON API shares between apps (django-ninja): the text rules of every input,
and a message as the API shows it. Each app's own schemas stay in its api.py.

No `from __future__ import annotations`: django-ninja builds its schemas from the annotations.
"""

from datetime import datetime
from typing import Any

from ninja import Field, Schema
from pydantic import field_validator

from memory.models import MessageType, Role
from memory.validation import check_text


class TextSchema(Schema):
    """Rejects NUL and text that is not valid UTF-8 in every string field, with its name."""

    @field_validator("*", mode="after")
    @classmethod
    def _valid_text(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str):
            check_text(info.field_name, value)
        return value


# Text that must say something: at least one non-space character.
Text = Field(min_length=1, pattern=r"\S")


class MessageOut(Schema):
    id: int
    session_id: str
    role: Role
    content: str
    msg_type: MessageType
    token_count: int
    has_embedding: bool
    timestamp: datetime
    metadata: dict[str, Any] | None
