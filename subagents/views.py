"""The dashboard's page for sub-agent runs: the isolated transcript behind a result."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy

from memory.models import MainMessage
from memory.subagent_run import UNNAMED_RUN, SubagentRun, run_in
from memory.views import VIEW_SESSIONS
from orca_memory.core.pages import needs, object_or_404, render_page
from subagents.models import SubagentMessage
from subagents.runs import run_results, subagent_transcript


@dataclass
class Run:
    """What one sub-agent did for the parent message; `result` is None while it runs, and
    `record` what the result records of the run."""

    agent_name: str
    replies: list[SubagentMessage] = field(default_factory=list)
    result: MainMessage | None = None
    record: SubagentRun | None = None

    @property
    def truncated(self) -> bool:
        return self.record is not None and self.record.truncated

    @property
    def original_tokens(self) -> int | None:
        return self.record.original_tokens if self.record is not None else None


def runs_of(parent: MainMessage, agent_name: str | None = None) -> list[Run]:
    """The parent's runs in the order they started, each with its replies and result."""
    runs: dict[str, Run] = {}
    replies = subagent_transcript(parent)
    if agent_name is not None:
        replies = replies.filter(agent_name=agent_name)
    for reply in replies:
        runs.setdefault(reply.agent_name, Run(reply.agent_name)).replies.append(reply)
    for result in run_results(parent, agent_name):
        # Odd stored records (older rows, imports) show under a placeholder, never fail.
        record = run_in(result.metadata)
        name = record.label if record is not None else str(UNNAMED_RUN)
        run = runs.setdefault(name, Run(name))
        run.result, run.record = result, record
    return list(runs.values())


@login_required
@needs((*VIEW_SESSIONS, "subagents.view_subagentmessage"))
def subagent_run(request: HttpRequest, parent_id: int) -> HttpResponse:
    """Every run for one main message (`?agent=` narrows to one); htmx gets the transcript."""
    parent = object_or_404(MainMessage, parent_id, gettext_lazy("message"))
    context = {"parent": parent, "runs": runs_of(parent, request.GET.get("agent") or None)}
    return render_page(request, "subagents/run.html", context, partial="transcript")
