"""What a context is made of: its items, layers and messages, and how each is counted.

An item holds the text it adds to the prompt (`sent`) and its tokens, counted from exactly
that text (`Item.tokens_of`): the system message is put together from the items' `sent`
pieces and the working messages carry theirs as their content, so a change of format cannot
leave the count behind and break the budget. Each layer's item is its own typed class
(`WorkingItem`, `SummaryItem`, `MemoryItem`, `RecalledItem`); the API's untyped `details`
are made from them at the API's edge (`memory.api.ContextItemOut`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from memory.dates import day_label
from memory.text import mostly_cjk
from memory.tokens import estimate_tokens

LONG_TERM_HEADER = "Long-term memory (from earlier sessions):"
SHORT_TERM_HEADER = "Earlier in this session:"
RECALL_HEADER = "Recalled from earlier conversations:"
# The system message's sections, in the order they are sent.
SECTIONS = (
    ("long_term", LONG_TERM_HEADER),
    ("recall", RECALL_HEADER),
    ("short_term", SHORT_TERM_HEADER),
)


# Written out rather than strftime's %A, which follows the locale.
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
CHINESE_WEEKDAYS = "一二三四五六日"


def date_line(now: datetime, query: str | None) -> str:
    """The system message's first line: today's date, weekday and time, so that "how many
    days ago" can be counted from the dates of the recalled lines. In UTC, as those dates
    are written; in Chinese when the query is mostly Chinese (`mostly_cjk`), else English:
    "Today is Thursday 3 December 2026, 14:05 UTC." / "今天是2026年12月3日星期四，UTC 14:05。"."""
    now = now.astimezone(UTC)
    if query and mostly_cjk(query):
        weekday = CHINESE_WEEKDAYS[now.weekday()]
        return f"今天是{now.year}年{now.month}月{now.day}日星期{weekday}，UTC {now:%H:%M}。"
    return f"Today is {WEEKDAYS[now.weekday()]} {day_label(now.date())}, {now:%H:%M} UTC."


def header_tokens(header: str) -> int:
    """A section header's line and the blank line that ends its section."""
    return estimate_tokens(header + "\n\n")


def as_line(text: str) -> str:
    """A line of the system message as it is sent and counted: with its line break."""
    return text + "\n"


@dataclass(frozen=True)
class Item:
    """One thing the context sends. `sent`: its text in the prompt, in pieces (a line of the
    system message each, with its line break, or a chat message's content); `tokens`: those
    pieces counted (`tokens_of`). Made by their class's `made`, and never changed."""

    id: int
    content: str
    tokens: int
    score: float | None = None
    method: str = "newest"  # what chose this item
    why: str = ""  # why it is there, in words (the preview shows it)
    sent: tuple[str, ...] = ()

    @staticmethod
    def tokens_of(sent: tuple[str, ...]) -> int:
        # Each piece on its own: the sum is never below the whole text's count.
        return sum(estimate_tokens(piece) for piece in sent)


@dataclass(frozen=True, kw_only=True)
class WorkingItem(Item):
    """A message of the session, sent as a chat message whose content is `sent[0]`."""

    role: str  # as stored
    chat_role: str  # as sent: a tool result without its call goes as the assistant's words
    tool_calls: list[dict[str, Any]] | None = None  # sent: every call is answered right after
    tool_call_id: str | None = None  # sent: its call is in working memory
    left_out_tool_calls: str | None = None  # why some recorded calls are not sent

    @classmethod
    def made(cls, message_id: int, content: str, text: str, **fields: Any) -> WorkingItem:
        return cls(message_id, content, cls.tokens_of((text,)), sent=(text,), **fields)

    def message(self) -> dict[str, Any]:
        """The chat message an OpenAI-compatible API takes."""
        if self.tool_call_id is not None:
            return {"role": self.chat_role, "tool_call_id": self.tool_call_id, "content": self.text}
        if self.tool_calls is not None:
            return {"role": self.chat_role, "content": self.text, "tool_calls": self.tool_calls}
        return {"role": self.chat_role, "content": self.text}

    @property
    def text(self) -> str:
        return self.sent[0]


@dataclass(frozen=True, kw_only=True)
class SummaryItem(Item):
    """A summary of a turn of this session: "- text"."""

    reply_id: int | None  # the turn's reply

    @classmethod
    def made(cls, summary_id: int, content: str, **fields: Any) -> SummaryItem:
        sent = (as_line(f"- {content}"),)
        return cls(summary_id, content, cls.tokens_of(sent), sent=sent, **fields)


@dataclass(frozen=True, kw_only=True)
class MemoryItem(Item):
    """A long-term memory, with the day it became true (so a newer value reads as newer):
    "- [type, since 8 May 2023] text", "- [type, since 8 May 2023, expired] text" once it
    expired. A memory whose text opens with that day, anchoring its relative time ("[8 May
    2023] I went climbing yesterday"), is not dated twice: "- [type] [8 May 2023] ..."."""

    memory_type: str
    expired: bool
    since: date  # the memory's `said_at`
    confidence: float
    access_count: int
    curated: bool
    source_ids: tuple[int, ...] = ()  # the messages it came from: shown, never sent

    @classmethod
    def made(
        cls,
        memory_id: int,
        content: str,
        *,
        memory_type: str,
        expired: bool,
        since: date,
        **fields: Any,
    ) -> MemoryItem:
        day = day_label(since)
        held = "" if content.startswith(f"[{day}]") else f", since {day}"
        label = f"{memory_type}{held}{', expired' if expired else ''}"
        sent = (as_line(f"- [{label}] {content}"),)
        return cls(
            memory_id,
            content,
            cls.tokens_of(sent),
            sent=sent,
            memory_type=memory_type,
            expired=expired,
            since=since,
            **fields,
        )


@dataclass(frozen=True, kw_only=True)
class RecalledItem(Item):
    """An earlier message: its line, after its session's "Session ...:" line when it is the
    first of its session in the prompt."""

    session_id: str
    timestamp: datetime
    role: str
    line: str  # the message's own line, without the session's

    @classmethod
    def made(
        cls,
        message_id: int,
        content: str,
        *,
        session_id: str,
        line: str,
        opens: bool,
        **fields: Any,
    ) -> RecalledItem:
        sent = cls.pieces(session_id, line, opens=opens)
        return cls(
            message_id,
            content,
            cls.tokens_of(sent),
            sent=sent,
            session_id=session_id,
            line=line,
            **fields,
        )

    @staticmethod
    def pieces(session_id: str, line: str, *, opens: bool) -> tuple[str, ...]:
        """What the message adds to the prompt; recall counts it with this before it chooses."""
        return ((as_line(session_header(session_id)),) if opens else ()) + (as_line(line),)


def session_header(session_id: str) -> str:
    return f"Session {session_id}:"


@dataclass(frozen=True)
class LeftOut:
    id: int
    reason: str
    score: float | None = None  # the candidate's match score, when it had one


@dataclass(frozen=True)
class Layer[ItemT: Item]:
    share: int  # the layer's own part of the budget
    budget: int  # its share plus what other layers left it
    method: str
    items: list[ItemT]
    headers: int = 0  # tokens of the section header the layer's items need in the prompt
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def overhead(self) -> int:
        return self.headers if self.items else 0

    @property
    def used(self) -> int:
        return sum(item.tokens for item in self.items) + self.overhead


@dataclass(frozen=True)
class Context:
    window: int
    budget: int
    query: str | None
    query_source: str  # "request", "newest user message" or "none"
    layers: dict[str, Layer[Any]]
    messages: list[dict[str, Any]]
    cuts: list[str]
    degraded: list[str]
    identity_recall: bool
    date_line: str | None = None  # the system message's first line; None without one

    @property
    def date_line_tokens(self) -> int:
        """The date line's and the blank line after it, as a section header's."""
        return header_tokens(self.date_line) if self.date_line is not None else 0

    @property
    def used(self) -> int:
        return sum(layer.used for layer in self.layers.values()) + self.date_line_tokens


def layer_method(items: Iterable[Item], default: str) -> str:
    methods = {item.method for item in items}
    return methods.pop() if len(methods) == 1 else ("mixed" if methods else default)


def system_message(layers: dict[str, Layer[Any]], date: str) -> str | None:
    """The date line, then the memory layers' sections, each its header's line and its
    items' pieces as they were counted; a blank line after the date and between sections.
    None when no layer has an item: the date alone is not sent."""
    sections = [
        as_line(header) + "".join(piece for item in layers[name].items for piece in item.sent)
        for name, header in SECTIONS
        if layers[name].items
    ]
    if not sections:
        return None
    return "\n".join([as_line(date), *sections]).removesuffix("\n")
