"""Long-term memories: the curation flows the API, the admin, the UI and consolidation share.

Every change is kept in `long_term_memory_history` with who made it and the text before and
after, so nothing a curator or a consolidation does is lost from view.

Every memory also lists where it came from (`long_term_memory_sources`): the messages an
extraction found it in, and the people who wrote or reworded it ("written by"). The
messages also date it: `valid_from` is when the earliest of them was said.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from django.apps import apps as django_apps
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory import attributes, index, scheduling
from memory.embeddings import Thresholds
from memory.index_schema import query_terms
from memory.models import (
    AUTOMATIC_ACTORS,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    MemorySource,
    MemoryType,
)
from memory.relevance import CLOSEST_PREFERENCES, Verdict, memory_verdict
from memory.validation import (
    InvalidInput,
    check_confidence,
    check_content,
    check_datetime,
    check_identifier,
)
from memory.vectors import delete_with_vectors, drop_vectors

EDITABLE_FIELDS = frozenset(
    {"content", "memory_type", "confidence", "expires_at", "source_session"}
)


def by_a_person(actor: str) -> bool:
    """Whether a person made the change (not `AUTOMATIC_ACTORS`): consolidation must not
    overwrite a person's wording."""
    return actor not in AUTOMATIC_ACTORS


def _check(fields: dict[str, Any], allowed: frozenset[str] = EDITABLE_FIELDS) -> None:
    if unknown := set(fields) - allowed:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}")
    for name in ("content", "memory_type", "confidence"):
        if name in fields and fields[name] is None:
            raise InvalidInput(f"{name} must not be null")
    if "content" in fields:
        check_content("content", fields["content"])
    if "memory_type" in fields and fields["memory_type"] not in MemoryType.values:
        raise InvalidInput(f"memory_type must be one of {', '.join(MemoryType.values)}")
    if "confidence" in fields:
        check_confidence("confidence", fields["confidence"])
    if fields.get("source_session") is not None:
        check_identifier("source_session", fields["source_session"])
    if fields.get("expires_at") is not None:
        # Before anything is written: a naive or overflowing time would fail after the save.
        check_datetime("expires_at", fields["expires_at"])


def _history(
    memory: LongTermMemory,
    action: str,
    actor: str,
    *,
    old_content: str | None = None,
    changes: dict[str, Any] | None = None,
    old_values: dict[str, Any] | None = None,
) -> None:
    LongTermMemoryHistory.objects.create(
        memory_id=memory.pk,
        agent_id=memory.agent_id,
        action=action,
        actor=actor,
        old_content=old_content,
        new_content=None if action == MemoryAction.DELETE else memory.content,
        changes=changes,
        old_values=old_values,
    )


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _said_at(agent_id: str, message_ids: Iterable[int]) -> dict[int, datetime]:
    """When each of these messages of the agent was said; one deleted since is left out (a
    deleted message is no longer a source)."""
    ids = set(message_ids)
    if not ids:
        return {}
    found = MainMessage.objects.filter(agent_id=agent_id, pk__in=ids)
    return dict(found.values_list("pk", "timestamp"))


def _add_sources(
    memory: LongTermMemory, message_ids: Iterable[int], person: str | None, *, new: bool
) -> None:
    """The messages and the person as sources of the memory, those it does not list yet."""
    message_ids = set(message_ids)
    if not new and (message_ids or person):
        listed = set(
            MemorySource.objects.filter(memory=memory).values_list("message_id", "written_by")
        )
        message_ids -= {message_id for message_id, _ in listed}
        person = None if (None, person) in listed else person
    rows = [
        MemorySource(memory=memory, agent_id=memory.agent_id, message_id=message_id)
        for message_id in sorted(message_ids)
    ]
    if person is not None:
        rows.append(MemorySource(memory=memory, agent_id=memory.agent_id, written_by=person))
    MemorySource.objects.bulk_create(rows)


def source_message_ids(memory_ids: Iterable[int]) -> dict[int, tuple[int, ...]]:
    """The ids of the messages each memory came from, in the order they were stored: one
    query for all the memories."""
    ids = set(memory_ids)
    if not ids:
        return {}
    rows = MemorySource.objects.filter(memory_id__in=ids, message__isnull=False)
    found: dict[int, tuple[int, ...]] = {}
    for memory_id, message_id in rows.order_by("message_id").values_list("memory_id", "message_id"):
        found[memory_id] = (*found.get(memory_id, ()), message_id)
    return found


# The memories a query's KNN or text search brings for the floors to judge (the context's
# long-term layer, `judged_memories`).
MEMORY_CANDIDATES = 20


def current_value(agent_id: str, query: str, now: datetime) -> LongTermMemory | None:
    """For a question asking for one of the person's attributes ("Which city do I live in
    now?", memory.attributes), the newest active memory giving it a value: the older ones are
    superseded. The context shows it, and search raises the message it was said in."""
    attribute = attributes.asked(query)
    if attribute is None:
        return None
    active = LongTermMemory.objects.filter(agent_id=agent_id).active().current(now)
    return active.filter(attribute=attribute).newest_said_first().first()


def closest_preferences(agent_id: str, vector: Sequence[float], now: datetime) -> dict[int, float]:
    """The person's CLOSEST_PREFERENCES active, current preferences most similar to the
    query's vector, best first, with their similarity (memory.relevance: a recommendation
    question weighs them whatever their score)."""
    hits = memories_like(
        agent_id=agent_id, vector=vector, k=MEMORY_CANDIDATES, memory_type=MemoryType.PREFERENCE
    )
    memories = LongTermMemory.objects.filter(agent_id=agent_id, pk__in=[hit.id for hit in hits])
    active = set(memories.active().current(now).values_list("pk", flat=True))
    kept = [(hit.id, hit.score) for hit in hits if hit.id in active]
    return dict(kept[:CLOSEST_PREFERENCES])


@dataclass(frozen=True)
class JudgedMemory:
    """A memory close to a query, its score (cosine similarity, or its BM25 share of the best
    on the lexical path) and whether it is about the query (memory.relevance), with why."""

    memory: LongTermMemory
    score: float
    verdict: Verdict


def judged_memories(
    agent_id: str,
    query: str,
    vector: Sequence[float] | None,
    thresholds: Thresholds,
    now: datetime,
    *,
    floor: float,
    recommending: bool,
) -> list[JudgedMemory]:
    """The person's active, current memories closest to the query, each judged by the
    context's floors against `floor` (the relevance floor, or the identity floor for an
    identity question), best first: MEMORY_CANDIDATES by the query's `vector` and, for a
    recommendation question, the closest preferences whatever their score; without a vector,
    by its words (the caller checks it has some: `text.has_terms`). The context's long-term
    layer and search's raises (`memories_about`) judge by this one rule."""
    if vector is not None:
        similar = memories_like(agent_id=agent_id, vector=vector, k=MEMORY_CANDIDATES)
        closest = closest_preferences(agent_id, vector, now) if recommending else {}
        scores = {hit.id: hit.score for hit in similar} | closest
        terms = None
    else:
        hits = memories_like(agent_id=agent_id, text=query, k=MEMORY_CANDIDATES)
        best = max((hit.score for hit in hits), default=0) or 1
        scores, closest = {hit.id: hit.score / best for hit in hits}, {}
        terms = query_terms(query)
    active = LongTermMemory.objects.filter(agent_id=agent_id, pk__in=scores).active().current(now)
    judged = [
        JudgedMemory(
            memory,
            scores[memory.pk],
            memory_verdict(
                memory_type=memory.memory_type,
                content=memory.content,
                similarity=scores[memory.pk] if vector is not None else None,
                thresholds=thresholds,
                base=floor,
                query=query,
                terms=terms,
                recommending=recommending,
                closest=memory.pk in closest,
            ),
        )
        for memory in active
    ]
    return sorted(judged, key=lambda one: -one.score)


def memories_about(
    agent_id: str,
    query: str,
    vector: Sequence[float],
    thresholds: Thresholds,
    now: datetime,
    recommending: bool,
) -> list[LongTermMemory]:
    """The person's active, current memories about the query at the relevance floor
    (`judged_memories`), most similar first."""
    judged = judged_memories(
        agent_id,
        query,
        vector,
        thresholds,
        now,
        floor=thresholds.relevance,
        recommending=recommending,
    )
    return [one.memory for one in judged if one.verdict.relevant]


def derive_attributes(*, using: str, apps: Any = None, **_: Any) -> None:
    """`post_migrate` receiver: each memory's attribute by today's rule, where it differs
    from the column (null in rows from before migration 0025 or written with plain SQL; the
    rule's older reading where a release taught it an attribute or corrected one). Reads the
    schema `migrate` left (`apps`; `flush` sends none: today's), so a migration back to
    before the column does nothing."""
    model = (apps or django_apps).get_model("memory", "LongTermMemory")
    if "attribute" not in {field.name for field in model._meta.get_fields()}:
        return
    rows = model.objects.using(using).values_list("pk", "content", "attribute")
    for pk, content, attribute in rows.iterator():
        derived = attributes.of_memory(content) or ""
        if derived != attribute:
            model.objects.using(using).filter(pk=pk).update(attribute=derived)


def memory_create(
    *,
    agent_id: str,
    content: str,
    memory_type: str,
    actor: str,
    note: dict[str, Any] | None = None,
    source_messages: Iterable[int] = (),
    **fields: Any,
) -> LongTermMemory:
    """A new memory and its first history row; `note` goes in that row's `changes` (the
    consolidation run that made it).

    Its sources: the agent's `source_messages` (an extraction's), dating it from the earliest
    (`valid_from`), and the person who wrote it; a person's memory has no `valid_from`: it
    holds from its creation."""
    fields = {"content": content, "memory_type": memory_type, **fields}
    _check(fields)
    said = _said_at(agent_id, source_messages)
    with transaction.atomic():
        memory = LongTermMemory.objects.create(
            agent_id=agent_id,
            curated=by_a_person(actor),
            valid_from=min(said.values(), default=None),
            **fields,
        )
        _add_sources(memory, said, actor if by_a_person(actor) else None, new=True)
        _history(memory, MemoryAction.CREATE, actor, changes=note)
        scheduling.with_the_write(scheduling.schedule_embedding)
    return memory


def memory_update(
    memory: LongTermMemory,
    *,
    actor: str,
    action: str = MemoryAction.UPDATE,
    note: dict[str, Any] | None = None,
    source_messages: Iterable[int] = (),
    **fields: Any,
) -> LongTermMemory:
    """Change the given fields; a new text waits for its new vector.

    Consolidation also raises `source_count` when a new extraction confirms the memory, and
    adds the messages it found it in (`source_messages`) to its sources; an earlier one moves
    `valid_from` back. A text written by a person makes the memory `curated` and adds the
    person to its sources. `note` adds to the history's `changes` what the fields cannot say
    (e.g. the text a merge proposed but did not write).
    """
    _check(fields, EDITABLE_FIELDS | {"source_count"})
    changed = {k: v for k, v in fields.items() if getattr(memory, k) != v}
    said = _said_at(memory.agent_id, source_messages)
    first_said = min(said.values(), default=None)
    if first_said is not None and first_said < (memory.valid_from or memory.created_at):
        changed["valid_from"] = first_said
    if not changed:
        return memory  # a merge always changes `source_count`: its messages are added below
    person = actor if "content" in changed and by_a_person(actor) else None
    if person is not None and not memory.curated:
        changed["curated"] = True
    old_content = memory.content
    old_values = {k: _jsonable(getattr(memory, k)) for k in changed if k != "content"}
    with transaction.atomic():
        for name, value in changed.items():
            setattr(memory, name, value)
        memory.updated_at = timezone.now()
        update = [*changed, "updated_at"]
        if "content" in changed or "memory_type" in changed:
            memory.has_embedding = False
            update.append("has_embedding")
            scheduling.with_the_write(scheduling.schedule_embedding)
        memory.save(update_fields=update)
        _history(
            memory,
            action,
            actor,
            old_content=old_content if "content" in changed else None,
            changes={
                **{k: _jsonable(v) for k, v in changed.items() if k != "content"},
                **(note or {}),
            }
            or None,
            old_values=old_values or None,
        )
        _add_sources(memory, said, person, new=False)
    return memory


def memory_expire(
    memory: LongTermMemory, *, actor: str, now: datetime | None = None
) -> LongTermMemory:
    """Expire now (kept and down-weighted, never deleted); an earlier expiry stays."""
    now = now or timezone.now()
    if memory.expires_at is None or memory.expires_at > now:
        memory_update(memory, actor=actor, action=MemoryAction.EXPIRE, expires_at=now)
    return memory


def memory_restore(
    memory: LongTermMemory, *, actor: str, now: datetime | None = None
) -> LongTermMemory:
    """Make an expired memory active again; a memory not yet expired keeps its expiry."""
    if memory.is_expired(now):
        memory_update(memory, actor=actor, action=MemoryAction.RESTORE, expires_at=None)
    return memory


def memory_delete(memory: LongTermMemory, *, actor: str) -> None:
    """Delete the memory and its vector; its history stays, with what it was.

    The memories it superseded are current again, or, when a newer memory had superseded it
    in turn, superseded by that one: a chain never ends at a deleted memory this way.
    """
    snapshot = {name: _jsonable(getattr(memory, name)) for name in sorted(EDITABLE_FIELDS)}
    with transaction.atomic():
        for older in LongTermMemory.objects.filter(superseded_by_id=memory.pk):
            if memory.superseded_by_id is None:
                memory_unsupersede(older, actor=actor, note={"reason": DELETED_SUCCESSOR})
            else:
                _set_successor(older, memory.superseded_by_id, older.valid_until, actor=actor)
        _history(
            memory,
            MemoryAction.DELETE,
            actor,
            old_content=memory.content,
            old_values={k: v for k, v in snapshot.items() if k != "content"},
        )
        delete_with_vectors(LongTermMemory.objects.filter(pk=memory.pk))


# Why a supersession was undone without a person asking.
DELETED_SUCCESSOR = "the newer memory was deleted"


def _set_successor(
    memory: LongTermMemory,
    successor: int | None,
    until: datetime | None,
    *,
    actor: str,
    note: dict[str, Any] | None = None,
) -> LongTermMemory:
    """Set who superseded the memory and since when (None, None: current again), with its
    history row: `supersede` or `unsupersede`."""
    old_values = {
        "valid_until": _jsonable(memory.valid_until),
        "superseded_by": memory.superseded_by_id,
    }
    with transaction.atomic():
        memory.superseded_by_id, memory.valid_until = successor, until
        memory.updated_at = timezone.now()
        memory.save(update_fields=["superseded_by", "valid_until", "updated_at"])
        _history(
            memory,
            MemoryAction.UNSUPERSEDE if successor is None else MemoryAction.SUPERSEDE,
            actor,
            changes={"valid_until": _jsonable(until), "superseded_by": successor, **(note or {})},
            old_values=old_values,
        )
    return memory


def memory_supersede(
    old: LongTermMemory,
    new: LongTermMemory,
    *,
    actor: str,
    note: dict[str, Any] | None = None,
) -> LongTermMemory:
    """`new` replaces `old`: the old memory keeps its text and history and stops being
    current when the new value was said (`new.said_at`). Returns the old memory.

    Not an expiry or an archive: a superseded memory may be neither, and undoing it
    (`memory_unsupersede`) leaves those alone."""
    if old.pk == new.pk or old.agent_id != new.agent_id:
        raise InvalidInput("a memory is superseded by another memory of its agent")
    if old.valid_until is not None:
        raise InvalidInput(f"memory #{old.pk} is superseded already")
    if new.valid_until is not None:
        raise InvalidInput(f"memory #{new.pk} is superseded itself")
    if new.said_at < old.said_at:
        raise InvalidInput(f"memory #{new.pk} was said before memory #{old.pk}")
    return _set_successor(old, new.pk, new.said_at, actor=actor, note=note)


def memory_unsupersede(
    memory: LongTermMemory, *, actor: str, note: dict[str, Any] | None = None
) -> LongTermMemory:
    """The memory is current again (a supersession undone); one that is current already is
    left as it is."""
    if memory.valid_until is None and memory.superseded_by_id is None:
        return memory
    return _set_successor(memory, None, None, actor=actor, note=note)


# The most memories a chain shows on each side of a memory.
CHAIN_LIMIT = 20


@dataclass(frozen=True)
class Chain:
    """A memory's place among the values of its subject: the memories it superseded (and
    those they superseded), newest first; those that superseded it, oldest first; and the id
    the newer side ends at when that memory was deleted (the column has no constraint)."""

    older: list[LongTermMemory]
    newer: list[LongTermMemory]
    deleted: int | None

    def __bool__(self) -> bool:
        return bool(self.older or self.newer or self.deleted)


def memory_chain(memory: LongTermMemory) -> Chain:
    """The memory's chain of supersessions, at most CHAIN_LIMIT memories each way."""
    older: list[LongTermMemory] = []
    level = [memory.pk]
    while level and len(older) < CHAIN_LIMIT:
        found = list(
            LongTermMemory.objects.filter(superseded_by_id__in=level).order_by("-valid_until")
        )
        older += found[: CHAIN_LIMIT - len(older)]
        level = [m.pk for m in found]
    newer: list[LongTermMemory] = []
    successor, seen = memory.superseded_by_id, {memory.pk}
    while successor is not None and successor not in seen and len(newer) < CHAIN_LIMIT:
        found = LongTermMemory.objects.filter(pk=successor).first()
        if found is None:
            return Chain(older, newer, successor)
        newer.append(found)
        seen.add(successor)
        successor = found.superseded_by_id
    return Chain(older, newer, None)


# What a bulk action does to each memory it selects: a single action's flow.
BULK_FLOWS = {
    MemoryAction.EXPIRE: memory_expire,
    MemoryAction.RESTORE: memory_restore,
    MemoryAction.DELETE: memory_delete,
}


def memories_apply(*, memories: Iterable[LongTermMemory], action: str, actor: str) -> int:
    """One of BULK_FLOWS on each memory, all or none; how many it changed (an expired memory
    is not expired again, an active one has nothing to restore)."""
    flow = BULK_FLOWS[action]
    now = timezone.now()
    changed = 0
    with transaction.atomic():
        for memory in memories:
            if action == MemoryAction.EXPIRE and memory.is_expired(now):
                continue
            if action == MemoryAction.RESTORE and not memory.is_expired(now):
                continue
            flow(memory, actor=actor)
            changed += 1
    return changed


# What a revert restores: a person's fields. The source count, the archive state and the
# curated flag follow their own rules (consolidation, the cleanup, memory_update).
REVERTIBLE_FIELDS = EDITABLE_FIELDS


def _undo(state: dict[str, Any], change: LongTermMemoryHistory) -> bool:
    """Take `change` back out of `state` (the fields after it); False when the row did not
    record an old value it changed (rows written before migration 0016 kept only the new ones)."""
    if change.action in (MemoryAction.CREATE, MemoryAction.DELETE):
        return False
    if change.old_content is not None:
        state["content"] = change.old_content
    old_values = change.old_values or {}
    for name in (change.changes or {}).keys() & REVERTIBLE_FIELDS:
        if name not in old_values:
            return False
        value = old_values[name]
        state[name] = datetime.fromisoformat(value) if name == "expires_at" and value else value
    return True


def memory_versions(memory_id: int) -> list[LongTermMemoryHistory]:
    """The memory's history, newest first, each row numbered (`version`: 1 is its creation)
    and marked `revertible` when every later change can be taken back."""
    rows = list(LongTermMemoryHistory.objects.filter(memory_id=memory_id).order_by("at", "id"))
    undoable = True
    for number, row in reversed(list(enumerate(rows, start=1))):
        row.version = number
        row.revertible = undoable and number < len(rows)
        undoable = undoable and _undo({}, row)
    return rows[::-1]


def memory_revert(memory: LongTermMemory, *, version: int, actor: str) -> LongTermMemory:
    """Back to the fields as they were after history row number `version`, itself a change
    in the history ("reverted to version N"); a person's text makes the memory curated."""
    rows = memory_versions(memory.pk)
    if not 1 <= version < len(rows):
        raise InvalidInput(f"memory #{memory.pk} has no earlier version {version}")
    state = {name: getattr(memory, name) for name in REVERTIBLE_FIELDS}
    for row in rows[: len(rows) - version]:
        if not _undo(state, row):
            raise InvalidInput(
                f"version {version} cannot be restored: version {row.version} did not record "
                "the values it replaced"
            )
    return memory_update(
        memory, actor=actor, action=MemoryAction.REVERT, note={"reverted_to": version}, **state
    )


def memory_archive(
    memory: LongTermMemory, *, actor: str, now: datetime, changes: dict[str, Any] | None = None
) -> LongTermMemory:
    """Take the memory out of retrieval, kept and visible to curators.

    Its vector goes too: a KNN's k places belong to active memories, and archives only grow.
    """
    with transaction.atomic():
        memory.archived_at = now
        memory.save(update_fields=["archived_at"])
        drop_vectors(LongTermMemory.objects.filter(pk=memory.pk))
        memory.has_embedding = False
        _history(
            memory,
            MemoryAction.ARCHIVE,
            actor,
            changes={"archived_at": now.isoformat(), **(changes or {})},
        )
    return memory


def memory_unarchive(memory: LongTermMemory, *, actor: str) -> LongTermMemory:
    """Bring an archived memory back into retrieval; it waits for a new vector."""
    if memory.archived_at is None:
        return memory
    with transaction.atomic():
        memory.archived_at = None
        memory.has_embedding = False
        memory.updated_at = timezone.now()
        memory.save(update_fields=["archived_at", "has_embedding", "updated_at"])
        _history(memory, MemoryAction.UPDATE, actor, changes={"archived_at": None})
        scheduling.with_the_write(scheduling.schedule_embedding)
    return memory


class RankedMemories(Sequence[LongTermMemory]):
    """Memories in the order of a text search: its length is the true number of matches,
    and a slice loads only its own rows (a page)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, key: int) -> LongTermMemory: ...

    @overload
    def __getitem__(self, key: slice) -> list[LongTermMemory]: ...

    def __getitem__(self, key: int | slice) -> LongTermMemory | list[LongTermMemory]:
        if isinstance(key, int):
            return LongTermMemory.objects.get(pk=self.ids[key])
        ids = self.ids[key]
        rows = LongTermMemory.objects.with_sources().in_bulk(ids)
        return [rows[pk] for pk in ids if pk in rows]


def memories_like(
    *,
    agent_id: str,
    text: str | None = None,
    vector: Sequence[float] | None = None,
    k: int,
    memory_type: str | None = None,
) -> list[index.Hit]:
    """The agent's k memories most like a text, best first: by its `vector` (the score is the
    cosine similarity) or by its `text` (BM25; none when it has no term to look up), one of
    the two. Archived memories are in the lexical index, not in the vector index (their
    vectors are dropped): callers keep the memories they want through the ORM.

    `memory_type` narrows a vector search; the lexical index cannot filter on it (ValueError).
    """
    filters = [] if memory_type is None else [index.Filter("memory_type", "=", memory_type)]
    if vector is not None and text is None:
        return index.knn(
            index.MEMORY_VECTORS, agent_id=agent_id, embedding=vector, k=k, filters=filters
        )
    if text is not None and vector is None:
        return index.lexical_search(
            index.MEMORY_TEXT, agent_id=agent_id, query=text, k=k, filters=filters
        )
    raise ValueError("memories_like takes a text or a vector, one of the two")


def memories_of(
    agent_id: str,
    *,
    memory_type: str | None = None,
    query: str | None = None,
    include_expired: bool = False,
    include_superseded: bool = False,
    as_of: datetime | None = None,
    now: datetime | None = None,
) -> QuerySet[LongTermMemory] | RankedMemories:
    """The agent's active memories that are current (none superseded), or with
    `include_superseded` the superseded ones too, or those that held `as_of` a time (said by
    then, superseded later or never; expired then, with `include_expired`), with their
    sources: best text match first with a query, else newest first.

    With a query every match is ranked (an agent holds at most `long_term_cap` active
    memories), so the count a page reports is the number of matches, not a cap.
    """
    if as_of is not None and include_superseded:
        raise InvalidInput("as_of and include_superseded: choose one")
    at = as_of or now or timezone.now()
    memories = LongTermMemory.objects.filter(agent_id=agent_id).active().with_sources()
    if as_of is not None:
        memories = memories.as_of(as_of)
    elif not include_superseded:
        memories = memories.current(at)
    if memory_type is not None:
        memories = memories.filter(memory_type=memory_type)
    if not include_expired:
        memories = memories.unexpired(at)
    if not query:
        return memories.order_by("-created_at", "-id")
    # Every memory of the agent has one FTS row, archived ones included.
    indexed = LongTermMemory.objects.filter(agent_id=agent_id).count()
    hits = memories_like(agent_id=agent_id, text=query, k=indexed)
    selected = set(memories.values_list("pk", flat=True))
    return RankedMemories([hit.id for hit in hits if hit.id in selected])
