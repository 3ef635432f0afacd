"""Sub-agent runs: a run is what one sub-agent (`agent_name`) did for one main message.

Its complete replies go to `subagent_messages`, never into the main conversation; finishing
the run stores only its result, as a `tool` message in `main_messages` that links back.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from memory.messages import message_add
from memory.models import MainMessage, Role
from memory.subagent_run import SubagentRun, results_of
from memory.tokens import estimate_tokens, truncate_to_tokens
from memory.validation import Conflict, InvalidInput, check_content, check_identifier
from subagents.models import SubagentMessage, SubagentRole

# The design's guard against a sub-agent flooding the main context.
RESULT_TOKEN_LIMIT = 10_000


def run_results(parent: MainMessage, agent_name: str | None = None) -> QuerySet[MainMessage]:
    """The result messages of the runs hanging from `parent` (one per finished run)."""
    results = MainMessage.objects.filter(results_of(parent.pk, agent_name))
    return results.filter(agent_id=parent.agent_id).order_by("id")


def _check_open(parent: MainMessage, agent_name: str) -> None:
    if run_results(parent, agent_name).exists():
        raise Conflict(f"the run of {agent_name!r} for message {parent.pk} is already finished")


def _lock_open(parent: MainMessage, agent_name: str) -> None:
    """_check_open inside the writing transaction, the parent message's row locked first.

    Finishing and recording on one parent then take turns until the transaction ends, so
    none of them sees the run open while another finishes it: on PostgreSQL too, whose READ
    COMMITTED would let each see no result yet (SQLite's write transaction already excludes
    the others).
    """
    list(MainMessage.objects.select_for_update().filter(pk=parent.pk).values_list("pk"))
    _check_open(parent, agent_name)


def subagent_check(*, parent: MainMessage, agent_name: str, role: str, content: str) -> None:
    """What subagent_record checks before it writes; raises InvalidInput, or Conflict when
    the run is finished. Apart so that a form (the admin's) can show the errors."""
    check_identifier("agent_name", agent_name)
    check_content("content", content)
    if role not in SubagentRole.values:
        raise InvalidInput(f"role must be one of {', '.join(SubagentRole.values)}")
    _check_open(parent, agent_name)


def subagent_record(
    *, parent: MainMessage, agent_name: str, role: str, content: str
) -> SubagentMessage:
    """Record one complete reply of a sub-agent (never streamed tokens)."""
    subagent_check(parent=parent, agent_name=agent_name, role=role, content=content)
    with transaction.atomic():
        _lock_open(parent, agent_name)
        return SubagentMessage.objects.create(
            parent_msg=parent,
            session_id=parent.session_id,
            agent_name=agent_name,
            role=role,
            content=content,
        )


def subagent_finish(*, parent: MainMessage, agent_name: str, content: str) -> MainMessage:
    """Store the run's result in the main conversation, cut at RESULT_TOKEN_LIMIT tokens."""
    check_identifier("agent_name", agent_name)
    check_content("content", content)
    result, truncated = truncate_to_tokens(content, RESULT_TOKEN_LIMIT)
    with transaction.atomic():
        _lock_open(parent, agent_name)
        return message_add(
            agent_id=parent.agent_id,
            session_id=parent.session_id,
            role=Role.TOOL,
            content=result,
            subagent_run=SubagentRun(
                parent_msg_id=parent.pk,
                agent_name=agent_name,
                truncated=truncated,
                original_tokens=estimate_tokens(content),
            ),
        )


def subagent_transcript(parent: MainMessage) -> QuerySet[SubagentMessage]:
    return SubagentMessage.objects.filter(parent_msg=parent).order_by("timestamp", "id")
