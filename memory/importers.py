"""Importers for what people already have (`manage.py import_from FORMAT FILE --agent A`):
ChatGPT's data export, Claude's data export, and a JSON list of memories as other memory
services export them. docs/ARCHIVE.md says what each reads.

Each entry (a conversation, a memory) is imported on its own: a broken one is reported with
its number and why (migrate_jsonl's `FileReport`), the rest go in. A conversation becomes a
session (its id, made a valid session id), each message keeps its time, and every message
goes in through `messages.messages_add` with a fingerprint (`import_fingerprint`), so that
importing the same export again adds nothing; a memory's fingerprint is kept in its `create`
history row (`IMPORT_NOTE`).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

from django.db import DatabaseError, OperationalError, transaction
from django.utils.dateparse import parse_date, parse_datetime

from memory import messages
from memory.jsonl import line_fingerprint
from memory.jsonl_import import FileReport
from memory.memories import memory_create
from memory.models import (
    IMPORT_NOTE,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    MemoryType,
    Role,
)
from memory.validation import MAX_IDENTIFIER_BYTES, InvalidInput, check_identifier

FORMATS = ("chatgpt", "claude", "memories")
# The history's actor of an imported memory.
IMPORT_ACTOR = "import"
CLAUDE_SENDERS = {"human": Role.USER, "assistant": Role.ASSISTANT}


class EntryError(ValueError):
    """Why an entry (or one message of it) cannot be imported."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _time(value: Any, name: str) -> datetime | None:
    """A time as exports write it: epoch seconds (ChatGPT) or ISO 8601 (Claude, others);
    without a zone, UTC."""
    if value is None:
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, tz=UTC)
        else:
            moment = parse_datetime(value) if isinstance(value, str) else None
            day = parse_date(value) if isinstance(value, str) and moment is None else None
            moment = datetime.combine(day, time(), UTC) if day else moment
        if moment is None:
            raise EntryError(f"unreadable {name} {_shown(value)}")
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (OverflowError, OSError, ValueError) as exc:
        if isinstance(exc, EntryError):
            raise
        raise EntryError(f"unreadable {name} {_shown(value)} ({exc})") from exc


def session_id_of(value: Any, fallback: str) -> str:
    """A conversation's id as a session id: the characters ids may not hold replaced by "-",
    cut to the identifier's length; `fallback` when nothing usable is left."""
    text = value if isinstance(value, str) else ""
    text = "".join(
        "-" if c in "/\\\u2028\u2029" or unicodedata.category(c) in ("Cc", "Cf", "Cs") else c
        for c in text
    ).strip()
    text = text.encode()[:MAX_IDENTIFIER_BYTES].decode(errors="ignore").strip()
    if not text.strip("."):
        text = fallback
    return check_identifier("session_id", text)


@dataclass(frozen=True)
class Message:
    source_id: str | None  # the export's own id of the message
    role: str
    content: str
    timestamp: datetime | None


@dataclass
class Conversation:
    session_id: str
    title: str | None
    messages: list[Message] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # messages left out, and why


def _text_of_parts(parts: Any) -> str:
    """ChatGPT's `content.parts`: the strings joined; anything else (an image's pointer)
    noted by its type."""
    if not isinstance(parts, list):
        raise EntryError("content.parts must be a list")
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            texts.append(f"[{part.get('content_type') or part.get('type') or 'attachment'}]")
        else:
            raise EntryError(f"a content part must be text or an object, not {_shown(part)}")
    return "\n".join(t for t in texts if t.strip())


def _chatgpt_message(message: Any, source_id: str) -> Message | None:
    """A mapping node's message; None for one with no text (the hidden system turns)."""
    if not isinstance(message, dict):
        raise EntryError("its message is not an object")
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in Role.values:
        raise EntryError(f"author.role must be one of {', '.join(Role.values)}, not {_shown(role)}")
    content = message.get("content")
    if not isinstance(content, dict):
        raise EntryError("no content object")
    if "parts" in content:
        text = _text_of_parts(content["parts"])
    else:
        text = content.get("text") if isinstance(content.get("text"), str) else ""
    if not text.strip():
        return None
    return Message(source_id, role, text, _time(message.get("create_time"), "create_time"))


def chatgpt(entry: Any, number: int) -> Conversation:
    """A conversation of ChatGPT's export: the branch that ends at `current_node`, walked
    back through each node's `parent` (the branches a person edited away are left out)."""
    if not isinstance(entry, dict):
        raise EntryError("a conversation must be an object")
    mapping, node_id = entry.get("mapping"), entry.get("current_node")
    if not isinstance(mapping, dict):
        raise EntryError('no "mapping" object')
    if not isinstance(node_id, str) or node_id not in mapping:
        raise EntryError(f"current_node {_shown(node_id)} is not a node of its mapping")
    chain, seen = [], set()
    while node_id is not None:
        node = mapping.get(node_id) if isinstance(node_id, str) else None
        if not isinstance(node, dict) or node_id in seen:
            raise EntryError(f"its branch is broken at node {_shown(node_id)}")
        seen.add(node_id)
        chain.append((node_id, node))
        node_id = node.get("parent")
    fallback = f"chatgpt-{number}"
    conversation = Conversation(
        session_id_of(entry.get("id") or entry.get("conversation_id"), fallback),
        entry.get("title") if isinstance(entry.get("title"), str) else None,
    )
    for node_id, node in reversed(chain):
        if node.get("message") is None:
            continue  # the tree's root
        try:
            message = _chatgpt_message(node["message"], node_id)
        except EntryError as exc:
            conversation.errors.append(f"message {node_id}: {exc}")
            continue
        if message is not None:
            conversation.messages.append(message)
    return conversation


def _claude_text(message: dict[str, Any]) -> str:
    text = message.get("text")
    if isinstance(text, str) and text.strip():
        return text
    blocks = message.get("content")
    if blocks is None:
        return ""
    if not isinstance(blocks, list):
        raise EntryError("content must be a list of blocks")
    return "\n".join(
        block["text"]
        for block in blocks
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def claude(entry: Any, number: int) -> Conversation:
    """A conversation of Claude's export: its `chat_messages` in order."""
    if not isinstance(entry, dict):
        raise EntryError("a conversation must be an object")
    chat = entry.get("chat_messages")
    if not isinstance(chat, list):
        raise EntryError('no "chat_messages" list')
    conversation = Conversation(
        session_id_of(entry.get("uuid"), f"claude-{number}"),
        entry.get("name") if isinstance(entry.get("name"), str) else None,
    )
    for position, message in enumerate(chat, 1):
        source_id = message.get("uuid") if isinstance(message, dict) else None
        label = source_id if isinstance(source_id, str) else str(position)
        try:
            if not isinstance(message, dict):
                raise EntryError("not an object")
            role = CLAUDE_SENDERS.get(message.get("sender"))
            if role is None:
                raise EntryError(
                    f"sender must be human or assistant, not {_shown(message.get('sender'))}"
                )
            text = _claude_text(message)
            moment = _time(message.get("created_at"), "created_at")
        except EntryError as exc:
            conversation.errors.append(f"message {label}: {exc}")
            continue
        if text.strip():
            conversation.messages.append(Message(label, role, text, moment))
    return conversation


# --- storing ---------------------------------------------------------------------------------


def _fingerprints(
    kind: str, agent_id: str, conversation: Conversation, times: list[datetime | None]
) -> list[str]:
    seen: Counter[str] = Counter()
    prints = []
    for message, moment in zip(conversation.messages, times, strict=True):
        key = json.dumps(
            [
                kind,
                agent_id,
                conversation.session_id,
                message.source_id,
                message.role,
                message.content,
                moment.isoformat() if moment else None,
            ],
            ensure_ascii=False,
        )
        seen[key] += 1
        prints.append(line_fingerprint(key, seen[key]))
    return prints


def _times(conversation: Conversation, start: Any) -> list[datetime | None]:
    """Each message's time; one without takes the one before it (the conversation's own
    for the first), so the session keeps its order."""
    try:
        previous = _time(start, "create_time")
    except EntryError:
        previous = None
    times = []
    for message in conversation.messages:
        previous = message.timestamp or previous
        times.append(previous)
    return times


def _store_conversation(
    kind: str,
    conversation: Conversation,
    start: Any,
    *,
    agent_id: str,
    number: int,
    report: FileReport,
) -> None:
    for reason in conversation.errors:
        report.errors.append((number, reason))
    times = _times(conversation, start)
    prints = _fingerprints(kind, agent_id, conversation, times)
    known = set(
        MainMessage.objects.filter(import_fingerprint__in=prints).values_list(
            "import_fingerprint", flat=True
        )
    )
    new = []
    rows = zip(conversation.messages, times, prints, strict=True)
    for position, (message, moment, fingerprint) in enumerate(rows):
        if fingerprint in known:
            report.skipped += 1
            continue
        metadata = {"imported_from": kind, "source_id": message.source_id}
        if conversation.title and position == 0:
            metadata["conversation_title"] = conversation.title
        try:
            messages.message_check(
                agent_id=agent_id,
                session_id=conversation.session_id,
                role=message.role,
                content=message.content,
                msg_type="normal",
                metadata=metadata,
            )
        except InvalidInput as exc:
            report.errors.append((number, f"message {message.source_id}: {exc}"))
            continue
        new.append(
            messages.NewMessage(
                role=message.role,
                content=message.content,
                metadata=metadata,
                timestamp=moment,
                import_fingerprint=fingerprint,
            )
        )
    for start_at in range(0, len(new), messages.MAX_BATCH_MESSAGES):
        batch = new[start_at : start_at + messages.MAX_BATCH_MESSAGES]
        messages.messages_add(
            agent_id=agent_id, session_id=conversation.session_id, messages=batch, summarize=False
        )
        report.imported += len(batch)


def _memory(entry: Any) -> tuple[str, str, datetime | None]:
    """A memory's text, type and date, from the names memory services export them under."""
    if not isinstance(entry, dict):
        raise EntryError("a memory must be an object")
    text = next(
        (entry[k] for k in ("text", "memory", "content") if isinstance(entry.get(k), str)), None
    )
    if text is None or not text.strip():
        raise EntryError('no text ("text", "memory" or "content")')
    kind = entry.get("type")
    if kind is not None and not isinstance(kind, str):
        raise EntryError(f"type must be text, not {_shown(kind)}")
    memory_type = kind.lower() if kind and kind.lower() in MemoryType.values else MemoryType.FACT
    date = entry.get("date", entry.get("created_at"))
    return text, memory_type, _time(date, "date")


def _store_memory(
    entry: Any, *, agent_id: str, number: int, report: FileReport, seen: Counter[str]
) -> None:
    text, memory_type, date = _memory(entry)
    key = json.dumps(
        ["memories", agent_id, text, memory_type, date.isoformat() if date else None],
        ensure_ascii=False,
    )
    seen[key] += 1
    fingerprint = line_fingerprint(key, seen[key])
    made = LongTermMemoryHistory.objects.filter(
        agent_id=agent_id, action=MemoryAction.CREATE, **{f"changes__{IMPORT_NOTE}": fingerprint}
    )
    if made.exists():
        report.skipped += 1
        return
    memory = memory_create(
        agent_id=agent_id,
        content=text,
        memory_type=memory_type,
        actor=IMPORT_ACTOR,
        note={IMPORT_NOTE: fingerprint},
    )
    if date is not None:
        # When the fact was said: "as of" a date holds for what came from the past.
        LongTermMemory.objects.filter(pk=memory.pk).update(valid_from=date)
    report.imported += 1


def _entries(data: Any, kind: str) -> list[Any]:
    if kind == "memories" and isinstance(data, dict):
        # mem0's get_all answers {"results": [...]}; others {"memories": [...]}.
        data = next(
            (data[k] for k in ("results", "memories") if isinstance(data.get(k), list)), data
        )
    if not isinstance(data, list):
        what = "memories" if kind == "memories" else "conversations"
        raise EntryError(f"the top level must be a list of {what}, not {type(data).__name__}")
    return data


def _store_entry(
    kind: str, entry: Any, *, agent_id: str, number: int, report: FileReport, seen: Counter[str]
) -> None:
    if kind == "memories":
        _store_memory(entry, agent_id=agent_id, number=number, report=report, seen=seen)
        return
    parse: Callable[[Any, int], Conversation] = chatgpt if kind == "chatgpt" else claude
    conversation = parse(entry, number)
    start = entry.get("create_time" if kind == "chatgpt" else "created_at")
    _store_conversation(kind, conversation, start, agent_id=agent_id, number=number, report=report)


def _read(path: Path) -> Any:
    def no_constant(name: str) -> Any:
        raise EntryError(f"{name} is not a number JSON allows")

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise EntryError(f"number {text[:20]} is out of range")
        return number

    raw = path.read_bytes()
    try:
        return json.loads(raw.decode("utf-8-sig"), parse_constant=no_constant, parse_float=finite)
    except UnicodeDecodeError as exc:
        raise EntryError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise EntryError(f"not JSON ({exc})") from exc


def import_file(path: Path, *, kind: str, agent_id: str, dry_run: bool = False) -> FileReport:
    """Import one export file of `kind` (FORMATS) into the agent; whatever goes wrong is in
    the report, never raised. Each entry is its own transaction; a dry run rolls back."""
    if kind not in FORMATS:
        raise ValueError(f"kind must be one of {FORMATS}")
    report = FileReport(path)
    try:
        entries = _entries(_read(path), kind)
    except OSError as exc:
        report.failure = f"cannot be read ({exc.strerror or exc})"
        return report
    except EntryError as exc:
        report.failure = str(exc)
        return report
    seen: Counter[str] = Counter()
    try:
        with transaction.atomic():
            for number, entry in enumerate(entries, 1):
                counted = report.imported, report.skipped
                try:
                    with transaction.atomic():
                        _store_entry(
                            kind, entry, agent_id=agent_id, number=number, report=report, seen=seen
                        )
                except OperationalError:
                    raise  # the database itself (unavailable, locked), not this entry
                except (EntryError, InvalidInput) as exc:
                    report.imported, report.skipped = counted  # the entry's savepoint undone
                    report.errors.append((number, str(exc)))
                except DatabaseError as exc:
                    report.imported, report.skipped = counted
                    report.errors.append((number, f"refused by the database ({exc})"))
            if dry_run:
                transaction.set_rollback(True)
    except DatabaseError as exc:
        report.failure = f"the database failed ({exc}); nothing of this file was kept, run again"
    report.errors.sort(key=lambda error: error[0])
    return report
