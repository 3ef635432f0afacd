"""Updates that supersede (issue 34): a newer memory replaces an older one of the same subject,
which keeps its text and history and leaves active recall; "as of" a time shows what held
then; a supersession can be undone. The offline rule, the chat model's choice, and reading."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from functools import partial

import numpy as np
import pytest
from django.utils import timezone

from memory import consolidation, embeddings, vectors
from memory.cleanup import cleanup
from memory.context import context_build
from memory.context_items import MemoryItem
from memory.dates import day_label
from memory.embeddings import LocalEmbedder
from memory.extraction import Extracted, speaks_for_a_person
from memory.memories import (
    memories_of,
    memory_chain,
    memory_create,
    memory_delete,
    memory_supersede,
    memory_unsupersede,
)
from memory.models import LongTermMemory, LongTermMemoryHistory, ShortTermMemory
from memory.supersession import SAME_SUBJECT_TEXT, verdict
from memory.validation import InvalidInput
from tests.factories import add_message, consolidate_session

pytestmark = pytest.mark.django_db

say = partial(add_message, agent_id="agent-a")
MARCH = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
JUNE = datetime(2026, 6, 15, 18, 30, tzinfo=UTC)


def fact(content: str, *, said: datetime | None = None, actor: str = "consolidation"):
    """A memory, first said at `said` (provenance writes `valid_from`; set here directly)."""
    memory = memory_create(agent_id="agent-a", content=content, memory_type="fact", actor=actor)
    if said is not None:
        LongTermMemory.objects.filter(pk=memory.pk).update(valid_from=said)
        memory.refresh_from_db()
    return memory


@pytest.fixture
def paris_then_berlin():
    paris = fact("I live in Paris", said=MARCH)
    berlin = fact("I moved to Berlin", said=JUNE)
    memory_supersede(paris, berlin, actor="consolidation")
    return paris, berlin


# --- the flows -------------------------------------------------------------------------------


def test_it_supersedes_the_old_memory_from_when_the_new_value_was_said(paris_then_berlin):
    paris, berlin = paris_then_berlin

    paris.refresh_from_db()
    assert (paris.valid_until, paris.superseded_by_id) == (JUNE, berlin.pk)
    assert paris.content == "I live in Paris"  # its text stays
    assert paris.is_superseded() and not paris.is_expired() and paris.archived_at is None
    row = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (row.action, row.actor, row.label) == ("supersede", "consolidation", "superseded")
    assert row.changes == {"valid_until": JUNE.isoformat(), "superseded_by": berlin.pk}
    assert row.old_values == {"valid_until": None, "superseded_by": None}
    assert [(f.name, f.old, f.new) for f in row.field_changes] == [
        ("valid_until", None, JUNE),
        ("superseded_by", None, berlin.pk),
    ]


def test_undo_makes_the_old_memory_current_again_with_a_history_row(paris_then_berlin):
    paris, berlin = paris_then_berlin

    memory_unsupersede(paris, actor="ui:ann")

    paris.refresh_from_db()
    assert (paris.valid_until, paris.superseded_by_id) == (None, None)
    assert set(memories_of("agent-a")) == {paris, berlin}
    row = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (row.action, row.actor, row.label) == ("unsupersede", "ui:ann", "supersession undone")
    assert row.old_values == {"valid_until": JUNE.isoformat(), "superseded_by": berlin.pk}
    # Undoing what is current already writes nothing.
    memory_unsupersede(paris, actor="ui:ann")
    assert LongTermMemoryHistory.objects.filter(memory_id=paris.pk).count() == 3


@pytest.mark.parametrize(
    "case", ["itself", "already superseded", "said before", "another agent", "new superseded"]
)
def test_it_refuses_a_supersession_that_makes_no_sense(paris_then_berlin, case):
    paris, berlin = paris_then_berlin
    rome = fact("I moved to Rome", said=JUNE + timedelta(days=30))
    old, new = {
        "itself": (berlin, berlin),
        "already superseded": (paris, rome),
        "said before": (rome, berlin),
        "another agent": (
            memory_create(agent_id="agent-b", content="x", memory_type="fact", actor="api"),
            rome,
        ),
        "new superseded": (rome, paris),
    }[case]

    with pytest.raises(InvalidInput):
        memory_supersede(old, new, actor="api")

    assert LongTermMemory.objects.filter(superseded_by_id__isnull=False).count() == 1


def test_deleting_the_newer_memory_makes_the_older_current_again(paris_then_berlin):
    paris, berlin = paris_then_berlin

    memory_delete(berlin, actor="api")

    paris.refresh_from_db()
    assert (paris.valid_until, paris.superseded_by_id) == (None, None)
    assert list(memories_of("agent-a")) == [paris]
    row = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (row.action, row.changes["reason"]) == ("unsupersede", "the newer memory was deleted")


def test_deleting_the_middle_of_a_chain_links_its_ends(paris_then_berlin):
    paris, berlin = paris_then_berlin
    rome = fact("I moved to Rome", said=JUNE + timedelta(days=30))
    memory_supersede(berlin, rome, actor="consolidation")

    memory_delete(berlin, actor="api")

    paris.refresh_from_db()
    assert (paris.superseded_by_id, paris.valid_until) == (rome.pk, JUNE)
    assert list(memories_of("agent-a")) == [rome]
    assert memory_chain(rome).older == [paris]


def test_the_chain_lists_both_sides_and_ends_at_a_deleted_memory(paris_then_berlin):
    paris, berlin = paris_then_berlin
    rome = fact("I moved to Rome", said=JUNE + timedelta(days=30))
    memory_supersede(berlin, rome, actor="consolidation")

    assert memory_chain(berlin).older == [paris]
    assert memory_chain(berlin).newer == [rome]
    assert memory_chain(paris).newer == [berlin, rome]
    assert memory_chain(rome).older == [berlin, paris]
    # Deleted by plain SQL (no flow to re-link it): the chain ends at its id.
    LongTermMemory.objects.filter(pk=rome.pk).delete()
    assert (memory_chain(paris).newer, memory_chain(paris).deleted) == ([berlin], rome.pk)
    assert not memory_chain(fact("I like tea"))


def test_the_cleanup_archives_superseded_memories_first(paris_then_berlin):
    paris, berlin = paris_then_berlin
    LongTermMemory.objects.filter(pk=paris.pk).update(access_count=9, confidence=1.0)

    assert cleanup("agent-a", cap=1) == 1

    assert LongTermMemory.objects.get(pk=paris.pk).archived_at is not None
    assert LongTermMemory.objects.get(pk=berlin.pk).archived_at is None


# --- reading: lists, as of, context ------------------------------------------------------------


def test_the_list_holds_current_memories_and_as_of_a_time_the_ones_that_held(paris_then_berlin):
    paris, berlin = paris_then_berlin

    assert list(memories_of("agent-a")) == [berlin]
    assert set(memories_of("agent-a", include_superseded=True)) == {paris, berlin}
    assert list(memories_of("agent-a", as_of=JUNE - timedelta(days=1))) == [paris]
    assert list(memories_of("agent-a", as_of=JUNE)) == [berlin]
    assert list(memories_of("agent-a", as_of=MARCH - timedelta(days=1))) == []
    assert list(memories_of("agent-a", query="Paris")) == []
    assert list(memories_of("agent-a", query="Paris", include_superseded=True)) == [paris]
    assert list(memories_of("agent-a", query="Paris", as_of=MARCH + timedelta(days=1))) == [paris]


def test_the_context_never_shows_a_superseded_memory_and_dates_the_current_one(
    paris_then_berlin, fake_embedder
):
    paris, berlin = paris_then_berlin
    vectors.embed_pending()

    for query in ("Where do I live? Paris or Berlin?", None):
        context = context_build(agent_id="agent-a", session_id="s1", query=query, model_window=8192)
        items = context.layers["long_term"].items
        assert [item.id for item in items] == [berlin.pk]
        assert items[0].sent == ("- [fact, since 15 June 2026] I moved to Berlin\n",)
        assert "Paris" not in context.messages[0]["content"]


def test_a_memory_anchored_to_the_day_it_holds_from_is_not_dated_twice():
    """A memory's relative time is anchored in its own text ("[15 June 2026] ... yesterday"):
    its line does not say that day again, and says another day it holds from."""

    def line(since: date, *, expired: bool = False) -> str:
        text = "[15 June 2026] I moved to Berlin yesterday"
        fields = {"confidence": 0.5, "access_count": 0, "curated": False}
        item = MemoryItem.made(1, text, memory_type="fact", expired=expired, since=since, **fields)
        return item.sent[0]

    assert line(date(2026, 6, 15)) == "- [fact] [15 June 2026] I moved to Berlin yesterday\n"
    assert line(date(2026, 6, 15), expired=True).startswith("- [fact, expired] [15 June 2026]")
    assert line(date(2026, 6, 20)).startswith("- [fact, since 20 June 2026] [15 June 2026]")


def test_the_api_lists_current_memories_and_asks_as_of_a_time(api, paris_then_berlin):
    paris, berlin = paris_then_berlin

    current = api.get("/memories").json()
    assert [m["id"] for m in current["items"]] == [berlin.pk]
    assert {
        key: current["items"][0][key]
        for key in ("valid_from", "valid_until", "superseded_by", "superseded")
    } == {
        "valid_from": "2026-06-15T18:30:00Z",
        "valid_until": None,
        "superseded_by": None,
        "superseded": False,
    }
    every = api.get("/memories?include_superseded=true").json()["items"]
    assert {m["id"]: m["superseded"] for m in every} == {paris.pk: True, berlin.pk: False}
    then = api.get("/memories?as_of=2026-04-01T00:00:00Z").json()["items"]
    assert [(m["id"], m["superseded_by"]) for m in then] == [(paris.pk, berlin.pk)]
    # A superseded memory is still found by its id, with its chain.
    assert api.get(f"/memories/{paris.pk}").json()["valid_until"] == "2026-06-15T18:30:00Z"


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ("as_of=2026-04-01T00:00:00Z&include_superseded=true", None),
        ("as_of=2026-04-01T00:00:00", ["query", "as_of"]),  # naive: ambiguous
        ("as_of=yesterday", ["query", "as_of"]),
    ],
)
def test_the_api_refuses_an_as_of_it_cannot_answer(api, paris_then_berlin, query, loc):
    response = api.get(f"/memories?{query}")

    assert response.status_code == 422
    body = response.json()
    assert set(body) == {"detail", "errors"}
    if loc is not None:
        assert body["errors"][0]["loc"] == loc


# --- the offline rule ------------------------------------------------------------------------

# A newer statement of the same subject with another value: the new one supersedes.
UPDATES = [
    ("I live in Paris", "I moved to Berlin"),
    ("my budget is $500", "my budget is now $800"),
    ("I work at Google", "I now work at Microsoft"),
    ("My phone number is 555-1234", "My new phone number is 555-9876"),
    ("I'm vegetarian", "I'm no longer vegetarian, I eat fish now"),
    ("我住在上海", "我搬到深圳了"),
    ("我的预算是500元", "我的预算现在是800元"),
    ("我在腾讯工作", "我现在在阿里巴巴工作"),
    ("项目截止日期是3月3日", "项目截止日期改到了4月10日"),
]
# Both hold, or they are about other things: both stay. Some say a change of something else.
BOTH_HOLD = [
    ("I like tea", "I like coffee"),
    ("I like tea", "I now also like coffee"),
    ("my sister lives in Rome", "my brother lives in Oslo"),
    ("I live in Paris", "my brother moved to Oslo"),
    ("I live in Paris", "I moved my meeting to Friday"),
    ("my budget is $500", "my rent is $1200"),
    ("I live in Berlin now", "I now live in Berlin"),  # the same value: a duplicate
    ("我喜欢喝茶", "我喜欢喝咖啡"),
    ("我喜欢喝茶", "我现在也喜欢喝咖啡"),
    ("我姐姐住在罗马", "我哥哥住在奥斯陆"),
    ("我住在上海", "我哥哥搬到北京了"),
    ("The user likes tea", "The user moved to Berlin"),
    ("The user lives in Paris", "The user now works at Google"),
]


@pytest.fixture(scope="module")
def default_model() -> LocalEmbedder:
    return LocalEmbedder(embeddings.local_model(None))


def cosine(model: LocalEmbedder, old: str, new: str) -> float:
    a, b = (np.array(v) for v in model.embed([old, new]))
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize(("old", "new"), UPDATES)
def test_the_rule_supersedes_a_changed_value_with_the_default_model(default_model, old, new):
    judged = verdict(
        old,
        new,
        similarity=cosine(default_model, old, new),
        same_subject=default_model.thresholds.same_subject,
    )
    assert judged.supersedes, judged.why


@pytest.mark.parametrize(("old", "new"), BOTH_HOLD)
def test_the_rule_leaves_facts_that_both_hold_with_the_default_model(default_model, old, new):
    judged = verdict(
        old,
        new,
        similarity=cosine(default_model, old, new),
        same_subject=default_model.thresholds.same_subject,
    )
    assert not judged.supersedes, judged.why


def test_without_vectors_the_text_decides_and_a_distant_wording_is_left_alone():
    assert verdict("my budget is $500", "my budget is now $800", similarity=None, same_subject=1)
    assert verdict("我的预算是500元", "我的预算现在是800元", similarity=None, same_subject=1)
    # Few shared words: the text alone cannot say it is one subject, so both stay.
    moved = verdict("I live in Paris", "I moved to Berlin", similarity=None, same_subject=1)
    assert (moved.supersedes, moved.why) == (False, "another subject")
    assert SAME_SUBJECT_TEXT == 0.5


# --- consolidation ---------------------------------------------------------------------------


@pytest.fixture
def one_memory_per_message(monkeypatch):
    """Every message the person says is one fact: these tests are about what becomes of the
    items, not about the extractor."""
    monkeypatch.setattr(
        consolidation,
        "extract_with_sources",
        lambda messages: [
            (Extracted("fact", m.content), [m]) for m in messages if speaks_for_a_person(m)
        ],
    )


def consolidated(session: str, *texts: str):
    for text in texts:
        say(text, session_id=session)
    return consolidate_session(agent_id="agent-a", session_id=session)


@pytest.mark.parametrize(
    ("old", "new"),
    [("my budget is $500", "my budget is now $800"), ("我的预算是500元", "我的预算现在是800元")],
)
def test_consolidation_supersedes_an_updated_fact_without_vectors(
    clock, one_memory_per_message, old, new
):
    consolidated("s1", old)
    clock()
    run = consolidated("s2", new)

    assert (run.created, run.merged) == (1, 0)
    before, after = LongTermMemory.objects.order_by("id")
    assert (before.content, before.superseded_by_id) == (old, after.pk)
    assert before.valid_until == after.said_at == after.valid_from  # when the change was said
    assert list(memories_of("agent-a")) == [after]
    row = LongTermMemoryHistory.objects.filter(memory_id=before.pk).latest("id")
    assert row.changes["decided_by"] == "rules"
    assert row.changes["consolidation_run"] == run.pk


def test_consolidation_supersedes_by_the_default_models_vectors(
    clock, one_memory_per_message, monkeypatch, default_model
):
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: default_model)
    consolidated("s1", "I live in Paris", "I like tea", "我住在上海")
    vectors.embed_pending()
    clock()

    run = consolidated("s2", "I moved to Berlin", "I like coffee", "我搬到深圳了")

    assert (run.created, run.merged) == (3, 0)
    current = {m.content for m in memories_of("agent-a")}
    # One person has one home, in whichever language they say it: Shenzhen, said last.
    assert current == {"I like tea", "I like coffee", "我搬到深圳了"}
    superseded = LongTermMemory.objects.filter(valid_until__isnull=False)
    assert {m.content for m in superseded} == {"I live in Paris", "我住在上海", "I moved to Berlin"}


def test_the_rule_reads_past_the_extractors_labels():
    # extraction.memory_text dates a statement with a relative time word and names the speaker.
    dated = "[3 December 2026] Ana: My budget is now $800."
    assert verdict("Ana: My budget is $500.", dated, similarity=None, same_subject=1)
    same = verdict(
        "[1 May 2026] Ana: My budget is now $800.", dated, similarity=None, same_subject=1
    )
    assert (same.supersedes, same.why) == (False, "the same value")


def test_the_default_install_supersedes_end_to_end(clock, monkeypatch, default_model):
    """The rule extractor and the default model, as `make run` has them."""
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: default_model)
    consolidated("s1", "I live in Paris.", "I like green tea.")
    vectors.embed_pending()
    clock()
    consolidated("s2", "I moved to Berlin last month.", "I like coffee.")
    berlin = "[3 December 2026] I moved to Berlin last month.".replace(
        "3 December 2026", day_label(timezone.now().date())
    )
    assert sorted(m.content for m in memories_of("agent-a")) == [
        "I like coffee.",
        "I like green tea.",
        berlin,
    ]
    clock()

    consolidated("s3", "我搬到深圳了。")  # the same person, in Chinese

    current = sorted(m.content for m in memories_of("agent-a"))
    assert current == ["I like coffee.", "I like green tea.", "我搬到深圳了。"]
    old = LongTermMemory.objects.filter(valid_until__isnull=False)
    assert sorted(m.content for m in old) == ["I live in Paris.", berlin]


def test_a_duplicate_still_merges(clock, one_memory_per_message):
    consolidated("s1", "I live in Berlin now")
    clock()
    run = consolidated("s2", "I now live in Berlin")

    assert (run.created, run.merged) == (0, 1)
    assert not LongTermMemory.objects.filter(valid_until__isnull=False).exists()


def test_a_curated_memory_keeps_its_text_when_an_extraction_supersedes_it(
    api, clock, one_memory_per_message
):
    curated = api.post("/memories", {"content": "My budget is $500.", "memory_type": "fact"}).json()
    clock()

    consolidated("s1", "My budget is now $800.")

    old = LongTermMemory.objects.get(pk=curated["id"])
    assert (old.content, old.curated) == ("My budget is $500.", True)
    assert old.superseded_by.content == "My budget is now $800."
    assert LongTermMemoryHistory.objects.filter(memory_id=old.pk, action="update").count() == 0
    assert api.get("/memories").json()["items"][0]["content"] == "My budget is now $800."


# --- the chat model's choice ---------------------------------------------------------------


def summarised(session: str, text: str) -> None:
    say(text, session_id=session)
    ShortTermMemory.objects.create(agent_id="agent-a", session_id=session, content=text)


EXTRACTED_BERLIN = '{"memories": [{"type": "fact", "content": "The user moved to Berlin"}]}'


@pytest.fixture
def paris(clock, chat):
    answers, _ = chat
    summarised("s1", "The user lives in Paris")
    answers.append('{"memories": [{"type": "fact", "content": "The user lives in Paris"}]}')
    consolidate_session(agent_id="agent-a", session_id="s1")  # nothing near: not asked
    clock()
    summarised("s2", "The user moved to Berlin")
    return LongTermMemory.objects.get()


def test_the_chat_model_chooses_to_supersede(paris, chat):
    answers, prompts = chat
    answers += [
        EXTRACTED_BERLIN,
        f'{{"decisions": [{{"item": 0, "action": "supersede", "id": {paris.pk}}}]}}',
    ]

    run = consolidate_session(agent_id="agent-a", session_id="s2")

    assert (run.extractor, run.created, run.merged, run.reason) == ("llm", 1, 0, "")
    assert f"#{paris.pk} [fact]: The user lives in Paris" in prompts[-1]
    assert "新记忆 0 [fact]: The user moved to Berlin" in prompts[-1]
    paris.refresh_from_db()
    assert paris.superseded_by.content == "The user moved to Berlin"
    row = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (row.action, row.changes["decided_by"]) == ("supersede", "chat model")


def test_the_chat_model_sees_the_memories_of_the_attribute_an_item_gives_a_value_to(clock, chat):
    answers, prompts = chat
    summarised("s1", "The user works at Spotify")
    answers.append('{"memories": [{"type": "fact", "content": "The user works at Spotify"}]}')
    consolidate_session(agent_id="agent-a", session_id="s1")
    spotify = LongTermMemory.objects.get()
    clock()
    summarised("s2", "The user joined Stripe")
    # Another type and no shared word: only the attribute (employer) puts them side by side.
    answers += [
        '{"memories": [{"type": "preference", "content": "The user joined Stripe last month"}]}',
        f'{{"decisions": [{{"item": 0, "action": "supersede", "id": {spotify.pk}}}]}}',
    ]

    run = consolidate_session(agent_id="agent-a", session_id="s2")

    assert run.reason == ""
    assert f"#{spotify.pk} [fact]: The user works at Spotify" in prompts[-1]
    spotify.refresh_from_db()
    assert spotify.superseded_by.content == "The user joined Stripe last month"
    row = LongTermMemoryHistory.objects.filter(memory_id=spotify.pk).latest("id")
    assert row.changes["decided_by"] == "chat model"


@pytest.mark.parametrize(
    ("decision", "created", "merged"),
    [
        ('"action": "ignore"', 0, 0),
        ('"action": "add"', 1, 0),
        ('"action": "update", "id": {id}', 0, 1),
    ],
)
def test_the_chat_model_chooses_to_add_update_or_ignore(paris, chat, decision, created, merged):
    answers, _ = chat
    choice = decision.replace("{id}", str(paris.pk))
    answers += [EXTRACTED_BERLIN, f'{{"decisions": [{{"item": 0, {choice}}}]}}']

    run = consolidate_session(agent_id="agent-a", session_id="s2")

    assert (run.created, run.merged) == (created, merged)
    assert not LongTermMemory.objects.filter(valid_until__isnull=False).exists()


@pytest.mark.parametrize(
    "decision",
    [
        '{"decisions": [{"item": 0, "action": "supersede", "id": 99999}]}',  # not offered
        '{"decisions": [{"item": 0, "action": "replace", "id": {id}}]}',  # not an action
        '{"decisions": [{"item": 7, "action": "supersede", "id": {id}}]}',  # not an item
        '{"decisions": []}',
    ],
)
def test_an_invalid_decision_leaves_the_item_to_the_rules(paris, chat, decision):
    answers, _ = chat
    answers += [EXTRACTED_BERLIN, decision.replace("{id}", str(paris.pk))]

    run = consolidate_session(agent_id="agent-a", session_id="s2")

    # The rules: "lives in Paris" / "moved to Berlin" share too few words, but both give
    # the user's home a value (memory.attributes).
    assert (run.created, run.merged, run.reason) == (1, 0, "")
    paris.refresh_from_db()
    assert paris.superseded_by.content == "The user moved to Berlin"
    row = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (row.changes["decided_by"], row.changes["reason"]) == (
        "rules",
        "a new value of the same attribute (home)",
    )


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (["not json", "{still not"], "the chat model's answer was not valid JSON, twice"),
        ([401], "chat model answered 401: the API key was refused"),
    ],
)
def test_a_failing_chat_model_leaves_every_item_to_the_rules(clock, chat, failure, reason):
    answers, _ = chat
    summarised("s1", "The user's budget is $500")
    answers.append('{"memories": [{"type": "fact", "content": "The user\'s budget is $500"}]}')
    consolidate_session(agent_id="agent-a", session_id="s1")
    clock()
    summarised("s2", "The user's budget is now $800")
    answers += [
        '{"memories": [{"type": "fact", "content": "The user\'s budget is now $800"}]}',
        *failure,
    ]

    run = consolidate_session(agent_id="agent-a", session_id="s2")

    assert (run.status, run.extractor, run.created) == ("done", "llm", 1)
    assert run.reason == f"{reason}: the rules decided what each memory updates"
    assert [m.content for m in memories_of("agent-a")] == ["The user's budget is now $800"]
    assert not answers
