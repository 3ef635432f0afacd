"""The memory app's JSON endpoints, mounted at /api/v1/ by orca_memory.api.

Every endpoint but health sees only the data of the agent its API key belongs to
(`request.auth`); another agent's session, message or memory answers 404.
"""

# No `from __future__ import annotations` here: django-ninja builds its schemas from the
# annotations, and @paginate's wrapper cannot resolve postponed ones (pydantic then fails on
# the first request with "QueryParams is not fully defined").
from datetime import datetime
from typing import Annotated, Any, Literal

from django.conf import settings
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Header, Query, Router, Schema, Status
from ninja.pagination import paginate
from pydantic import AfterValidator, BeforeValidator, ValidationInfo, field_validator

from memory.context import context_build
from memory.context_items import Item, MemoryItem, RecalledItem, SummaryItem, WorkingItem
from memory.health import service_health
from memory.memories import (
    memories_of,
    memory_create,
    memory_delete,
    memory_expire,
    memory_update,
)
from memory.messages import (
    MAX_BATCH_MESSAGES,
    NewMessage,
    SessionEnded,
    message_keep,
    messages_keep,
    session_end,
    session_messages,
)
from memory.models import (
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryType,
    MessageType,
    Role,
    ShortTermMemory,
)
from memory.schemas import MessageOut, Text, TextSchema
from memory.search import MAX_K, Mode, SearchQuery, search
from memory.validation import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    check_datetime,
    check_idempotency_key,
    check_query,
    check_stored_identifier,
)

router = Router()


# --- schemas -------------------------------------------------------------------------------


def _moment(value: datetime, info: ValidationInfo) -> datetime:
    return check_datetime(info.field_name or "datetime", value)


# A date and time with its time zone (or epoch seconds), representable in UTC: a naive time
# is ambiguous, and 9999-12-31T23:30:00-01:00 overflows once converted.
Moment = Annotated[datetime, AfterValidator(_moment)]


class MessageIn(TextSchema):
    role: Role
    content: str = Text
    msg_type: MessageType = MessageType.NORMAL
    # Checked by the message flow (check_metadata), which answers 413 when it is too large.
    metadata: dict[str, Any] | None = None


class SessionOut(Schema):
    session_id: str
    message_count: int
    first_timestamp: datetime
    last_timestamp: datetime


class SummaryOut(Schema):
    id: int
    content: str
    source_count: int
    confidence: float
    created_at: datetime
    updated_at: datetime | None


class MemoryIn(TextSchema):
    content: str = Text
    memory_type: MemoryType
    confidence: float = Field(0.5, ge=0, le=1)
    expires_at: Moment | None = None
    source_session: str | None = None


class MemoryPatch(TextSchema):
    content: str | None = Field(None, min_length=1, pattern=r"\S")
    memory_type: MemoryType | None = None
    confidence: float | None = Field(None, ge=0, le=1)
    expires_at: Moment | None = None
    source_session: str | None = None


class MessageSourceOut(Schema):
    message_id: int
    session_id: str
    role: Role
    timestamp: datetime


class PersonSourceOut(Schema):
    written_by: str = Field(description="the person's actor: api, ui:<user>, admin:<user>")


class MemoryOut(Schema):
    id: int
    content: str
    memory_type: MemoryType
    source_session: str | None
    confidence: float
    access_count: int
    last_accessed: datetime | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime | None
    source_count: int
    curated: bool = Field(
        description="a person wrote or edited the text (API, dashboard, admin): consolidation "
        "may confirm the memory but keeps this text"
    )
    expired: bool
    # Supersession (issue 34): when the fact became true and when a newer memory replaced it.
    valid_from: datetime | None = Field(
        description="when the fact was first said (its earliest source message's time); null: "
        "since created_at"
    )
    valid_until: datetime | None = Field(
        description="when a newer memory (superseded_by) replaced it; null while current"
    )
    superseded_by: int | None = Field(
        description="the id of the memory that replaced it (it may have been deleted since)"
    )
    superseded: bool = Field(description="replaced by a newer memory: not current")
    attribute: str | None = Field(
        description="the person's single-valued attribute the text gives a value to (home, "
        "employer, partner…): a newer value of it supersedes this one; null for none"
    )
    sources: list[MessageSourceOut | PersonSourceOut] = Field(
        description="where the memory came from: the messages an extraction found it in, "
        "oldest first, then the people who wrote or reworded it"
    )

    @staticmethod
    def resolve_expired(memory: LongTermMemory) -> bool:
        return memory.is_expired()

    @staticmethod
    def resolve_superseded_by(memory: LongTermMemory) -> int | None:
        return memory.superseded_by_id

    @staticmethod
    def resolve_attribute(memory: LongTermMemory) -> str | None:
        return memory.attribute or None

    @staticmethod
    def resolve_superseded(memory: LongTermMemory) -> bool:
        return memory.is_superseded()

    @staticmethod
    def resolve_sources(memory: LongTermMemory) -> list[dict[str, Any]]:
        return [
            {"written_by": source.written_by}
            if source.message is None
            else {
                "message_id": source.message.pk,
                "session_id": source.message.session_id,
                "role": source.message.role,
                "timestamp": source.message.timestamp,
            }
            for source in memory.source_list()
        ]


class MemoryHistoryOut(Schema):
    action: str
    actor: str
    old_content: str | None
    new_content: str | None
    changes: dict[str, Any] | None = Field(description="the fields this change set, new values")
    old_values: dict[str, Any] | None = Field(
        description="the same fields' values before (on a delete, every field); null on "
        "changes recorded before the history kept them"
    )
    at: datetime


class SessionEndOut(Schema):
    session_id: str
    consolidation: Literal["queued", "deferred"] = Field(
        description="queued: the worker consolidates the session as soon as it is free; "
        "deferred: the agent was consolidated less than 30 seconds ago, so it runs at run_after"
    )
    run_after: datetime | None = Field(
        description="when a deferred consolidation runs (null when queued)"
    )


class MemoryFilters(TextSchema):
    type: MemoryType | None = None
    q: str | None = Field(None, description="text to search for (words or Chinese)")
    include_expired: bool = False
    include_superseded: bool = Field(
        False, description="list the memories newer ones replaced too (by default: current only)"
    )
    as_of: Moment | None = Field(
        None,
        description="the memories that held at this time: said by then and not yet replaced "
        "(not with include_superseded)",
    )


class SearchFilters(TextSchema):
    q: str = Field(
        description="what to look for, in any language: at least one letter or digit (a "
        "query of only spaces, punctuation, symbols or emoji has nothing to search for)"
    )
    mode: Mode = "hybrid"
    k: int = Field(10, ge=1, le=MAX_K)
    session_id: str | None = None
    role: Role | None = None
    msg_type: MessageType | None = None
    since: Moment | None = None
    until: Moment | None = None
    exclude_session: str | None = Field(
        None,
        description="leave this session's messages out (the caller's current session), "
        "before the lists are fused",
    )

    @field_validator("q")
    @classmethod
    def _searchable(cls, value: str) -> str:
        return check_query("q", value)

    def asked(self) -> SearchQuery:
        """The search these fields ask for (the API's and MCP's), as the flow takes it."""
        return SearchQuery(
            self.q,
            mode=self.mode,
            k=self.k,
            session_id=self.session_id,
            role=self.role,
            msg_type=self.msg_type,
            since=self.since,
            until=self.until,
            exclude_session=self.exclude_session,
        )


class SearchHitOut(Schema):
    message: MessageOut
    score: float = Field(description="the score hits are ordered by (fused in hybrid mode)")
    lexical_score: float | None = Field(description="BM25 of the FTS5 match, higher is better")
    vector_score: float | None = Field(description="cosine similarity to the query")
    lexical_rank: int | None
    vector_rank: int | None
    raised: list[str] = Field(
        description='why a hybrid search raised it above its words and meaning: "said in '
        'the period the query names", "tells of its own day, and the query asks when", '
        '"the person\'s words that answer it, known from a memory" (the current value of an '
        'attribute asked for, a preference a recommendation must respect), "said what a memory '
        'about the query holds" (a question asking to count or list what the person told of)'
    )


class SearchOut(Schema):
    query: str
    mode: str = Field(description="the mode that answered (lexical when vectors are unusable)")
    degraded: list[str] = Field(description="why the requested mode could not be used")
    hits: list[SearchHitOut]


class ContextIn(TextSchema):
    query: str | None = Field(None, description="what the next LLM call is about, if known")
    model_window: int | None = Field(
        None, ge=256, le=10_000_000, description="the model's window; default [orca] model_window"
    )


class ContextItemOut(Schema):
    id: int
    content: str
    tokens: int = Field(description="as rendered in the prompt, labels included")
    score: float | None
    method: str = Field(
        description="what chose the item: newest, similarity, lexical, access_count (most "
        "used, for a call with no query or no way to match it), identity (a fact or preference "
        "for an identity question), attribute (the current value of what a question asks for: "
        "home, employer, partner…), hybrid, vector or neighbour (next to a recalled message)"
    )
    why: str = Field(
        description='why it is there, e.g. "similarity 0.42 >= 0.35", "matched 2 of 3 query '
        'words", "identity question: a preference", "no query: most used"'
    )
    details: dict[str, Any]

    @staticmethod
    def resolve_details(item: Item) -> dict[str, Any]:
        """What the item's layer knows of it, by name (the preview reads the same fields)."""
        match item:
            case WorkingItem():
                details: dict[str, Any] = {"role": item.role}
                if item.left_out_tool_calls:
                    details["left_out_tool_calls"] = item.left_out_tool_calls
                return details
            case SummaryItem():
                return {"reply_id": item.reply_id}
            case MemoryItem():
                return {
                    "memory_type": item.memory_type,
                    "expired": item.expired,
                    "confidence": item.confidence,
                    "access_count": item.access_count,
                    "curated": item.curated,
                    "source_ids": list(item.source_ids),
                }
            case RecalledItem():
                return {
                    "session_id": item.session_id,
                    "timestamp": item.timestamp,
                    "role": item.role,
                    "line": item.line,
                }
        return {}


class LeftOutOut(Schema):
    id: int
    reason: str = Field(
        description="below the relevance floor: similarity 0.12 < 0.35, matched 1 of 3 query "
        "words; over budget, ranked below the N chosen, not embedded yet, in working memory, "
        "in a summarised turn, its turn is in working memory, says the same as message N"
    )
    score: float | None = Field(None, description="the candidate's match score, if it had one")


class ContextLayerOut(Schema):
    share: int = Field(description="the layer's own part of the budget")
    budget: int = Field(description="its share plus what other layers left unused")
    used: int = Field(description="the items' tokens plus the overhead")
    overhead: int = Field(description="tokens of the section and session headers the items need")
    method: str = Field(
        description="how items were chosen: newest, similarity, lexical, access_count, hybrid, "
        "vector, mixed (see each item) or none"
    )
    items: list[ContextItemOut]
    left_out: list[LeftOutOut] = Field(description="candidates not sent, and why")


class ContextExplanationOut(Schema):
    model_window: int
    budget: int = Field(description="60% of the window")
    used: int = Field(description="the layers' tokens and the date line's")
    date_line: str | None = Field(
        description="the system message's first line: today's date, weekday and time in UTC "
        "(the time zone of every date a context shows), in Chinese when the query is mostly "
        "Chinese; null when there is no system message"
    )
    date_line_tokens: int = Field(description="its tokens, with the blank line after it")
    query: str | None = Field(description="what the layers were chosen for")
    query_source: str = Field(description="request, newest user message, or none")
    layers: dict[str, ContextLayerOut] = Field(
        description="working, short_term, long_term and recall"
    )
    cuts: list[str] = Field(description="what was cut to fit the budget, in the design's order")
    degraded: list[str]
    identity_recall: bool


class ContextOut(Schema):
    messages: list[dict[str, Any]] = Field(
        description="ready to send to an OpenAI-compatible chat API: system memory, then the "
        "session; a tool result keeps `tool_call_id` only when its call is sent too"
    )
    explanation: ContextExplanationOut


# --- health --------------------------------------------------------------------------------


class TextIndexHealthOut(Schema):
    indexes: int = Field(description="agents whose messages it holds (20,000 or more each)")
    rows: int
    bytes: int
    limit_bytes: int = Field(description="ORCA_TEXT_INDEX_MB; 0: off, FTS5 answers")


class DatabaseHealthOut(Schema):
    ok: bool
    engine: str | None = Field(None, description="sqlite or postgresql")
    sqlite_version: str | None = None
    postgres_version: str | None = None
    journal_mode: str | None = None
    text_index: TextIndexHealthOut | None = Field(
        None,
        description="SQLite: the derived text index that answers recall's text query for "
        "large agents in the process that answered this request (each web worker has its own)",
    )
    error: str | None = None


class MemoryIndexHealthOut(Schema):
    matrices: int = Field(description="(table, agent) matrices held")
    graphs: int = Field(description="matrices that also keep an approximate (HNSW) graph")
    vectors: int
    bytes: int
    limit_bytes: int = Field(description="ORCA_VECTOR_CACHE_MB; 0: off, vec0 answers")
    mapped_bytes: int = Field(
        description="the saved graphs this process maps read only (page cache shared by the "
        "processes that map them, not counted in `bytes`)"
    )


class KnnHealthOut(Schema):
    path: Literal["memory_index", "vec0_scan", "pgvector"] = Field(
        description="what answers KNN: SQLite's derived index in each process, sqlite-vec's "
        "own scan, or PostgreSQL's pgvector"
    )
    reason: str


class VectorHealthOut(Schema):
    enabled: bool = Field(
        description="the vector extension (sqlite-vec or pgvector) there and the vector tables "
        "present"
    )
    reason: str | None = None
    sqlite_vec_version: str | None = None
    pgvector_version: str | None = None
    knn: KnnHealthOut | None = Field(None, description="null while vector search is off")
    memory_index: MemoryIndexHealthOut | None = Field(
        None,
        description="SQLite: the derived in-memory index that answers KNN in the process that "
        "answered this request (each web worker has its own)",
    )


class EmbeddingHealthOut(Schema):
    provider: str = Field(description="siliconflow, openai, local or none")
    model: str | None = None
    dimension: int | None = None
    languages: str | None = Field(
        None, description="what the bundled model's vectors mean something for (local only)"
    )
    ready: bool | None = Field(None, description="vector search can answer with this provider")
    reason: str | None = None
    pending: int | None = Field(
        description="messages waiting for their embedding; null when no provider will write them"
    )
    last_success_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    failing: bool | None = None


class WorkerHealthOut(Schema):
    needed: bool = Field(description="false when tasks run as they are queued (no db_worker)")
    ok: bool = Field(description="a task worker runs and polls")
    running: int = Field(description="workers whose heartbeat is under 30 s old")
    reason: str | None = Field(None, description="why not ok")
    last_seen_at: datetime | None = None
    last_error: str | None = Field(None, description="the database error it last backed off on")
    last_error_at: datetime | None = None


class ChatUsageOut(Schema):
    calls: int = Field(description="requests sent to the chat model, retries included")
    failures: int = Field(description="requests that brought no answer")
    invalid_answers: int = Field(description="answers that were not the JSON asked for")
    fallbacks: int = Field(description="summaries and extractions made offline as it failed")
    prompt_tokens: int = Field(description="from the answers' `usage`, when the server sends it")
    completion_tokens: int
    mean_latency_ms: float | None = None
    last_latency_ms: float | None = None


class LlmHealthOut(Schema):
    configured: bool = Field(description="false: summaries and extraction are made offline")
    provider: str = Field(
        description="none, custom, or a preset: siliconflow, openai, ollama, vllm, llamacpp"
    )
    host: str | None = Field(None, description="the server's host and port")
    model: str | None = None
    this_process: ChatUsageOut = Field(
        description="the web process that answered, since it started"
    )
    workers: ChatUsageOut | None = Field(
        None, description="the running task workers, since each started (their heartbeats)"
    )


class HealthOut(Schema):
    status: str
    database: DatabaseHealthOut
    vector_search: VectorHealthOut
    embedding: EmbeddingHealthOut
    worker: WorkerHealthOut
    llm: LlmHealthOut


@router.get("/health", response={200: HealthOut, 503: HealthOut}, auth=None, tags=["health"])
def health(request: HttpRequest) -> Status[dict[str, object]]:
    """Database, vector search and embedding backlog. Needs no API key."""
    report = service_health()
    return Status(503 if report.status == "error" else 200, report.as_dict())


# --- sessions and messages -----------------------------------------------------------------


class KeptInJsonlOut(Schema):
    detail: str
    stored_in: Literal["jsonl"]


IDEMPOTENCY_HEADER = "Idempotency-Key"


def _idempotency_key(value: object) -> object:
    return None if value is None else check_idempotency_key(IDEMPOTENCY_HEADER, value)


# The Param comes last: django-ninja reads only Annotated's last item as the parameter's source.
IdempotencyKeyHeader = Annotated[
    str | None,
    BeforeValidator(_idempotency_key),
    Header(
        None,
        alias=IDEMPOTENCY_HEADER,
        description="optional, 1-200 printable ASCII characters of the client's choosing: a "
        "retry with the same key within 24 hours answers the messages stored the first time "
        "(201, as they are now) and stores nothing again; the same key with another session "
        "or other messages answers 409, as does a retry whose messages were deleted since. "
        "Not recorded when the messages go to the JSONL backup (202)",
        # For OpenAPI: the validator before them refuses what they would, with its message.
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        pattern="^[ -~]*$",
    ),
]


def kept_in_jsonl(count: int) -> dict[str, str]:
    """The 202 answer (the API's and MCP's) for messages kept in the JSONL backup."""
    kept = "the message was kept" if count == 1 else f"the {count} messages are"
    return {
        "detail": f"the database is unavailable; {kept} in the JSONL backup and will be "
        "imported once it is back",
        "stored_in": "jsonl",
    }


@router.post(
    "/sessions/{session_id}/messages",
    response={201: MessageOut, 202: KeptInJsonlOut},
    tags=["messages"],
)
def post_message(
    request: HttpRequest,
    session_id: str,
    payload: MessageIn,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Status[Any]:
    """Store one message of a conversation; the session starts with its first message.

    202 when the database is unavailable and the JSONL backup is on: the message is kept in
    `<data_dir>/jsonl/` and `manage.py migrate_jsonl` brings it in later. With an
    `Idempotency-Key`, a retry stores nothing twice.
    """
    kept = message_keep(
        agent_id=request.auth,
        session_id=session_id,
        message=NewMessage(**payload.dict()),
        idempotency_key=idempotency_key,
    )
    if not isinstance(kept, MainMessage):
        return Status(202, kept_in_jsonl(1))
    return Status(201, kept)


class MessagesIn(Schema):
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES)


class MessagesOut(Schema):
    messages: list[MessageOut] = Field(description="as stored, in the order sent")


@router.post(
    "/sessions/{session_id}/messages:batch",
    response={201: MessagesOut, 202: KeptInJsonlOut},
    tags=["messages"],
)
def post_messages(
    request: HttpRequest,
    session_id: str,
    payload: MessagesIn,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Status[Any]:
    """Store up to 1,000 messages of a conversation in their order, all or none, as one
    message is stored: a 422 (or 413) lists every message at fault by its index.

    202 as for one message: the database is unavailable, the messages are in the backup.
    With an `Idempotency-Key`, a retry stores nothing twice.
    """
    new = [NewMessage(**message.dict()) for message in payload.messages]
    kept = messages_keep(
        agent_id=request.auth,
        session_id=session_id,
        messages=new,
        idempotency_key=idempotency_key,
    )
    if not isinstance(kept, list):
        return Status(202, kept_in_jsonl(len(new)))
    return Status(201, {"messages": kept})


@router.get("/sessions", response=list[SessionOut], tags=["messages"])
@paginate
def list_sessions(request: HttpRequest) -> Any:
    """The agent's sessions, most recently active first."""
    return MainMessage.objects.filter(agent_id=request.auth).sessions()


def session_or_404(agent_id: str, session_id: str) -> Any:
    """The agent's session's messages (the API's and MCP's); another agent's is not found."""
    messages = session_messages(agent_id, session_id)
    if not messages.exists():
        raise Http404("no such session")
    return messages


@router.get("/sessions/{session_id}/messages", response=list[MessageOut], tags=["messages"])
@paginate
def list_messages(request: HttpRequest, session_id: str) -> Any:
    """The session's messages, oldest first."""
    return session_or_404(request.auth, session_id)


def message_or_404(agent_id: str, message_id: int) -> MainMessage:
    """The agent's message (the API's and MCP's): a message of a session, never a sub-agent
    transcript's (their ids are another table's); another agent's is not found."""
    return get_object_or_404(MainMessage, pk=message_id, agent_id=agent_id)


@router.get("/messages/{int:message_id}", response=MessageOut, tags=["messages"])
def get_message(request: HttpRequest, message_id: int) -> Any:
    """One of the agent's messages, whole: what a recalled line of a context names as `#id`
    (shown cut there when it is long), with its session, role, type, time and metadata."""
    return message_or_404(request.auth, message_id)


@router.post("/sessions/{session_id}/context", response=ContextOut, tags=["context"])
def build_context(request: HttpRequest, session_id: str, payload: ContextIn) -> dict[str, Any]:
    """The messages to send for the session's next LLM call, within 60% of `model_window`,
    with an explanation of every layer. Works for a session with no messages yet."""
    check_stored_identifier("session_id", session_id)  # a session stored before today's rule too
    context = context_build(
        agent_id=request.auth,
        session_id=session_id,
        query=payload.query,
        model_window=payload.model_window or settings.ORCA.model_window,
    )
    return {
        "messages": context.messages,
        "explanation": {
            "model_window": context.window,
            "budget": context.budget,
            "used": context.used,
            "date_line": context.date_line,
            "date_line_tokens": context.date_line_tokens,
            "query": context.query,
            "query_source": context.query_source,
            "layers": context.layers,
            "cuts": context.cuts,
            "degraded": context.degraded,
            "identity_recall": context.identity_recall,
        },
    }


@router.post("/sessions/{session_id}/end", response={202: SessionEndOut}, tags=["memories"])
def end_session(request: HttpRequest, session_id: str) -> Status[SessionEnded]:
    """The session is over: the worker consolidates it into long-term memories.

    Never dropped: `queued` runs as soon as the worker is free; `deferred` waits for the end
    of the agent's 30-second window, `run_after`. If the session already waits, the request
    joins that run. A run covers what came since the session's last one."""
    ended = session_end(agent_id=request.auth, session_id=session_id)
    if ended is None:
        raise Http404("no such session")
    return Status(202, ended)


@router.get("/sessions/{session_id}/summaries", response=list[SummaryOut], tags=["memories"])
@paginate
def list_summaries(request: HttpRequest, session_id: str) -> Any:
    """The session's short-term summaries, newest first."""
    session_or_404(request.auth, session_id)
    return ShortTermMemory.objects.of_session(request.auth, session_id)


@router.get("/search", response=SearchOut, tags=["search"])
def search_messages(request: HttpRequest, filters: Query[SearchFilters]) -> dict[str, Any]:
    """The agent's messages best matching `q`; sub-agent transcripts are never searched.

    A message stored in the last 10 minutes whose text is `q` itself (the question the agent
    just stored) is left out, as is `exclude_session`: neither takes a place or changes how
    the others rank. A query too long for a URL goes by `POST /search`."""
    return _search_answer(request.auth, filters)


@router.post("/search", response=SearchOut, tags=["search"])
def search_messages_by_post(request: HttpRequest, filters: SearchFilters) -> dict[str, Any]:
    """`GET /search` with the same fields in a JSON body, and the same answer: for queries
    longer than a URL may be (gunicorn refuses a request line over 4,094 bytes)."""
    return _search_answer(request.auth, filters)


def _search_answer(agent_id: str, filters: SearchFilters) -> dict[str, Any]:
    result = search(agent_id=agent_id, query=filters.asked())
    return {
        "query": filters.q,
        "mode": result.mode,
        "degraded": result.degraded,
        "hits": result.hits,
    }


# --- long-term memories --------------------------------------------------------------------


def memory_or_404(agent_id: str, memory_id: int) -> LongTermMemory:
    """The agent's memory (the API's and MCP's); another agent's is not found."""
    return get_object_or_404(LongTermMemory.objects.active(), pk=memory_id, agent_id=agent_id)


@router.get("/memories", response=list[MemoryOut], tags=["memories"])
@paginate
def list_memories(request: HttpRequest, filters: Query[MemoryFilters]) -> Any:
    """The agent's current long-term memories (none a newer one replaced), or the superseded
    too, or those that held `as_of` a time; with `q`, best match first."""
    return memories_of(
        request.auth,
        memory_type=filters.type,
        query=filters.q,
        include_expired=filters.include_expired,
        include_superseded=filters.include_superseded,
        as_of=filters.as_of,
    )


@router.post("/memories", response={201: MemoryOut}, tags=["memories"])
def create_memory(request: HttpRequest, payload: MemoryIn) -> Status[Any]:
    return Status(201, memory_create(agent_id=request.auth, actor="api", **payload.dict()))


@router.get("/memories/{int:memory_id}", response=MemoryOut, tags=["memories"])
def get_memory(request: HttpRequest, memory_id: int) -> Any:
    return memory_or_404(request.auth, memory_id)


@router.patch("/memories/{int:memory_id}", response=MemoryOut, tags=["memories"])
def patch_memory(request: HttpRequest, memory_id: int, payload: MemoryPatch) -> Any:
    """Change the fields given; `"expires_at": null` makes an expired memory active again."""
    memory = memory_or_404(request.auth, memory_id)
    return memory_update(memory, actor="api", **payload.dict(exclude_unset=True))


@router.get("/memories/{int:memory_id}/history", response=list[MemoryHistoryOut], tags=["memories"])
@paginate
def memory_history(request: HttpRequest, memory_id: int) -> Any:
    """Every change of the memory, newest first: who, what, when, the text before and after."""
    memory = memory_or_404(request.auth, memory_id)
    return LongTermMemoryHistory.objects.filter(memory_id=memory.pk).order_by("-at", "-id")


@router.delete("/memories/{int:memory_id}", response={204: None}, tags=["memories"])
def delete_memory(request: HttpRequest, memory_id: int) -> Status[None]:
    memory_delete(memory_or_404(request.auth, memory_id), actor="api")
    return Status(204, None)


@router.post("/memories/{int:memory_id}/expire", response=MemoryOut, tags=["memories"])
def expire_memory(request: HttpRequest, memory_id: int) -> Any:
    """Expire the memory now: it stays, down-weighted in retrieval, until deleted."""
    return memory_expire(memory_or_404(request.auth, memory_id), actor="api")
