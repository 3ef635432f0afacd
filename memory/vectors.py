"""Keeping the vector index filled: its signature, the embedding of pending messages, status.

Messages are committed first with `has_embedding = FALSE`. `embed_pending()` embeds them in
batches outside any transaction (the provider may be slow), then writes each batch's vectors
and flips their flags in one transaction, skipping rows another run finished meanwhile: a
crash loses at most the batch in flight, which stays pending, and no row gets two vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

from memory import embeddings, index
from memory.dates import minute_label
from memory.embeddings import (
    DEFAULT_THRESHOLDS,
    Embedder,
    EmbeddingError,
    InputRejected,
    LocalEmbedder,
    Signature,
    Thresholds,
)
from memory.models import LongTermMemory, MainMessage, ShortTermMemory, VectorIndexState
from memory.phrases import Phrase, as_phrase
from memory.text import speaker

logger = logging.getLogger(__name__)

# Long texts are embedded by their beginning: bge-m3 reads 8K tokens, MiniLM 256, and a
# provider refusing an oversized input must not block the backlog behind it.
MAX_EMBED_CHARS = 4000


class SignatureMismatch(Exception):
    """The vector tables hold another provider's vectors; `manage.py reembed` rebuilds them."""


@dataclass(frozen=True)
class VectorSearchStatus:
    enabled: bool
    reason: str | None
    signature: Signature | None


def index_state() -> VectorIndexState | None:
    """The one row describing the vector tables, once something has been embedded."""
    return VectorIndexState.objects.filter(pk=1).first()


def _stored_signature() -> Signature | None:
    state = index_state()
    if state is None:
        return None
    return Signature(
        state.provider, state.model, state.dimension, state.query_prefix, state.document_prefix
    )


def vector_search_status(embedder: Embedder | None = None) -> VectorSearchStatus:
    """Whether vector search can answer now, and if not, a reason an operator can act on."""
    support = index.vector_index_status()
    if not support.enabled:
        return VectorSearchStatus(False, support.reason, None)
    embedder = embedder or embeddings.configured_embedder()
    if embedder is None:
        return VectorSearchStatus(False, gettext_noop("no embedding provider is configured"), None)
    stored = _stored_signature()
    if stored == embedder.signature:
        not_loaded = _model_not_loaded(embedder)
        return VectorSearchStatus(not_loaded is None, not_loaded, embedder.signature)
    if index.vectors_exist():
        return VectorSearchStatus(
            False,
            Phrase(
                gettext_noop(
                    "the vectors were made by %(stored)s but the configured provider is "
                    "%(provider)s: run `python manage.py reembed`%(hint)s"
                ),
                stored=str(stored) if stored else Phrase(gettext_noop("an unknown provider")),
                provider=str(embedder.signature),
                hint=_keep_hint(stored),
            ),
            embedder.signature,
        )
    # Nothing to find yet, and the empty tables may have another dimension (a query would
    # fail) until the task worker's first run prepares them for this provider.
    return VectorSearchStatus(
        False,
        Phrase(
            gettext_noop(
                "no vectors of %(provider)s yet: the task worker prepares the index on its "
                "first run"
            ),
            provider=str(embedder.signature),
        ),
        embedder.signature,
    )


def _keep_hint(stored: Signature | None) -> Phrase | str:
    """For vectors of a bundled model (a store from before the default changed): the setting
    that keeps them instead of embedding everything again."""
    if stored is None or embeddings.bundled(stored) is None:
        return ""
    return Phrase(
        gettext_noop(", or keep them with [embedding] model = %(model)s (EMBEDDING_MODEL)"),
        model=repr(stored.model),
    )


def _model_not_loaded(embedder: Embedder) -> str | None:
    """Why the process's model cannot embed a query yet (a server loads the local model in
    the background at start, never in a request), or None when it can."""
    if isinstance(embedder, LocalEmbedder):
        reason = embedder.unavailable_reason()
        return f"{embedder.signature}: {reason}" if reason else None
    return None


def rebuild_index(signature: Signature) -> None:
    """Empty vector tables with the signature's dimension; every message becomes pending."""
    with transaction.atomic():
        index.drop_vector_tables()
        index.create_vector_tables(dimension=signature.dimension)
        VectorIndexState.objects.update_or_create(
            pk=1,
            defaults={
                "provider": signature.provider,
                "model": signature.model,
                "dimension": signature.dimension,
                "query_prefix": signature.query_prefix,
                "document_prefix": signature.document_prefix,
                "built_at": timezone.now(),
                "consecutive_failures": 0,
            },
        )
        for source in SOURCES:
            source.model.objects.filter(has_embedding=True).update(has_embedding=False)


def prepare_index(signature: Signature) -> None:
    """Make the tables fit the signature: rebuilt while empty, refused once they hold vectors."""
    stored = _stored_signature()
    if stored == signature:
        return
    if index.vectors_exist():
        raise SignatureMismatch(
            f"the vector tables hold vectors of {stored or 'an unknown provider'}, not "
            f"{signature}: run `python manage.py reembed`"
        )
    rebuild_index(signature)


def _record(*, error: str | None) -> None:
    now = timezone.now()
    if error is None:
        VectorIndexState.objects.filter(pk=1).update(
            last_success_at=now, last_error="", consecutive_failures=0
        )
    else:
        state = index_state()
        VectorIndexState.objects.filter(pk=1).update(
            last_error=error[:500],
            last_error_at=now,
            consecutive_failures=(state.consecutive_failures + 1) if state else 1,
        )


def retry_delay() -> timedelta:
    """Backoff before the next run after failures: 30 s doubling up to 10 minutes."""
    state = index_state()
    failures = state.consecutive_failures if state else 1
    return timedelta(seconds=min(30 * 2 ** max(failures - 1, 0), 600))


def embedding_text(message: MainMessage) -> str:
    """What is embedded for a message: "[8 May 2023 13:56] Caroline: text".

    The date and the speaker help retrieval as they do in the lexical index (docs/EVALUATION.md).
    """
    who = speaker(message.role, message.metadata)
    return f"[{minute_label(message.timestamp)}] {who}: {message.content[:MAX_EMBED_CHARS]}"


@dataclass(frozen=True)
class Source:
    """A table whose rows get vectors: what is pending, what is embedded, what is stored."""

    model: type[Model]
    table: index.VectorTable
    pending: Callable[[], QuerySet[Any]]
    text: Callable[[Any], str]
    metadata: Callable[[Any], dict[str, str | int]]


SOURCES = (
    Source(
        MainMessage,
        index.MESSAGE_VECTORS,
        lambda: MainMessage.objects.awaiting_embedding(),
        embedding_text,
        lambda m: {
            "session_id": m.session_id,
            "role": m.role,
            "msg_type": m.msg_type,
            "created_at": int(m.timestamp.timestamp()),
        },
    ),
    Source(
        ShortTermMemory,
        index.SUMMARY_VECTORS,
        lambda: ShortTermMemory.objects.filter(has_embedding=False),
        lambda s: s.content[:MAX_EMBED_CHARS],
        lambda s: {"session_id": s.session_id},
    ),
    Source(
        LongTermMemory,
        index.MEMORY_VECTORS,
        # Archived memories are out of retrieval: they have no vector (see memory.memories).
        lambda: LongTermMemory.objects.active().filter(has_embedding=False),
        lambda m: m.content[:MAX_EMBED_CHARS],
        lambda m: {"memory_type": m.memory_type},
    ),
)


def delete_with_vectors(rows: QuerySet[Any]) -> int:
    """Delete rows of a source (messages, summaries or memories) with their vectors, in one
    transaction: a vector left behind would still take one of a KNN's k places."""
    (source,) = [source for source in SOURCES if source.model is rows.model]
    with transaction.atomic():
        ids = list(rows.values_list("pk", flat=True))
        if index.vector_index_status().enabled:
            index.vector_delete(source.table, ids)
        rows.delete()
    return len(ids)


def drop_vectors(rows: QuerySet[Any]) -> int:
    """Remove the vectors of rows that stay (archived memories): the rows no longer wait for
    one (`has_embedding` false, and the source's `pending` leaves them out)."""
    (source,) = [source for source in SOURCES if source.model is rows.model]
    with transaction.atomic():
        ids = list(rows.values_list("pk", flat=True))
        if index.vector_index_status().enabled:
            index.vector_delete(source.table, ids)
        source.model.objects.filter(pk__in=ids).update(has_embedding=False)
    return len(ids)


def pending_count() -> int:
    """Rows of every source still waiting for their vector."""
    return sum(source.pending().count() for source in SOURCES)


def _write(source: Source, batch: list[Any], vectors: list[list[float]]) -> int:
    with transaction.atomic():
        # Still pending: not embedded by another run meanwhile, nor archived.
        open_ids = set(
            source.pending().filter(pk__in=[row.pk for row in batch]).values_list("pk", flat=True)
        )
        for row, vector in zip(batch, vectors, strict=True):
            if row.pk not in open_ids:
                continue  # another run embedded it, or it was archived, meanwhile
            index.vector_put(
                source.table,
                row_id=row.pk,
                agent_id=row.agent_id,
                embedding=vector,
                metadata=source.metadata(row),
            )
        source.model.objects.filter(pk__in=open_ids).update(has_embedding=True)
    return len(open_ids)


def embed_pending(
    *,
    embedder: Embedder | None = None,
    batch_size: int | None = None,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Embed pending messages, summaries and memories (all, or about `limit` rows); returns
    how many got their vector.

    Raises EmbeddingError when the provider is down (the rest stays pending) and
    SignatureMismatch when the tables belong to another provider.
    """
    embedder = embedder or embeddings.configured_embedder()
    if embedder is None or not index.vector_index_status().enabled:
        return 0
    prepare_index(embedder.signature)
    batch_size = batch_size or settings.ORCA.embedding_batch_size or embedder.batch_size
    embedded = 0
    try:
        for source in SOURCES:
            remaining = None if limit is None else limit - embedded
            if remaining is not None and remaining <= 0:
                break
            embedded += _embed_source(source, embedder, batch_size, remaining, progress)
    except EmbeddingError as exc:
        _record(error=str(exc))
        raise
    _record(error=None)
    if embedded:
        index.maintain_agent_indexes()
    return embedded


def _embed_source(
    source: Source,
    embedder: Embedder,
    batch_size: int,
    limit: int | None,
    progress: Callable[[int], None] | None,
) -> int:
    embedded, after = 0, 0
    pending = source.pending().order_by("id")
    while limit is None or embedded < limit:
        # From the last batch on, not from the start: the rows before it are embedded or
        # skipped, and a scan from the start would pass them all again for every batch. A row
        # committed meanwhile below `after` (PostgreSQL's ids may commit out of order) queued
        # a run of its own, which finds it.
        batch = list(pending.filter(pk__gt=after)[:batch_size])
        if not batch:
            break
        after = batch[-1].pk
        try:
            vectors = embedder.embed([source.text(row) for row in batch])
        except InputRejected:
            done = _embed_one_by_one(source, embedder, batch)
        else:
            done = _write(source, batch, vectors)
        embedded += done
        if progress:
            progress(done)
    return embedded


def _embed_one_by_one(source: Source, embedder: Embedder, batch: list[Any]) -> int:
    """So that one text the provider refuses cannot block the rest of the backlog."""
    embedded = 0
    for row in batch:
        try:
            vectors = embedder.embed([source.text(row)])
        except InputRejected as exc:
            logger.warning(
                "%s %s cannot be embedded, skipped for now: %s", source.model.__name__, row.pk, exc
            )
            continue
        embedded += _write(source, [row], vectors)
    return embedded


@dataclass(frozen=True)
class QueryEmbedding:
    """A query's vector, or None and the reason vectors cannot help this query; with the
    thresholds of the model that made it (what its similarities mean)."""

    vector: tuple[float, ...] | None
    reason: str | None = None
    thresholds: Thresholds = DEFAULT_THRESHOLDS


def query_embedding(query: str, embedder: Embedder | None = None) -> QueryEmbedding:
    """The one path every query takes to its vector, for search and context alike: the index
    must be usable, the model must cover the query's language (MiniLM's vectors of Chinese
    are noise), the provider must answer."""
    embedder = embedder or embeddings.configured_embedder()
    status = vector_search_status(embedder)
    if not status.enabled:
        return QueryEmbedding(
            None,
            Phrase(
                gettext_noop("vector search is unavailable: %(reason)s"),
                reason=as_phrase(status.reason or ""),
            ),
        )
    if not embeddings.covers(embedder.signature, query):
        return QueryEmbedding(
            None,
            Phrase(
                gettext_noop(
                    "vectors not used: %(model)s is English-only and the query is Chinese, "
                    "Japanese or Korean"
                ),
                model=embedder.signature.model,
            ),
        )
    try:
        return QueryEmbedding(query_vector(embedder, query), thresholds=embedder.thresholds)
    except EmbeddingError as exc:
        why = Phrase(gettext_noop("the query could not be embedded: %(error)s"), error=str(exc))
        return QueryEmbedding(None, why)


@lru_cache(maxsize=1024)
def query_vector(embedder: Embedder, text: str) -> tuple[float, ...]:
    """A search query's embedding, cached: agents repeat queries, providers charge per call."""
    # A query never loads the model (a request must not wait for it): until the background
    # load ends, search and context degrade to lexical.
    not_loaded = _model_not_loaded(embedder)
    if not_loaded:
        raise EmbeddingError(not_loaded)
    return tuple(embedder.embed([text[:MAX_EMBED_CHARS]], query=True)[0])
