"""The FTS5 layer: English and Chinese matching, scoping, and triggers that follow the tables."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from memory import index
from memory.index import MEMORY_TEXT, MESSAGE_TEXT, SUMMARY_TEXT
from memory.models import LongTermMemory, MainMessage, ShortTermMemory
from orca_memory.db.functions import cjk_terms

pytestmark = pytest.mark.django_db

_sessions = itertools.count()


def message(content: str, *, agent: str = "a1", session: str | None = None) -> MainMessage:
    """A message in a session of its own unless told, so no other message is its context."""
    session = session or f"session-{next(_sessions)}"
    return MainMessage.objects.create(
        agent_id=agent, session_id=session, role="user", content=content
    )


def found(query: str, *, table=MESSAGE_TEXT, agent: str = "a1", **scope) -> list[int]:
    return [
        hit.id for hit in index.lexical_search(table, agent_id=agent, query=query, k=10, **scope)
    ]


def test_it_finds_english_words_ranked_by_bm25():
    hiking = message("We went hiking in the Alps; hiking is Caroline's favourite.")
    once = message("The weather was fine, and some hiking happened.", session="s2")
    message("Nothing to see here.", session="s3")

    assert found("Hiking") == [hiking.pk, once.pk]
    assert found("caroline") == [hiking.pk]
    assert found("hikes") == [hiking.pk, once.pk]  # porter stemming


def test_a_reply_is_found_through_the_messages_before_it():
    question = message("Did you go to the support group yesterday?", session="s1")
    answer = message("Yes, it was so powerful.", session="s1")
    later = message("Unrelated chatter about lunch.", session="s1")
    message("More chatter.", session="s1")  # three on: the question is out of its context
    message("Did you go?", session="s2")

    # The question itself first; its two successors through their context, at half weight.
    assert found("support group") == [question.pk, answer.pk, later.pk]


def test_the_date_and_speaker_are_indexed_with_the_text():
    said = MainMessage.objects.create(
        agent_id="a1",
        session_id="s1",
        role="user",
        content="I adopted a dog.",
        metadata={"speaker": "Caroline"},
        timestamp=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    )
    assert found("caroline") == [said.pk]
    assert found("May 2023") == [said.pk]
    assert found("user") == []  # the speaker stands in for the role


def test_it_finds_two_character_chinese_words():
    tea = message("我的偏好是喝茶，不喝咖啡。")
    coffee = message("他每天早上都喝咖啡")
    message("今天天气很好")

    assert found("偏好") == [tea.pk]
    assert sorted(found("咖啡")) == sorted([tea.pk, coffee.pk])
    assert found("茶") == [tea.pk]  # one character, at the end of a run
    assert found("我喜欢什么饮料") == []  # none of its bigrams occur
    assert found("用户的偏好是什么") == [tea.pk]


def test_it_finds_mixed_chinese_and_english():
    mixed = message("部署用Django和sqlite-vec")
    assert found("Django") == [mixed.pk]
    assert found("部署") == [mixed.pk]
    assert found("sqlite vec") == [mixed.pk]


def test_it_scopes_by_agent_and_session_exactly():
    mine = message("deploy on friday", agent="team-a", session="s1")
    other_session = message("deploy on monday", agent="team-a", session="s2")
    message("deploy secrets", agent="team a", session="s1")  # tokenizes like "team-a"
    message("deploy secrets", agent="team-a-b", session="s1")

    assert sorted(found("deploy", agent="team-a")) == sorted([mine.pk, other_session.pk])
    assert found("deploy", agent="team-a", session_id="s1") == [mine.pk]
    assert found("deploy", agent="nobody") == []


def test_it_follows_updates_and_deletes():
    row = message("the launch is in march")
    assert found("march") == [row.pk]

    row.content = "the launch moved to 四月"
    row.save()
    assert found("march") == []
    assert found("四月") == [row.pk]

    MainMessage.objects.filter(pk=row.pk).update(agent_id="a2")
    assert found("launch") == []
    assert found("launch", agent="a2") == [row.pk]

    row.delete()
    assert found("launch", agent="a2") == []


def test_it_follows_plain_sql_writes(sql):
    sql(
        "INSERT INTO main_messages (session_id, role, content) VALUES ('s9', 'user', 'raw 记忆 row')"
    )
    (row_id,) = sql("SELECT id FROM main_messages")[0]
    assert found("记忆", agent="default") == [row_id]
    sql("DELETE FROM main_messages WHERE id = %s", [row_id])
    assert found("记忆", agent="default") == []


def test_it_indexes_summaries_and_long_term_memories():
    summary = ShortTermMemory.objects.create(agent_id="a1", session_id="s1", content="用户喜欢绿茶")
    ShortTermMemory.objects.create(agent_id="a1", session_id="s2", content="用户喜欢红茶")
    memory = LongTermMemory.objects.create(
        agent_id="a1", content="Prefers dark mode", memory_type="preference"
    )

    assert found("喜欢", table=SUMMARY_TEXT, session_id="s1") == [summary.pk]
    assert found("dark mode", table=MEMORY_TEXT) == [memory.pk]
    assert found("dark mode", table=MEMORY_TEXT, agent="a2") == []
    with pytest.raises(ValueError):
        found("dark", table=MEMORY_TEXT, session_id="s1")


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "NEAR(a b",
        "a* OR",
        "AND",
        "body:secret",
        "{body cjk}:x",
        "-x",
        "^x",
        "",
        "?!",
        "x'); --",
    ],
)
def test_it_treats_fts5_syntax_in_queries_as_text(query):
    message("AND body NEAR x secret")
    index.lexical_search(MESSAGE_TEXT, agent_id="a1", query=query, k=5)  # must not raise


def test_cjk_terms_are_unigrams_and_overlapping_bigrams():
    assert cjk_terms("我的偏好 is tea，茶") == "我 的 偏 好 我的 的偏 偏好 茶"
    assert cjk_terms("我的偏好", unigrams=False) == "我的 的偏 偏好"
    assert cjk_terms("茶", unigrams=False) == "茶"
    assert cjk_terms("ひらがな한국어") == "ひ ら が な 한 국 어 ひら らが がな な한 한국 국어"
    assert cjk_terms(None) == ""
