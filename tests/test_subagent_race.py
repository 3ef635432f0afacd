"""Finishing a sub-agent run is atomic on both engines: of requests racing to finish one run,
one wins and the others answer 409; a reply recorded while the run finishes lands before the
result or not at all.

On PostgreSQL (READ COMMITTED) each request would see the run open, as no result is
committed yet; the parent message's row lock makes them take turns, as SQLite's write
transaction already does. Real threads, each with its own connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections, transaction
from django.test import Client

from memory.auth import api_key_create
from memory.models import MainMessage
from memory.validation import Conflict
from subagents.models import SubagentMessage
from subagents.runs import run_results, subagent_finish, subagent_record
from tests.conftest import ApiClient
from tests.factories import add_message

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RACERS = 8


class InThread:
    """A call run in a thread of its own, with its own database connection."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.result: object = None
        self.thread = threading.Thread(target=self._run, args=(call,))
        self.thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.result = call()
        except Exception as exc:
            self.result = exc
        finally:
            connections.close_all()  # this thread's own

    def join(self, seconds: float = 60) -> object:
        self.thread.join(seconds)
        return self.result


def at_once(calls: list[Callable[[], object]]) -> list[object]:
    """The calls' results, each run in its thread, all started together."""
    start = threading.Barrier(len(calls))

    def when_all_are_ready(call: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            start.wait(30)
            return call()

        return run

    threads = [InThread(when_all_are_ready(call)) for call in calls]
    return [thread.join() for thread in threads]


def test_it_finishes_a_run_once_when_8_requests_race():
    key = api_key_create(agent_id="agent-a")[1]
    parents = [add_message(f"Ask the coder, {n}.", agent_id="agent-a") for n in range(3)]

    for parent in parents:

        def finish(parent: MainMessage = parent) -> int:
            api = ApiClient(Client(), key)
            body = {"agent_name": "coder", "content": "The function is done."}
            return api.post(f"/messages/{parent.pk}/subagent/result", body).status_code

        statuses = at_once([finish] * RACERS)

        assert sorted(statuses) == [201] + [409] * (RACERS - 1)
        assert run_results(parent, "coder").count() == 1


def test_a_reply_recorded_while_the_run_finishes_waits_and_is_refused():
    parent = add_message("Ask the coder.", agent_id="agent-a")
    finishing, go_on = threading.Event(), threading.Event()

    def finish() -> MainMessage:  # its transaction stays open until told to go on
        with transaction.atomic():
            result = subagent_finish(parent=parent, agent_name="coder", content="Done.")
            finishing.set()
            assert go_on.wait(30)
        return result

    def record() -> object:
        return subagent_record(
            parent=parent, agent_name="coder", role="assistant", content="One more thought."
        )

    finisher = InThread(finish)
    assert finishing.wait(30)
    recorder = InThread(record)
    recorder.thread.join(1)
    assert recorder.thread.is_alive()  # waiting for the finish to commit, not past it
    go_on.set()

    assert isinstance(finisher.join(), MainMessage)
    assert isinstance(recorder.join(), Conflict)
    assert not SubagentMessage.objects.filter(parent_msg=parent).exists()
    assert run_results(parent, "coder").count() == 1
