"""The dashboard's page for sub-agent runs: the isolated transcript behind a result."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy

from memory.models import MainMessage
from memory.views import VIEW_SESSIONS
from orca_memory.core.pages import needs, object_or_404, render_page
from subagents.models import SubagentMessage
from subagents.runs import run_metadata, run_results, subagent_transcript

# A result whose stored run has no usable name (written before the API refused client-set
# run metadata, or imported): shown under this, never a server error.
UNNAMED_RUN = gettext_lazy("(no sub-agent name recorded)")


@dataclass
class Run:
    """What one sub-agent did for the parent message; `result` is None while it runs."""

    agent_name: str
    replies: list[SubagentMessage] = field(default_factory=list)
    result: MainMessage | None = None

    @property
    def truncated(self) -> bool:
        return bool(self.result and run_metadata(self.result).get("truncated") is True)

    @property
    def original_tokens(self) -> int | None:
        tokens = run_metadata(self.result).get("original_tokens") if self.result else None
        return tokens if type(tokens) is int else None


def _name_of(result: MainMessage) -> str:
    name = run_metadata(result).get("agent_name")
    return name if isinstance(name, str) and name else str(UNNAMED_RUN)


def runs_of(parent: MainMessage, agent_name: str | None = None) -> list[Run]:
    """The parent's runs in the order they started, each with its replies and result."""
    runs: dict[str, Run] = {}
    replies = subagent_transcript(parent)
    if agent_name is not None:
        replies = replies.filter(agent_name=agent_name)
    for reply in replies:
        runs.setdefault(reply.agent_name, Run(reply.agent_name)).replies.append(reply)
    for result in run_results(parent, agent_name):
        name = _name_of(result)
        runs.setdefault(name, Run(name)).result = result
    return list(runs.values())


@login_required
@needs((*VIEW_SESSIONS, "subagents.view_subagentmessage"))
def subagent_run(request: HttpRequest, parent_id: int) -> HttpResponse:
    """Every run for one main message (`?agent=` narrows to one); htmx gets the transcript."""
    parent = object_or_404(MainMessage, parent_id, gettext_lazy("message"))
    context = {"parent": parent, "runs": runs_of(parent, request.GET.get("agent") or None)}
    return render_page(request, "subagents/run.html", context, partial="transcript")
