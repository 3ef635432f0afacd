"""The dashboard: inspect sessions, preview a prompt's context, curate long-term memories.

One view per page. An htmx request gets only the part of the page it swaps (a Django
`{% partialdef %}`), so every link and form also works as a plain page without JavaScript.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memory import embeddings
from memory.context import Context, context_build
from memory.context_items import RecalledItem
from memory.forms import (
    BulkMemoryForm,
    ContextForm,
    MemoryFilterForm,
    MemoryForm,
    SearchForm,
    SessionFilterForm,
    TimelineForm,
)
from memory.health import Health, service_health
from memory.index_schema import query_terms
from memory.memories import (
    memories_apply,
    memory_chain,
    memory_delete,
    memory_expire,
    memory_revert,
    memory_unarchive,
    memory_unsupersede,
    memory_update,
    memory_versions,
)
from memory.memories import memory_restore as memory_restore_flow
from memory.messages import session_messages
from memory.models import (
    CONSOLIDATION,
    RUN_NOTE,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    MemoryType,
    RunStatus,
    ShortTermMemory,
    Trigger,
)
from memory.phrases import translated
from memory.relevance import terms_said
from memory.subagent_run import result_run, runs_started
from memory.text import highlight_terms, snippet
from memory.validation import InvalidInput, row_id
from memory.vectors import vector_search_status
from orca_memory.core.pages import needs, object_or_404, render_page

# The Django model permissions each page needs (the admin checks the same ones). A signed-in
# user without them gets 403; migration 0010 makes the groups "orca viewers" (every view_*
# permission here) and "orca curators" (those plus change and delete of long-term memories).
VIEW_SESSIONS = ("memory.view_mainmessage", "memory.view_shorttermmemory")
VIEW_MEMORIES = ("memory.view_longtermmemory",)
VIEW_HISTORY = (*VIEW_MEMORIES, "memory.view_longtermmemoryhistory")
PREVIEW_CONTEXT = (*VIEW_SESSIONS, *VIEW_MEMORIES)  # the preview shows memories too
CHANGE_MEMORIES = (*VIEW_MEMORIES, "memory.change_longtermmemory")
DELETE_MEMORIES = (*VIEW_MEMORIES, "memory.delete_longtermmemory")

SESSIONS_PER_PAGE = 25
MESSAGES_PER_PAGE = 100
MEMORIES_PER_PAGE = 25
RECENT_SESSIONS = 8
CONSOLIDATION_RUNS_SHOWN = 20
SEARCH_HITS = 50
# Every index is scoped to one agent: a search of all agents searches each, up to this many.
SEARCH_AGENTS = 20
# What object_or_404 names in its 404.
MEMORY = gettext_lazy("memory")
# The event a deleted card's answer sends: the memory list reloads itself, counts included.
MEMORIES_CHANGED = "memories-changed"
LAYER_SHORT_LABELS = {
    "working": gettext_lazy("Working"),
    "short_term": gettext_lazy("Short-term"),
    "long_term": gettext_lazy("Long-term"),
    "recall": gettext_lazy("Recall"),
}
# The preview's order: what the query chose first, the session's own messages last.
PREVIEW_ORDER = ("long_term", "recall", "short_term", "working")
LAYER_LABELS = {
    "working": gettext_lazy("Working memory"),
    "short_term": gettext_lazy("Short-term memory"),
    "long_term": gettext_lazy("Long-term memory"),
    "recall": gettext_lazy("Recalled from earlier conversations"),
}


def _actor(request: HttpRequest) -> str:
    return f"ui:{request.user.get_username()}"


def _page(request: HttpRequest, items: QuerySet[Any], per_page: int) -> Page:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def _agents(model: type[MainMessage] | type[LongTermMemory]) -> list[str]:
    return list(model.objects.values_list("agent_id", flat=True).distinct().order_by("agent_id"))


def _session_rows(sessions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Session rows (MainMessage.objects.sessions()) with how many sub-agent runs their
    messages started (`subagent_run.runs_started`), and whether they were ended (`ended`: a
    consolidation asked for at the session's end) and consolidated (`consolidated`: a run
    done). Three queries for a page of any size."""
    rows = list(sessions)
    if not rows:
        return rows
    scope = Q()
    for row in rows:
        scope |= Q(agent_id=row["agent_id"], session_id=row["session_id"])
    messages = MainMessage.objects.filter(scope)
    counts: dict[tuple[str, str], int] = {}
    for (agent_id, session_id, _parent), names in runs_started(messages, messages).items():
        counts[agent_id, session_id] = counts.get((agent_id, session_id), 0) + len(names)
    ended, consolidated = set(), set()
    runs = ConsolidationRun.objects.filter(scope).values_list(
        "agent_id", "session_id", "trigger", "status"
    )
    for agent_id, session_id, trigger, status in runs.distinct():
        if trigger == Trigger.SESSION_END:
            ended.add((agent_id, session_id))
        if status == RunStatus.DONE:
            consolidated.add((agent_id, session_id))
    for row in rows:
        key = (row["agent_id"], row["session_id"])
        row.update(
            subagent_runs=counts.get(key, 0), ended=key in ended, consolidated=key in consolidated
        )
    return rows


def embedding_configured(request: HttpRequest) -> dict[str, bool]:
    """Template context (a context processor): `embedding_on`, whether a provider will write
    vectors. Without one no message waits for a vector and search matches words only, and the
    pages must not say otherwise."""
    return {"embedding_on": embeddings.configured_embedder() is not None}


def health_notes(health: Health) -> list[str]:
    """What the health report means for the service, in plain words; empty when all is well."""
    if not health.database.get("ok"):
        return [
            _("The database cannot be opened: %(error)s.") % {"error": health.database.get("error")}
        ]
    vectors, embedding = health.vector_search, health.embedding
    notes = []
    if not vectors["enabled"]:
        notes.append(
            _("Vector search is off (%(reason)s): search and context use text matching only.")
            % {"reason": translated(vectors["reason"] or "")}
        )
    if embedding["provider"] == "none":
        notes.append(
            _(
                "Embeddings are off ([embedding] provider = none), so search matches words "
                "only. Remove that setting to use the bundled model."
            )
        )
    elif not embedding["ready"]:
        notes.append(
            _("The %(provider)s embedding provider cannot be used: %(reason)s.")
            % {"provider": embedding["provider"], "reason": translated(embedding["reason"] or "")}
        )
    if embedding["failing"]:
        at = embedding["last_error_at"]
        notes.append(
            _(
                "Embedding is failing: the last attempt%(when)s said “%(error)s”. Messages are "
                "still stored; the backlog drains by itself when the provider is back."
            )
            % {
                "when": f" ({at:%Y-%m-%d %H:%M} UTC)" if at else "",
                "error": embedding["last_error"],
            }
        )
    return notes


@login_required
@needs(VIEW_SESSIONS)
def dashboard(request: HttpRequest) -> HttpResponse:
    health = service_health()
    # The memories in the list's "active" state, which each count links to.
    now = timezone.now()
    by_type = dict(
        LongTermMemory.objects.active()
        .unexpired(now)
        .current(now)
        .values_list("memory_type")
        .annotate(count=Count("id"))
        .order_by()
    )
    context = {
        "health": health,
        "notes": health_notes(health),
        "counts": {
            "sessions": MainMessage.objects.sessions().count(),
            "messages": MainMessage.objects.count(),
            "summaries": ShortTermMemory.objects.count(),
        },
        "memory_counts": [
            (value, label, by_type.get(value, 0)) for value, label in MemoryType.choices
        ],
        "recent_sessions": _session_rows(MainMessage.objects.sessions()[:RECENT_SESSIONS]),
    }
    return render(request, "memory/dashboard.html", context)


@login_required
@needs(VIEW_SESSIONS)
def sessions(request: HttpRequest) -> HttpResponse:
    """The session list, filtered and sorted by its query string; an unknown sort is a 400
    that says so (the page shows the list in its default order under the error)."""
    filters = SessionFilterForm(request.GET, agents=_agents(MainMessage))
    page = _page(request, filters.sessions(), SESSIONS_PER_PAGE)
    context = {
        "filters": filters,
        "page": page,
        "rows": _session_rows(page),
        "by_meaning": vector_search_status().enabled,
    }
    response = render_page(request, "memory/sessions.html", context, partial="session_list")
    if filters.bad_sort:
        response.status_code = 400
    return response


def message_url(agent_id: str, session_id: str, message_id: int) -> str:
    """A message inside its session's page: the page that holds it, scrolled to it."""
    url = reverse("session", args=[agent_id, session_id])
    return f"{url}?at={message_id}#message-{message_id}"


def _layers(agent_id: str, session_id: str, built: Context) -> list[dict[str, Any]]:
    """Each layer, those chosen for the query first (working memory, often the longest, comes
    last), with its share of the bar (used tokens against its budget), and its items and the
    candidates it left out, each with a link: a message to its place in its session, a
    memory to its page, a summary to its card on this page."""
    recall_left_out = [left.id for left in built.layers["recall"].left_out]
    sessions_of = dict(
        MainMessage.objects.filter(agent_id=agent_id, pk__in=recall_left_out).values_list(
            "pk", "session_id"
        )
        if recall_left_out
        else ()
    )

    def link(name: str, pk: int, in_session: str | None) -> str | None:
        if name == "long_term":
            return reverse("memory", args=[pk])
        if name == "short_term":
            return f"#summary-{pk}"
        return message_url(agent_id, in_session, pk) if in_session else None

    rows = []
    for name in PREVIEW_ORDER:
        layer = built.layers[name]
        items = [
            (
                item,
                link(
                    name, item.id, item.session_id if isinstance(item, RecalledItem) else session_id
                ),
            )
            for item in layer.items
        ]
        left_out = [
            (left, link(name, left.id, sessions_of.get(left.id, session_id)))
            for left in layer.left_out
        ]
        rows.append(
            {
                "name": name,
                "label": LAYER_LABELS[name],
                "short_label": LAYER_SHORT_LABELS[name],
                "layer": layer,
                "items": items,
                "left_out": left_out,
                "percent": min(100, round(100 * layer.used / layer.budget)) if layer.budget else 0,
                "over": layer.used > layer.budget,
            }
        )
    return rows


def _page_of(messages: QuerySet[MainMessage], at: str | None, *, newest_first: bool) -> int | None:
    """The number of the page that holds message `at` (`?at=`, how links reach a message
    inside its session), or None when it is not one of `messages`."""
    message_id = row_id(at)
    if message_id is None:
        return None
    found = messages.filter(pk=message_id).values_list("timestamp", flat=True).first()
    if found is None:
        return None
    if newest_first:
        before = messages.filter(Q(timestamp__gt=found) | Q(timestamp=found, pk__gt=message_id))
    else:
        before = messages.filter(Q(timestamp__lt=found) | Q(timestamp=found, pk__lt=message_id))
    return before.count() // MESSAGES_PER_PAGE + 1


@dataclass
class RunMemories:
    """A consolidation run of the session and the memories it created and merged, as their
    history rows name them (rows written before runs were named there have no list)."""

    run: ConsolidationRun
    created: list[tuple[int, LongTermMemory | None]] = field(default_factory=list)
    merged: list[tuple[int, LongTermMemory | None]] = field(default_factory=list)


def _consolidation(agent_id: str, session_id: str) -> list[RunMemories]:
    """The session's newest consolidation runs with their memories (None: since deleted),
    in three queries however many there are."""
    runs = {
        run.pk: RunMemories(run)
        for run in ConsolidationRun.objects.filter(
            agent_id=agent_id, session_id=session_id
        ).order_by("-requested_at", "-id")[:CONSOLIDATION_RUNS_SHOWN]
    }
    made = LongTermMemoryHistory.objects.filter(
        agent_id=agent_id,
        actor=CONSOLIDATION,
        action__in=(MemoryAction.CREATE, MemoryAction.MERGE),
        **{f"changes__{RUN_NOTE}__in": list(runs)},
    ).values_list(f"changes__{RUN_NOTE}", "memory_id", "action")
    rows = list(made.order_by("id")) if runs else []
    memories = LongTermMemory.objects.in_bulk({memory_id for _, memory_id, _ in rows})
    for run_id, memory_id, action in rows:
        entry = runs[run_id]
        found = (memory_id, memories.get(memory_id))
        (entry.created if action == MemoryAction.CREATE else entry.merged).append(found)
    return list(runs.values())


def _session_context(
    request: HttpRequest, agent_id: str, session_id: str, form: ContextForm
) -> dict[str, Any]:
    filters = TimelineForm(request.GET)
    messages = filters.messages(agent_id, session_id)
    at = _page_of(messages, request.GET.get("at"), newest_first=filters.newest_first)
    page = Paginator(messages, MESSAGES_PER_PAGE).get_page(request.GET.get("page") or at)
    total = page.paginator.count
    if filters.narrowed:
        total = session_messages(agent_id, session_id).count()
    if not total:
        raise Http404(
            _("Agent %(agent)s has no session %(session)s.")
            % {"agent": agent_id, "session": session_id}
        )
    last = page.paginator.num_pages
    timeline = list(page)
    ids = [message.pk for message in timeline]
    runs = runs_started(
        MainMessage.objects.filter(pk__in=ids),
        MainMessage.objects.filter(agent_id=agent_id, session_id=session_id),
    )
    for message in timeline:
        message.run = result_run(message)
        # The runs this message started, each linked, finished or not.
        started = runs.get((agent_id, session_id, message.pk), {})
        message.started_runs = [
            (
                name,
                finished,
                f"{reverse('subagent_run', args=[message.pk])}?{urlencode({'agent': name})}",
            )
            for name, finished in sorted(started.items())
        ]
    return {
        "agent_id": agent_id,
        "session_id": session_id,
        "page": page,
        "page_numbers": list(page.paginator.get_elided_page_range(page.number, on_ends=1)),
        "ellipsis": Paginator.ELLIPSIS,
        "total": total,
        "filters": filters,
        # The jumps: the newest messages are on the last page, or the first newest first.
        "oldest_page": last if filters.newest_first else 1,
        "newest_page": 1 if filters.newest_first else last,
        "timeline": timeline,
        "summaries": ShortTermMemory.objects.of_session(agent_id, session_id),
        "consolidation": _consolidation(agent_id, session_id)
        if request.user.has_perm("memory.view_consolidationrun")
        else None,
        "form": form,
    }


@login_required
@needs(VIEW_SESSIONS)
def session(request: HttpRequest, agent_id: str, session_id: str) -> HttpResponse:
    form = ContextForm(initial={"model_window": settings.ORCA.model_window})
    context = _session_context(request, agent_id, session_id, form)
    return render_page(request, "memory/session.html", context, partial="timeline")


@login_required
@needs(PREVIEW_CONTEXT)
@require_POST
def context_preview(request: HttpRequest, agent_id: str, session_id: str) -> HttpResponse:
    """What context_build would send now (it also counts an access of each memory returned)."""
    form = ContextForm(request.POST)
    context = _session_context(request, agent_id, session_id, form)
    if form.is_valid():
        built = context_build(
            agent_id=agent_id,
            session_id=session_id,
            query=form.cleaned_data["query"] or None,
            model_window=form.cleaned_data["model_window"],
        )
        context.update(
            built=built,
            layers=_layers(agent_id, session_id, built),
            # As an agent receives them: the JSON an OpenAI-compatible chat API is sent.
            messages_json=json.dumps(built.messages, ensure_ascii=False, indent=2),
        )
    return render_page(request, "memory/session.html", context, partial="context")


@login_required
@needs(VIEW_SESSIONS)
def search_page(request: HttpRequest) -> HttpResponse:
    """The agents' messages best matching `?q=`, by the API's hybrid search, each hit a
    snippet with the query's words marked, linked to its place in its session, with why it
    matched: the query's words its own text says (none: through the messages before it, which
    the index reads with it), and its similarity in meaning."""
    agents = _agents(MainMessage)
    form = SearchForm(request.GET if "q" in request.GET else None, agents=agents)
    context: dict[str, Any] = {"form": form, "k": SEARCH_HITS}
    if not form.is_bound:
        # The empty page says what search can go by now: a configured provider whose vectors
        # are not usable yet (the model loading, the index not built) leaves words only.
        context["by_meaning"] = vector_search_status().enabled
    if form.is_valid():
        if not form.cleaned_data["agent"] and len(agents) > SEARCH_AGENTS:
            form.add_error(
                "agent", _("Choose an agent: there are more than %(n)d.") % {"n": SEARCH_AGENTS}
            )
        else:
            result = form.search(SEARCH_HITS)
            terms = highlight_terms(form.cleaned_data["q"])
            query = query_terms(form.cleaned_data["q"])
            context["result"] = result
            context["hits"] = [
                (
                    hit,
                    snippet(hit.message.content, terms),
                    message_url(hit.message.agent_id, hit.message.session_id, hit.message.pk),
                    terms_said(query, hit.message.content),
                )
                for hit in result.hits
            ]
    return render_page(request, "memory/search.html", context, partial="results")


@login_required
@needs(VIEW_MEMORIES)
def memories(request: HttpRequest) -> HttpResponse:
    """The list, filtered and sorted by its query string; an unknown sort is a 400 that says
    so (the page shows the list in its default order under the error)."""
    form = MemoryFilterForm(request.GET, agents=_agents(LongTermMemory))
    context = {
        "filters": form,
        "page": _page(request, form.memories(timezone.now()), MEMORIES_PER_PAGE),
        "bulk_actions": BulkMemoryForm.ACTIONS,
    }
    response = render_page(request, "memory/memories.html", context, partial="memory_list")
    if form.bad_sort:
        response.status_code = 400
    return response


def _memory_page(request: HttpRequest, memory_id: int, *, partial: str) -> HttpResponse:
    """The memory and its history; a deleted memory's page says so, with the history kept."""
    history = memory_versions(memory_id) if request.user.has_perms(VIEW_HISTORY) else None
    try:
        memory = LongTermMemory.objects.get(pk=memory_id)
    except LongTermMemory.DoesNotExist:
        deletion = LongTermMemoryHistory.objects.filter(
            memory_id=memory_id, action=MemoryAction.DELETE
        ).last()
        if deletion is None:
            raise Http404(
                _("No memory #%(id)d: it was deleted, or never existed.") % {"id": memory_id}
            ) from None
        context = {"memory_id": memory_id, "deletion": deletion, "history": history}
        if partial == "history" and request.htmx:
            return render(request, "memory/memory.html#history", context)
        return render(request, "memory/memory_deleted.html", context)
    context = {**_page_context(request, memory, history), "chain": memory_chain(memory)}
    return render_page(request, "memory/memory.html", context, partial=partial)


def _on_its_page(request: HttpRequest, memory: LongTermMemory) -> bool:
    """Whether the page is the memory's own (a plain request for it, or htmx from it), where
    its history and sources sit under the card, which then needs no history toggle."""
    if not request.htmx:
        return True
    current = request.htmx.current_url_abs_path or ""
    return urlsplit(current).path == reverse("memory", args=[memory.pk])


def _page_context(
    request: HttpRequest, memory: LongTermMemory, history: list[LongTermMemoryHistory] | None
) -> dict[str, Any]:
    return {
        "memory": memory,
        "history": history,
        "on_page": _on_its_page(request, memory),
        "sources": _sources(memory),
    }


@dataclass(frozen=True)
class Source:
    """A memory's source as its page lists it: a message, linked to its place in its
    session, or the person who wrote the memory."""

    message: MainMessage | None
    url: str | None
    written_by: str | None


def _sources(memory: LongTermMemory) -> list[Source]:
    return [
        Source(
            source.message,
            message_url(memory.agent_id, source.message.session_id, source.message.pk),
            None,
        )
        if source.message is not None
        else Source(None, None, source.written_by)
        for source in memory.source_list()
    ]


@login_required
@needs(VIEW_MEMORIES)
def memory(request: HttpRequest, memory_id: int) -> HttpResponse:
    """One memory and its history; htmx gets its card back (cancelling an edit)."""
    return _memory_page(request, memory_id, partial="card")


@login_required
@needs(VIEW_HISTORY)
def memory_history(request: HttpRequest, memory_id: int) -> HttpResponse:
    """The same page; htmx gets the history alone, to unfold it in the list."""
    return _memory_page(request, memory_id, partial="history")


def _memory_changed(request: HttpRequest, memory: LongTermMemory) -> HttpResponse:
    """htmx swaps the memory's card in place (on the memory's own page, its sources and
    history too: the change added to them); without it, go to the memory and its history."""
    if not request.htmx:
        return redirect("memory", memory.pk)
    if not _on_its_page(request, memory):
        return render(request, "memory/memory.html#card", {"memory": memory})
    history = memory_versions(memory.pk) if request.user.has_perms(VIEW_HISTORY) else None
    context = _page_context(request, memory, history)
    return render(request, "memory/memory.html#changed", context)


@login_required
@needs(CHANGE_MEMORIES)
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, memory_id: int) -> HttpResponse:
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    form = MemoryForm(request.POST if request.method == "POST" else None, instance=memory)
    if form.is_valid():
        # Only what the curator changed, through the flow that keeps the history. It compares
        # with the stored row: the form has set the new values on `memory` already.
        stored = LongTermMemory.objects.get(pk=memory.pk)
        changes = {name: form.cleaned_data[name] for name in form.changed_data}
        try:
            memory_update(stored, actor=_actor(request), **changes)
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            return _memory_changed(request, stored)
    return render_page(
        request, "memory/memory_edit.html", {"memory": memory, "form": form}, partial="form"
    )


@login_required
@needs(CHANGE_MEMORIES)
@require_POST
def memory_expire_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    return _memory_changed(request, memory_expire(memory, actor=_actor(request)))


@login_required
@needs(CHANGE_MEMORIES)
@require_POST
def memory_restore(request: HttpRequest, memory_id: int) -> HttpResponse:
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    return _memory_changed(request, memory_restore_flow(memory, actor=_actor(request)))


@login_required
@needs(CHANGE_MEMORIES)
@require_POST
def memory_unarchive_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    """Bring an archived memory back into retrieval (it gets a new vector)."""
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    return _memory_changed(request, memory_unarchive(memory, actor=_actor(request)))


@login_required
@needs(DELETE_MEMORIES)
@require_http_methods(["GET", "POST"])
def memory_delete_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    """GET asks for confirmation (htmx confirms in the browser and posts directly)."""
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    if request.method == "GET":
        return render(request, "memory/memory_delete.html", {"memory": memory})
    memory_delete(memory, actor=_actor(request))
    if request.htmx:
        if request.htmx.current_url_abs_path == reverse("memory", args=[memory_id]):
            return HttpResponseClientRedirect(request.htmx.current_url_abs_path)  # now "deleted"
        # The card's outerHTML swap removes it; the list reloads itself for its count.
        return HttpResponse("", headers={"HX-Trigger": MEMORIES_CHANGED})
    messages.success(request, _("Memory #%(id)d deleted; its history is kept.") % {"id": memory_id})
    return redirect("memories")


@login_required
@needs(CHANGE_MEMORIES)
@require_POST
def memory_revert_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    """Back to an earlier version (a plain form: the memory's page shows the result)."""
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    try:
        version = int(request.POST.get("version", ""))
        before = memory.updated_at
        memory_revert(memory, version=version, actor=_actor(request))
    except (ValueError, InvalidInput) as exc:
        reason = str(exc) if isinstance(exc, InvalidInput) else _("version must be a number")
        return HttpResponseBadRequest(
            _("Cannot revert memory #%(id)d: %(reason)s.") % {"id": memory_id, "reason": reason}
        )
    if memory.updated_at == before:
        note = _("Memory #%(id)d already reads as version %(version)d.")
        messages.info(request, note % {"id": memory_id, "version": version})
    else:
        note = _("Memory #%(id)d reverted to version %(version)d.")
        messages.success(request, note % {"id": memory_id, "version": version})
    return redirect("memory", memory_id)


@login_required
@needs(CHANGE_MEMORIES)
@require_POST
def memory_unsupersede_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    """Undo a supersession: the memory is current again (a plain form: its page shows it)."""
    memory = object_or_404(LongTermMemory, memory_id, MEMORY)
    if memory.valid_until is None:
        messages.info(request, _("Memory #%(id)d is current already.") % {"id": memory_id})
    else:
        memory_unsupersede(memory, actor=_actor(request))
        messages.success(request, _("Memory #%(id)d is current again.") % {"id": memory_id})
    return redirect("memory", memory_id)


def _next(request: HttpRequest, url: str) -> str:
    """`url` if it is a page of this site, else the memory list."""
    if url and url_has_allowed_host_and_scheme(url, {request.get_host()}):
        return url
    return reverse("memories")


@login_required
@needs(VIEW_MEMORIES)
@require_POST
def memories_bulk(request: HttpRequest) -> HttpResponse:
    """Expire, restore or delete the memories ticked in the list: first a confirmation page
    (with or without JavaScript), then each memory through its single action's flow."""
    # The single action's permissions, before anything else is looked at.
    action = request.POST.get("action", "")
    if not request.user.has_perms(DELETE_MEMORIES if action == "delete" else CHANGE_MEMORIES):
        raise PermissionDenied(_("You may not change these memories."))
    form = BulkMemoryForm(request.POST)
    if not form.is_valid():
        context = {"form": form, "back": _next(request, request.POST.get("next", ""))}
        return render(request, "memory/memories_bulk.html", context, status=400)
    selected = form.cleaned_data["memory"].order_by("-created_at", "-id")
    back = _next(request, form.cleaned_data["next"])
    if not form.cleaned_data["confirmed"]:
        context = {
            "form": form,
            "action": action,
            "label": BulkMemoryForm.ACTIONS[action],
            "selected": selected,
            "back": back,
        }
        return render(request, "memory/memories_bulk.html", context)
    changed = memories_apply(memories=selected, action=action, actor=_actor(request))
    done = {
        "expire": ngettext("%(n)d memory expired", "%(n)d memories expired", changed),
        "restore": ngettext("%(n)d memory restored", "%(n)d memories restored", changed),
        "delete": ngettext("%(n)d memory deleted", "%(n)d memories deleted", changed),
    }[action] % {"n": changed}
    count = len(selected)
    note = _(" (%(n)d needed nothing)") % {"n": count - changed} if changed < count else ""
    kept = _("; their history is kept") if action == "delete" else ""
    messages.success(
        request, _("%(done)s%(note)s%(kept)s.") % {"done": done, "note": note, "kept": kept}
    )
    return redirect(back)
