"""The dashboard's forget page (memory.forgetting): a session, an agent or a query's matches,
previewed first, then confirmed; and the receipts of every forget, newest first."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from memory.forgetting import (
    KINDS,
    agent_plan,
    forget,
    forget_confirmed,
    forget_preview,
    session_plan,
    tally,
)
from memory.forms import ForgetForm
from memory.models import ForgetReceipt, ForgetScope
from memory.validation import InvalidInput
from orca_memory.core.pages import needs

# Forgetting deletes messages, summaries and memories: the delete permission of each.
FORGET = (
    "memory.view_mainmessage",
    "memory.delete_mainmessage",
    "memory.delete_shorttermmemory",
    "memory.view_longtermmemory",
    "memory.delete_longtermmemory",
)
RECEIPTS_SHOWN = 50
KIND_LABELS = {
    "messages": gettext_lazy("messages"),
    "summaries": gettext_lazy("summaries"),
    "memories": gettext_lazy("long-term memories"),
    "history": gettext_lazy("history rows"),
    "consolidation_runs": gettext_lazy("consolidation runs"),
    "idempotency_keys": gettext_lazy("retry records scrubbed"),
    "transcripts": gettext_lazy("sub-agent transcript messages"),
    "memory_sources": gettext_lazy("sources removed from memories that stay"),
    "backup_lines": gettext_lazy("JSONL backup lines"),
}


def _actor(request: HttpRequest) -> str:
    return f"ui:{request.user.get_username()}"


@login_required
@needs(FORGET)
@require_http_methods(["GET", "POST"])
def forget_page(request: HttpRequest) -> HttpResponse:
    form = ForgetForm(request.POST or None, initial=request.GET.dict())
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if "confirm" in request.POST:
            return _confirm(request, data)
        try:
            context["preview"] = preview = _preview(data)
            preview["rows"] = [(KIND_LABELS[k], preview["counts"][k]) for k in KINDS]
            preview["items"] = [(KIND_LABELS[item.kind], item) for item in preview["items"]]
        except InvalidInput as exc:
            form.add_error("query" if data["scope"] == ForgetScope.QUERY else None, str(exc))
    context["receipts"] = [
        (
            receipt,
            [(KIND_LABELS[k], n) for k, n in receipt.counts.items() if n and k in KIND_LABELS],
        )
        for receipt in ForgetReceipt.objects.order_by("-at", "-id")[:RECEIPTS_SHOWN]
    ]
    return render(request, "memory/forget.html", context)


def _preview(data: dict[str, Any]) -> dict[str, Any]:
    agent_id, scope = data["agent_id"], data["scope"]
    if scope == ForgetScope.QUERY:
        preview = forget_preview(agent_id=agent_id, query=data["query"])
        return {"counts": preview.counts, "items": preview.items, "token": preview.token}
    plan = (
        session_plan(agent_id=agent_id, session_id=data["session_id"])
        if scope == ForgetScope.SESSION
        else agent_plan(agent_id=agent_id)
    )
    return {"counts": tally(plan).counts, "items": [], "token": ""}


def _confirm(request: HttpRequest, data: dict[str, Any]) -> HttpResponse:
    agent_id, scope, actor = data["agent_id"], data["scope"], _actor(request)
    try:
        if scope == ForgetScope.QUERY:
            receipt, _repeated = forget_confirmed(
                agent_id=agent_id, token=request.POST.get("token", ""), actor=actor
            )
        elif scope == ForgetScope.SESSION:
            plan = session_plan(agent_id=agent_id, session_id=data["session_id"])
            receipt = forget(plan, actor=actor)
        else:
            receipt = forget(agent_plan(agent_id=agent_id), actor=actor)
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("forget")
    if receipt is None:
        messages.info(request, _("Nothing was left to forget."))
    else:
        messages.success(
            request, _("Forgotten: receipt #%(id)s lists what was deleted.") % {"id": receipt.pk}
        )
    return redirect("forget")
