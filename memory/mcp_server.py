"""The memory as a Model Context Protocol server: the tools an agent runtime calls over MCP.

Each tool is a thin call of the flow the JSON API calls (memory/api.py), validated by the API's
own schemas, so that it refuses what the API refuses with the API's message, as a tool error
(`is_error`). A call sees only the agent of the API key it came with (`current_agent`).

Served two ways: at /mcp by the web server, over Streamable HTTP (`mcp_endpoint`, a Django view,
so `make run`'s gunicorn serves it beside the API), and over stdio by `manage.py mcp_stdio`.
docs/ARCHITECTURE.md says why it is a view in the WSGI application rather than an ASGI app.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import pydantic_core
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from mcp.server.mcpserver import Context as ToolContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import BaseModel, Field, ValidationError

from memory import outage
from memory.api import (
    ContextIn,
    MemoryFilters,
    MemoryIn,
    MemoryOut,
    MemoryPatch,
    MessageIn,
    SearchFilters,
    SearchOut,
    SessionEndOut,
    kept_in_jsonl,
    memory_or_404,
    message_or_404,
    session_or_404,
)
from memory.api_forget import ForgetIn, forget_answer
from memory.auth import UNAUTHORIZED_DETAIL, agent_for_key, bearer_key
from memory.context import Context, context_build
from memory.jsonl import BackupFailed
from memory.memories import memories_of, memory_create, memory_expire, memory_update
from memory.messages import NewMessage, message_keep, session_end
from memory.models import MemoryType, MessageType, Role
from memory.schemas import MessageOut
from memory.search import MAX_K, Mode
from memory.search import search as search_messages
from memory.validation import (
    MAX_ID,
    Conflict,
    InvalidInput,
    check_idempotency_key,
    check_stored_identifier,
    row_id,
)
from orca_memory.core.errors import Loc, errors_detail, field_errors, jsonrpc_error

logger = logging.getLogger(__name__)

# The agent whose API key came with the call: set by `mcp_endpoint` for each request, and once
# by `mcp_stdio` for its process. Tasks and threads started while it is set see it too.
current_agent: ContextVar[str] = ContextVar("orca_mcp_agent")
# The most memories list_memories returns: a tool's answer goes into a prompt.
MEMORY_LIST_LIMIT = 50
# Who changed a memory, as its history names them (the JSON API's changes say `api`).
ACTOR = "mcp"
# What the API's detail says of an object another agent owns, or none does.
NOT_FOUND = "Not Found"


class MemoryServer(MCPServer):
    """The SDK's server, with a tool's arguments refused as the API refuses them."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: ToolContext | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK checks the arguments' types (a choice among its values, an id's range)
        before the tool runs, and answers pydantic's own text, with its URL. Refused here in
        the API's sentence instead, `role: Input should be 'user', ...`, as a tool error."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            invalid = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(invalid, ValidationError):
                raise
            # Located as the API locates a body's fields, under where they were sent.
            errors = [(("arguments", *loc), msg) for loc, msg in field_errors(invalid.errors())]
            raise ToolError(f"Error executing tool {name}: {errors_detail(errors)}") from invalid


server = MemoryServer(
    "orca-memory",
    version=settings.VERSION,
    instructions=(
        "Long-term memory for this agent. Store every message of a conversation with "
        "store_message; before each LLM call, get_context gives the messages to send (recent "
        "turns, summaries, memories and relevant earlier messages) within the model's window. "
        "search finds earlier messages, get_message one message whole (a recalled line's "
        "#id); remember, list_memories, update_memory and expire_memory curate durable facts "
        "and preferences; end_session turns a finished session into memories."
    ),
    # Nothing outlives a request (stateless Streamable HTTP): no subscriptions stream.
    subscriptions=False,
)


def _validated(schema: type[BaseModel], names: dict[str, str] | None = None, **fields: Any) -> Any:
    """The arguments through the API's schema for them, its errors as a tool error with the
    API's message; `names` maps a schema field to its argument's name where they differ."""
    try:
        return schema(**{key: value for key, value in fields.items() if value is not None})
    except ValidationError as exc:
        errors = [_renamed(loc, msg, names or {}) for loc, msg in field_errors(exc.errors())]
        raise ToolError(errors_detail(errors)) from exc


def _renamed(loc: Loc, msg: str, names: dict[str, str]) -> tuple[Loc, str]:
    """An error of the schema's field named as the tool's argument, where the message names
    it too (the text checks do: "q must not contain NUL characters")."""
    field = str(loc[0]) if loc else ""
    if field not in names:
        return loc, msg
    if msg.startswith(f"{field} "):
        msg = names[field] + msg.removeprefix(field)
    return (names[field], *loc[1:]), msg


def _django[**P, T](
    flow: Callable[P, T],
    *,
    refused: type[Exception] = ToolError,
    missing: type[Exception] = ToolError,
) -> Callable[P, Awaitable[T]]:
    """The tool's (or resource's) body in the request's own thread, where Django's ORM may run
    (it is synchronous) on the request's connection, which Django closes after the request
    (under `mcp_stdio`, in the one thread that keeps the process's connection).
    The API's errors become `refused` (a 422, 409 or 503 of the API) and `missing` (a 404),
    with the API's messages."""
    call = sync_to_async(flow, thread_sensitive=True)

    @functools.wraps(flow)
    async def handler(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await call(*args, **kwargs)
        except (InvalidInput, Conflict) as exc:  # ContentTooLarge is an InvalidInput
            raise refused(str(exc)) from exc
        except Http404 as exc:
            raise missing(NOT_FOUND) from exc
        except BackupFailed as exc:
            raise refused(outage.backup_failed_detail(exc)) from exc
        except (OperationalError, InterfaceError) as exc:
            if not outage.is_unavailable(exc):
                raise
            logger.error("Database unavailable in an MCP call: %s", exc)
            raise refused(outage.unavailable_detail(exc)) from exc

    # The description a model reads: the docstring without its source indentation.
    handler.__doc__ = " ".join((flow.__doc__ or "").split())
    return handler


def _memory_out(memory: Any) -> dict[str, Any]:
    return MemoryOut.from_orm(memory).model_dump(mode="json")


# --- tools ---------------------------------------------------------------------------------

SessionId = Annotated[
    str,
    Field(
        description="the conversation's id, chosen by the caller (1-200 bytes, no '/' or control "
        "characters); a session starts with its first message"
    ),
]
MemoryId = Annotated[int, Field(ge=1, le=MAX_ID, description="the memory's id")]
MessageId = Annotated[
    int, Field(ge=1, le=MAX_ID, description="the message's id: #123 in a recalled line is 123")
]
Moment = Annotated[
    str | None,
    Field(description="an ISO 8601 date and time with its time zone, as 2026-05-01T09:00:00Z"),
]
Confidence = Annotated[float | None, Field(description="how sure the memory is, 0 to 1")]
MemoryTypeArg = Literal[tuple(MemoryType.values)]  # type: ignore[valid-type]
RoleArg = Literal[tuple(Role.values)]  # type: ignore[valid-type]
MessageTypeArg = Literal[tuple(MessageType.values)]  # type: ignore[valid-type]
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


@server.tool(annotations=ToolAnnotations(idempotentHint=False, openWorldHint=False))
@_django
def store_message(
    session_id: SessionId,
    role: Annotated[RoleArg, Field(description="who said it")],
    content: Annotated[str, Field(description="the message's text, any language")],
    msg_type: Annotated[
        MessageTypeArg,
        Field(
            description="what kind of message: normal, or a fact, todo, decision, preference "
            "or error the agent wants to mark"
        ),
    ] = MessageType.NORMAL.value,
    metadata: Annotated[
        dict[str, Any] | None, Field(description="any JSON object kept with the message")
    ] = None,
    client_id: Annotated[
        str | None,
        Field(
            description="optional, 1-200 printable ASCII characters of your choosing, new for "
            "each message: calling again with the same client_id within 24 hours (a retry "
            "after a lost answer) returns the message stored the first time and stores "
            "nothing again; the same client_id with another message is refused. The API's "
            "Idempotency-Key header, which shares its keys"
        ),
    ] = None,
) -> dict[str, Any]:
    """Store one message of a conversation (the user's, the assistant's, a tool's). Store every
    message as it happens: get_context and search work from what is stored."""
    message = _validated(
        MessageIn, role=role, content=content, msg_type=msg_type, metadata=metadata
    )
    if client_id is not None:
        check_idempotency_key("client_id", client_id)
    kept = message_keep(
        agent_id=current_agent.get(),
        session_id=session_id,
        message=NewMessage(**message.dict()),
        idempotency_key=client_id,
    )
    if isinstance(kept, Path):
        return kept_in_jsonl(1)
    return MessageOut.from_orm(kept).model_dump(mode="json")


def explain(context: Context) -> str:
    """What went into the context, in a few lines a model can read."""
    lines = [
        f"{context.used} of {context.budget} tokens used (60% of a {context.window}-token "
        f"window); chosen for: {context.query or 'no query'} ({context.query_source})."
    ]
    for name, layer in context.layers.items():
        left_out = f", {len(layer.left_out)} left out" if layer.left_out else ""
        lines.append(
            f"{name}: {len(layer.items)} items, {layer.used} tokens, by {layer.method}{left_out}"
        )
    if context.date_line is not None:
        lines.append(f"date line: {context.date_line_tokens} tokens")
    lines += [f"cut: {cut}" for cut in context.cuts]
    lines += [f"degraded: {reason}" for reason in context.degraded]
    return "\n".join(lines)


@server.tool(annotations=ToolAnnotations(openWorldHint=False))
@_django
def get_context(
    session_id: SessionId,
    query: Annotated[
        str | None,
        Field(description="what the next LLM call is about; by default the newest user message"),
    ] = None,
    model_window: Annotated[
        int | None,
        Field(description="the model's context window in tokens (256 to 10,000,000)"),
    ] = None,
) -> dict[str, Any]:
    """The messages to send for the session's next LLM call, ready for an OpenAI-compatible
    chat API: a system message with what is remembered (summaries, long-term memories, relevant
    earlier messages of any session), then the session's recent turns, within 60% of
    model_window; with a short explanation of what went in and what was left out."""
    check_stored_identifier("session_id", session_id)
    asked = _validated(ContextIn, query=query, model_window=model_window)
    context = context_build(
        agent_id=current_agent.get(),
        session_id=session_id,
        query=asked.query,
        model_window=asked.model_window or settings.ORCA.model_window,
    )
    return {"messages": context.messages, "explanation": explain(context)}


@server.tool(annotations=READ_ONLY)
@_django
def search(
    query: Annotated[str, Field(description="what to look for, in any language")],
    mode: Annotated[
        Mode,
        Field(description="hybrid (words and meaning), lexical (words) or vector (meaning)"),
    ] = "hybrid",
    k: Annotated[int, Field(description=f"how many messages, 1 to {MAX_K}")] = 10,
    session_id: Annotated[str | None, Field(description="only this session's messages")] = None,
    role: Annotated[RoleArg | None, Field(description="only messages of this role")] = None,
    since: Moment = None,
    until: Moment = None,
) -> dict[str, Any]:
    """The agent's earlier messages best matching the query, from every session (or one), best
    first, each with its session, time and score. since/until bound the messages' times."""
    filters = _validated(
        SearchFilters,
        {"q": "query"},
        q=query,
        mode=mode,
        k=k,
        session_id=session_id,
        role=role,
        since=since,
        until=until,
    )
    result = search_messages(agent_id=current_agent.get(), query=filters.asked())
    found = {"query": filters.q, "mode": result.mode, "degraded": result.degraded}
    return SearchOut.model_validate({**found, "hits": result.hits}).model_dump(mode="json")


@server.tool(annotations=READ_ONLY)
@_django
def get_message(message_id: MessageId) -> dict[str, Any]:
    """One of the agent's messages, whole, with its session, role, type, time and metadata:
    the message a line of get_context's recalled conversations names as #id (a long message
    is shown cut there), or a search hit's."""
    return MessageOut.from_orm(message_or_404(current_agent.get(), message_id)).model_dump(
        mode="json"
    )


@server.tool(annotations=ToolAnnotations(idempotentHint=False, openWorldHint=False))
@_django
def remember(
    content: Annotated[
        str, Field(description="the preference, fact, decision or project, in one sentence")
    ],
    memory_type: Annotated[
        MemoryTypeArg,
        Field(description="preference, fact, decision or project"),
    ],
    confidence: Confidence = None,
    expires_at: Moment = None,
) -> dict[str, Any]:
    """Keep a long-term memory of the agent: get_context gives the relevant ones in every
    session from now on. Returns the memory with its id."""
    memory = _validated(
        MemoryIn,
        content=content,
        memory_type=memory_type,
        confidence=confidence,
        expires_at=expires_at,
    )
    created = memory_create(agent_id=current_agent.get(), actor=ACTOR, **memory.dict())
    return _memory_out(created)


@server.tool(annotations=READ_ONLY)
@_django
def list_memories(
    query: Annotated[str | None, Field(description="text to look for (words or Chinese)")] = None,
    memory_type: Annotated[MemoryTypeArg | None, Field(description="only this type")] = None,
    state: Annotated[
        Literal["active", "all"],
        Field(
            description="active: current, not expired (the default); all: expired ones and "
            "those newer memories replaced (superseded) too"
        ),
    ] = "active",
) -> dict[str, Any]:
    """The agent's long-term memories, best match first with a query, else newest first: at
    most 50, and how many there are in all."""
    filters = _validated(
        MemoryFilters,
        {"q": "query", "type": "memory_type"},
        q=query,
        type=memory_type,
        include_expired=state == "all",
        include_superseded=state == "all",
    )
    memories = memories_of(
        current_agent.get(),
        memory_type=filters.type,
        query=filters.q,
        include_expired=filters.include_expired,
        include_superseded=filters.include_superseded,
    )
    shown = [_memory_out(memory) for memory in memories[:MEMORY_LIST_LIMIT]]
    # Counted in SQL, unless a text search has ranked them already (as the API's pages count).
    count = memories.count() if isinstance(memories, QuerySet) else len(memories)
    return {"count": count, "memories": shown}


@server.tool(annotations=ToolAnnotations(idempotentHint=True, openWorldHint=False))
@_django
def update_memory(
    memory_id: MemoryId,
    content: Annotated[str | None, Field(description="the new text")] = None,
    memory_type: Annotated[MemoryTypeArg | None, Field(description="the new type")] = None,
    confidence: Confidence = None,
    expires_at: Moment = None,
) -> dict[str, Any]:
    """Change a long-term memory: the arguments given replace its values, the others stay.
    Every change is kept in the memory's history."""
    patch = _validated(
        MemoryPatch,
        content=content,
        memory_type=memory_type,
        confidence=confidence,
        expires_at=expires_at,
    )
    memory = memory_or_404(current_agent.get(), memory_id)
    return _memory_out(memory_update(memory, actor=ACTOR, **patch.dict(exclude_unset=True)))


@server.tool(annotations=ToolAnnotations(idempotentHint=True, openWorldHint=False))
@_django
def expire_memory(memory_id: MemoryId) -> dict[str, Any]:
    """Expire a long-term memory now, when it no longer holds: it is kept, down-weighted in
    get_context, and list_memories shows it with state "all"."""
    return _memory_out(memory_expire(memory_or_404(current_agent.get(), memory_id), actor=ACTOR))


@server.tool(annotations=ToolAnnotations(idempotentHint=True, openWorldHint=False))
@_django
def end_session(session_id: SessionId) -> dict[str, Any]:
    """The session is over: its messages are consolidated into long-term memories in the
    background (queued, or deferred a few seconds when the agent's last run was recent)."""
    check_stored_identifier("session_id", session_id)
    ended = session_end(agent_id=current_agent.get(), session_id=session_id)
    if ended is None:
        raise Http404("no such session")
    return SessionEndOut.model_validate(ended).model_dump(mode="json")


@server.tool(annotations=ToolAnnotations(destructiveHint=True, openWorldHint=False))
@_django
def forget(
    query: Annotated[
        str | None, Field(description="preview (confirm false): what to forget")
    ] = None,
    confirm: Annotated[bool, Field(description="false: preview only; true: delete")] = False,
    token: Annotated[
        str | None, Field(description="confirm (confirm true): the preview's token")
    ] = None,
) -> dict[str, Any]:
    """Forget everything matching a query, everywhere (messages, summaries, memories, their
    history, indexes, backups), as POST /forget: first with confirm false, which deletes
    nothing and lists what would go (counts, ids, snippets) with a token; show that to the
    person, then call again with confirm true and the token. Answers the receipt."""
    asked = _validated(ForgetIn, query=query, confirm=confirm, token=token)
    return forget_answer(current_agent.get(), asked, actor=ACTOR)


# --- resources -----------------------------------------------------------------------------
# Transcripts a runtime can attach whole: the newest messages, up to this many.
TRANSCRIPT_LIMIT = 500


@server.resource(
    "orca://sessions/{session_id}",
    name="session",
    description=f"A session's transcript: its newest {TRANSCRIPT_LIMIT} messages, oldest first.",
    mime_type="application/json",
)
@functools.partial(_django, refused=ResourceError, missing=ResourceNotFoundError)
def session_transcript(session_id: str) -> dict[str, Any]:
    agent = current_agent.get()
    check_stored_identifier("session_id", session_id)
    messages = session_or_404(agent, session_id)
    newest = list(messages.reverse()[:TRANSCRIPT_LIMIT])[::-1]
    return {
        "session_id": session_id,
        "count": messages.count(),
        "messages": [MessageOut.from_orm(m).model_dump(mode="json") for m in newest],
    }


@server.resource(
    "orca://memories/{memory_id}",
    name="memory",
    description="A long-term memory of the agent, with its type, confidence and expiry.",
    mime_type="application/json",
)
@functools.partial(_django, refused=ResourceError, missing=ResourceNotFoundError)
def memory(memory_id: str) -> dict[str, Any]:
    found = row_id(memory_id)
    if found is None:
        raise Http404(memory_id)
    return _memory_out(memory_or_404(current_agent.get(), found))


# --- what the SDK's transports would not answer -------------------------------------------


def refusal(raw: str | bytes) -> ErrorData | None:
    """The JSON-RPC error that answers a POST's body or a stdio line which is not one JSON-RPC
    message, else None. Checked before the SDK reads it, because its transports leave some of
    these unanswered: over stdio every line it cannot read (logged, dropped), over HTTP a
    request whose id is not a string or an integer (read as a notification: 202, never run)."""
    try:
        message = pydantic_core.from_json(raw)  # the SDK's own parser, with its depth limit
    except ValueError as exc:
        return ErrorData(code=PARSE_ERROR, message=f"Parse error: {exc}")
    if isinstance(message, list):  # MCP has had no batches since its version of 2025-06-18
        return ErrorData(
            code=INVALID_REQUEST, message="Invalid Request: one JSON-RPC message, not a batch"
        )
    if isinstance(message, dict) and "method" in message and not _is_request_id(message):
        return ErrorData(
            code=INVALID_REQUEST, message="Invalid Request: id must be a string or an integer"
        )
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return ErrorData(
            code=INVALID_REQUEST,
            message="Invalid Request: not a JSON-RPC 2.0 request, notification or response",
        )
    return None


def _is_request_id(message: dict[str, Any]) -> bool:
    """Whether a request's id, if it has one, is one MCP allows: JSON-RPC also allows null
    and fractions, MCP neither (and true, to Python an int, is no number)."""
    if "id" not in message:
        return True  # a notification
    id_ = message["id"]
    return isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))


async def serve_stdio() -> None:
    """The server over stdin and stdout (`manage.py mcp_stdio`), as the SDK's `run("stdio")`,
    but with each line `refusal` refuses answered with its error; the next line is served."""
    passed, checked = anyio.create_memory_object_stream[str]()
    # stdin is read here (any async iterable of lines will do for the SDK), so the SDK does
    # not point fd 0 at /dev/null while serving: nothing in the tools reads stdin.
    async with (
        stdio_server(stdin=checked) as (read_stream, write_stream),  # type: ignore[arg-type]
        anyio.create_task_group() as tasks,
    ):

        async def check_lines() -> None:
            async with passed:
                async for raw in anyio.wrap_file(sys.stdin.buffer):
                    line = raw.decode("utf-8", errors="replace")  # as the SDK decodes stdin
                    if not line.strip():
                        continue  # no message: nothing to answer
                    refused = refusal(line)
                    if refused is None:
                        await passed.send(line)
                    else:
                        error = JSONRPCError(jsonrpc="2.0", id=None, error=refused)
                        await write_stream.send(SessionMessage(error))

        tasks.start_soon(check_lines)
        lowlevel = server._lowlevel_server  # as the SDK's run_stdio_async uses it
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


# --- Streamable HTTP at /mcp ---------------------------------------------------------------
# JSON-RPC's code for a refused credential is the server's to choose (-32000 to -32099).
UNAUTHORIZED = -32001


def _agent_of(request: HttpRequest) -> str | None:
    """The agent of the request's `Authorization: Bearer <key>`, as the JSON API reads it."""
    key = bearer_key(request.headers.get("Authorization", ""))
    return None if key is None else agent_for_key(key)


def _asgi_scope(request: HttpRequest) -> dict[str, Any]:
    """The ASGI view of the request, for the SDK's transport: method, path and headers."""
    meta = request.META
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": meta.get("QUERY_STRING", "").encode("latin-1", "replace"),
        "headers": [
            (name.lower().encode("latin-1", "replace"), value.encode("latin-1", "replace"))
            for name, value in request.headers.items()
        ],
        "client": (meta.get("REMOTE_ADDR", ""), 0),
        "server": (meta.get("SERVER_NAME", ""), int(meta.get("SERVER_PORT") or 0)),
    }


async def _serve(scope: dict[str, Any], body: bytes) -> HttpResponse:
    """One request through the SDK's Streamable HTTP transport, stateless with JSON answers:
    every request stands alone, so any web worker can answer it."""
    manager = StreamableHTTPSessionManager(
        # The SDK's own Client connects to an MCPServer through this attribute too.
        app=server._lowlevel_server,
        json_response=True,
        stateless=True,
        # Django checks the Host (ALLOWED_HOSTS) before this view runs, and a key is needed.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
    )
    start: dict[str, Any] = {}
    chunks: list[bytes] = []
    answered = anyio.Event()
    unread = [body]

    async def receive() -> dict[str, Any]:
        if unread:
            return {"type": "http.request", "body": unread.pop(), "more_body": False}
        await answered.wait()  # the client is there until the answer is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    answered.set()
    response = HttpResponse(b"".join(chunks), status=start.get("status", 500))
    for name, value in start.get("headers", []):
        response[name.decode("latin-1")] = value.decode("latin-1")
    return response


def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """MCP over Streamable HTTP: one JSON-RPC message a POST, answered as JSON. No GET stream
    (405, as the transport allows): the server sends nothing a call did not ask for."""
    if request.method != "POST":
        response = jsonrpc_error(405, INVALID_REQUEST, "Method Not Allowed: send POST")
        response["Allow"] = "POST"
        return response
    agent = _agent_of(request)
    if agent is None:
        response = jsonrpc_error(
            401,
            UNAUTHORIZED,
            UNAUTHORIZED_DETAIL,
        )
        response["WWW-Authenticate"] = "Bearer"
        return response
    if request.content_type != "application/json":
        return jsonrpc_error(
            415, INVALID_REQUEST, "Unsupported Media Type: send Content-Type: application/json"
        )
    try:
        body = request.body
    except RequestDataTooBig:
        return jsonrpc_error(413, INVALID_REQUEST, "request body too large")
    refused = refusal(body)
    if refused is not None:
        return jsonrpc_error(400, refused.code, refused.message)
    token = current_agent.set(agent)
    try:
        return async_to_sync(_serve)(_asgi_scope(request), body)
    except Exception:
        # Logged with its traceback for the operator; the client learns nothing internal.
        logger.exception("Unhandled error in POST /mcp")
        return jsonrpc_error(500, INTERNAL_ERROR, "internal server error")
    finally:
        current_agent.reset(token)
