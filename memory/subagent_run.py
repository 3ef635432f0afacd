"""The sub-agent run record: what both apps know of a run, and the one module that knows it.

A run is what one sub-agent (`agent_name`) did for one main message, its parent
(`parent_msg_id`). Its replies are rows of the subagents app's table, which reach the parent by
a foreign key; its result is a `tool` message of the main conversation whose
`metadata.subagent` records the run (`SubagentRun`). The metadata key, the record's shape, its
parser, the name a page shows for a run, and the relation through which a main message reaches
the sub-agent table (`subagents.models` takes its name from here) are written here and nowhere
else (tests/test_import_graph.py): the memory app reads sub-agent runs through this module and
never imports `subagents`, which imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext_lazy

from memory.models import MainMessage, Role

# The key of a result's `metadata` that records its run. Only the service sets it: a client
# that could would forge a finished run, and block the real one (409).
RUN_METADATA_KEY = "subagent"
# The reverse name of the sub-agent table's foreign key to `main_messages`
# (`SubagentMessage.parent_msg`): a main message's sub-agent replies.
REPLIES = "subagent_messages"
# The replies' field naming the sub-agent, read across that relation.
REPLY_AGENT_NAME = "agent_name"

# The name shown for a run whose stored record names none.
UNNAMED_RUN = gettext_lazy("(no sub-agent name recorded)")


@dataclass(frozen=True)
class SubagentRun:
    """A run's record, as its result message stores it.

    The service writes every field. Rows stored before the API refused client-set run
    records, and imports, may hold anything there: `run_in` reads a field that is not of its
    shape as None (`truncated` as False), so that pages never fail on it.
    """

    parent_msg_id: int | None
    agent_name: str | None
    truncated: bool = False
    original_tokens: int | None = None

    @property
    def label(self) -> str:
        """The run's name where a page shows it; a placeholder when the record has none."""
        return self.agent_name or str(UNNAMED_RUN)

    def as_metadata(self) -> dict[str, Any]:
        """The record as `metadata.subagent` stores it."""
        return {
            "parent_msg_id": self.parent_msg_id,
            "agent_name": self.agent_name,
            "truncated": self.truncated,
            "original_tokens": self.original_tokens,
        }


def run_in(metadata: Any) -> SubagentRun | None:
    """The run a message's metadata records, or None when it records none (no key, or no
    JSON object under it)."""
    run = metadata.get(RUN_METADATA_KEY) if isinstance(metadata, dict) else None
    if not isinstance(run, dict):
        return None
    parent, name = run.get("parent_msg_id"), run.get("agent_name")
    tokens = run.get("original_tokens")
    return SubagentRun(
        parent_msg_id=parent if type(parent) is int and parent >= 1 else None,
        agent_name=name if isinstance(name, str) else None,
        truncated=run.get("truncated") is True,
        original_tokens=tokens if type(tokens) is int else None,
    )


# What stored_record answers for metadata that records no run.
NO_RECORD = object()


def stored_record(metadata: Any) -> Any:
    """The run's record exactly as the metadata holds it (odd or not), or NO_RECORD: what an
    edit of a message must leave as it is."""
    return metadata.get(RUN_METADATA_KEY, NO_RECORD) if isinstance(metadata, dict) else NO_RECORD


def result_run(message: MainMessage) -> SubagentRun | None:
    """The run whose result this message is, if it is one with both its links (a `tool`
    message whose record names its parent and its sub-agent); odd records show as plain tool
    messages."""
    run = run_in(message.metadata) if message.role == Role.TOOL else None
    if run is None or run.parent_msg_id is None or run.agent_name is None:
        return None
    return run


def with_run(metadata: dict[str, Any] | None, run: SubagentRun) -> dict[str, Any]:
    """A result message's metadata: the client's, with the service's record of the run."""
    return {**(metadata or {}), RUN_METADATA_KEY: run.as_metadata()}


def results_of(parent_msg_id: int, agent_name: str | None = None) -> Q:
    """The condition on main messages that records them as results of the runs hanging from
    one parent (of one sub-agent's, with `agent_name`)."""
    condition = Q(role=Role.TOOL, **{f"metadata__{RUN_METADATA_KEY}__parent_msg_id": parent_msg_id})
    if agent_name is not None:
        condition &= Q(**{f"metadata__{RUN_METADATA_KEY}__agent_name": agent_name})
    return condition


# A parent message's sub-agent runs: {agent name: finished}, by (agent, session, parent id).
Runs = dict[tuple[str, str, int], dict[str, bool]]


def runs_started(parents: QuerySet[MainMessage], results: QuerySet[MainMessage]) -> Runs:
    """The sub-agent runs that `parents` started: a run with replies recorded (the sub-agent
    table's rows, read through its foreign key's reverse name), or finished (a result among
    `results`). Two queries, however many messages."""
    runs: Runs = {}
    replied = parents.filter(**{f"{REPLIES}__isnull": False}).values_list(
        "agent_id", "session_id", "pk", f"{REPLIES}__{REPLY_AGENT_NAME}"
    )
    for agent_id, session_id, parent, name in replied.distinct():
        runs.setdefault((agent_id, session_id, parent), {}).setdefault(name, False)
    finished = results.filter(role=Role.TOOL, metadata__has_key=RUN_METADATA_KEY)
    for message in finished.only("agent_id", "session_id", "role", "metadata"):
        run = result_run(message)
        if run is not None:
            key = (message.agent_id, message.session_id, run.parent_msg_id)
            runs.setdefault(key, {})[run.agent_name] = True
    return runs


def transcript_count(parents: QuerySet[MainMessage]) -> int:
    """How many sub-agent transcript rows hang from `parents` (they go with them, by the
    database's ON DELETE CASCADE): a forget request's receipt counts them."""
    return parents.aggregate(count=Count(REPLIES))["count"]
