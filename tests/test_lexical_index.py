"""The FTS5 layer: English and Chinese matching, scoping, and triggers that follow the tables."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory import index, index_postgres, index_sqlite
from memory.index import MEMORY_TEXT, MESSAGE_TEXT, SUMMARY_TEXT
from memory.index_schema import query_terms
from memory.models import LongTermMemory, MainMessage, ShortTermMemory
from memory.text import cjk_terms, message_label

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


def test_a_rare_word_outranks_a_common_one_and_a_short_text_a_long_one():
    for n in range(8):
        message(f"Caroline talked about the weather, day {n}.")
    rare = message("Caroline mentioned pottery.")
    short = message("Pottery class.")
    long = message("Pottery, and then a very long story about buses, trains, ferries and bikes.")

    # BM25 on both engines: "caroline" is in most rows and weighs next to nothing, "pottery"
    # is rare; at the same count, the shorter text ranks first.
    assert found("caroline pottery")[:3] == [short.pk, rare.pk, long.pk]
    assert found("pottery") == [short.pk, rare.pk, long.pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's text index")
def test_postgres_indexes_the_text_with_its_agent():
    # GIN over (agent_id, doc) in place of doc alone (migration 0015): a search finds one
    # agent's rows in the index instead of reading every agent's from the table.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexdef FROM pg_indexes WHERE tablename LIKE 'fts\\_%%' "
            "AND indexdef LIKE '%%USING gin%%' ORDER BY tablename"
        )
        gin = cursor.fetchall()
    assert [table for table, _ in gin] == sorted(table.name for table in index.LEXICAL_TABLES)
    assert all(definition.endswith("USING gin (agent_id, doc)") for _, definition in gin), gin


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


@pytest.mark.parametrize(
    ("timestamp", "role", "metadata"),
    [
        *((datetime(2023, month, 2, 23, 59, tzinfo=UTC), "user", None) for month in range(1, 13)),
        (datetime(2024, 2, 29, 0, 0, tzinfo=UTC), "user", {"speaker": " Caroline\n"}),
        (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "assistant", {"name": "Mel"}),
        (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "user", {"speaker": 7, "name": "Mel"}),
        (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "user", {"speaker": " \t", "name": ""}),
        (None, "tool", {"speaker": "Caroline"}),
    ],
)
def test_the_database_writes_the_label_as_memory_text_does(timestamp, role, metadata):
    """The label the triggers index: on SQLite memory.text.message_label itself, on
    PostgreSQL migration 0013's SQL, which must write the same (its day as dates.day_label)."""
    jsonb = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT orca_message_label(%s, %s, {jsonb})",
            [timestamp, role, None if metadata is None else json.dumps(metadata)],
        )
        (label,) = cursor.fetchone()

    assert label == message_label(timestamp, role, metadata)


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
    stored = message("AND body NEAR x secret")
    other = message("nothing to see")
    for now in (None, datetime.now(UTC)):
        hits = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query=query, k=5, now=now)
        # Only the words are matched: the message holding them, never every row.
        found = {hit.id for hit in hits}
        assert other.pk not in found
        words = {w.lower() for w in re.findall(r"\w+", query)}
        assert (stored.pk in found) == bool(words & {"and", "body", "near", "x", "secret"})


def expression(query: str, now: datetime | None = None) -> str | None:
    return index_sqlite.match_expression(query_terms(query, now=now))


def test_a_query_without_days_has_the_same_expression_with_or_without_now():
    now = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
    for query in ("green tea", "what is the budget", "用户的偏好是什么", "the 2 of us"):
        assert expression(query, now=now) == expression(query)
    assert expression("green tea", now=now) == '{body ctx}:"green" OR {body ctx}:"tea"'


def test_a_day_in_a_query_is_a_phrase_on_the_label_in_place_of_its_words():
    now = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
    assert expression("5月2号那天", now=now) == 'body:"2 May" OR {cjk ctx}:"那天"'
    assert expression("tea on May 2nd, 2023", now=now) == ('body:"2 May 2023" OR {body ctx}:"tea"')
    assert expression("what did I do yesterday?", now=now) == 'body:"10 May 2023"'
    assert expression("what did I do", now=now) == (  # only stop words: kept
        '{body ctx}:"what" OR {body ctx}:"did" OR {body ctx}:"i" OR {body ctx}:"do"'
    )
    # Without `now` (summaries, long-term memories), as before: the digits match any "5" or "2".
    assert expression("5月2号", now=None) == (
        '{body ctx}:"5" OR {body ctx}:"2" OR {cjk ctx}:"月" OR {cjk ctx}:"号"'
    )


def test_a_day_finds_the_messages_of_that_day_by_their_label():
    def on(day: datetime, content: str) -> MainMessage:
        return MainMessage.objects.create(
            agent_id="a1", session_id="s1", role="user", content=content, timestamp=day
        )

    may_2 = on(datetime(2023, 5, 2, 12, tzinfo=UTC), "Lunch with Anna")
    may_2_last_year = on(datetime(2022, 5, 2, 12, tzinfo=UTC), "Lunch with Anna")
    on(datetime(2023, 5, 3, 12, tzinfo=UTC), "Lunch with Anna, 5 of us, 2 hours")
    now = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)

    def found_on(query: str) -> list[int]:
        hits = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query=query, k=10, now=now)
        return sorted(hit.id for hit in hits)

    both = sorted([may_2.pk, may_2_last_year.pk])
    assert found_on("5月2号") == found_on("5月2日") == found_on("May 2") == both
    assert found_on("2023年5月2日") == found_on("2 May 2023") == [may_2.pk]
    assert found_on("9天前") == [may_2.pk]


def test_only_dated_tables_take_a_now():
    with pytest.raises(ValueError):
        index.lexical_search(MEMORY_TEXT, agent_id="a1", query="May 2", k=5, now=datetime.now(UTC))


@pytest.mark.parametrize(
    "query", ["99月99号", "上周八", "0月0号", '"May 2" OR x', 'May 2"', "上" * 5000 + "周三"]
)
def test_hostile_days_do_not_raise(query):
    message("AND body NEAR x secret")
    now = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
    index.lexical_search(MESSAGE_TEXT, agent_id="a1", query=query, k=5, now=now)


def test_cjk_terms_are_unigrams_and_overlapping_bigrams():
    assert cjk_terms("我的偏好 is tea，茶") == "我 的 偏 好 我的 的偏 偏好 茶"
    assert cjk_terms("我的偏好", unigrams=False) == "我的 的偏 偏好"
    assert cjk_terms("茶", unigrams=False) == "茶"
    assert cjk_terms("ひらがな한국어") == "ひ ら が な 한 국 어 ひら らが がな な한 한국 국어"
    assert cjk_terms(None) == ""


# --- terms that weigh nothing (SQLite: FTS5's bm25 gives them an idf of 1e-6) -------------


@pytest.fixture
def prune_any_table(monkeypatch):
    """Words in half the rows are left out from 10,000 rows on; here from the first."""
    monkeypatch.setattr(index_sqlite, "PRUNE_FROM_ROWS", 1)


def weighing(query: str) -> list[str]:
    terms = index_sqlite.weighing_terms(MESSAGE_TEXT, query_terms(query), using="default")
    return [term.text for term in terms]


@pytest.mark.sqlite_only
def test_a_word_in_half_the_rows_leaves_the_match_and_the_ranking_as_it_was(prune_any_table, sql):
    weather = [message(f"The weather today, note {n}.") for n in range(6)]
    pottery = message("The weather was fine for pottery.")
    kiln = message("A kiln for pottery, the pottery kiln.")
    message("Nothing else.")
    # "weather" is in 7 of 9 rows: what bm25 makes of it, on the whole expression.
    whole = sql(
        "SELECT rowid FROM fts_main_messages WHERE fts_main_messages MATCH %s "
        "ORDER BY bm25(fts_main_messages, 1.0, 1.0, 0.5, 0.0, 0.0)",
        [expression("weather pottery kiln")],
    )
    assert [row for (row,) in whole][:2] == [kiln.pk, pottery.pk]

    assert weighing("weather pottery kiln") == ["pottery", "kiln"]
    assert found("weather pottery kiln") == [kiln.pk, pottery.pk]  # only-weather rows out
    # A query of frequent words alone keeps them.
    assert weighing("weather") == ["weather"]
    assert sorted(found("weather")) == sorted([*(m.pk for m in weather), pottery.pk])


@pytest.mark.sqlite_only
def test_a_small_table_keeps_every_word():
    for n in range(3):
        message(f"tea {n}")
    message("cake")
    assert weighing("tea cake") == ["tea", "cake"]
    assert len(found("tea cake")) == 4


@pytest.mark.sqlite_only
def test_inside_a_transaction_the_words_are_counted_each_time(prune_any_table):
    for n in range(3):
        message(f"tea {n}")
    message("cake")
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            assert weighing("tea cake") == ["cake"]
        assert len(queries) == 4  # the table's size, its rows, and each word


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_counts_are_kept_until_the_table_grows(prune_any_table):
    for n in range(6):
        message(f"tea {n}")
    for n in range(4):
        message(f"cake {n}")
    assert weighing("tea cake") == ["cake"]  # tea in 6 of 10 rows
    with CaptureQueriesContext(connection) as queries:
        assert weighing("tea cake") == ["cake"]
    assert len(queries) == 1  # the growth check alone: the counts were kept
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        assert weighing("tea cake") == ["cake"]
    assert len(queries) == 4  # in a transaction, what was kept is not used: counted anew

    for n in range(4):
        message(f"bread {n}")
    assert weighing("tea cake") == ["tea", "cake"]  # tea in 6 of 14: counted again


# --- rows that hold only the frequent terms (SQLite) -----------------------------------------


def bm25_of_whole_query(sql, query: str, agent: str) -> dict[int, float]:
    """Every row's score under the query's whole expression, as FTS5 ranks without the gate."""
    scope = f'agent_id:"{index_sqlite.scope_token(agent)}"'
    rows = sql(
        "SELECT rowid, bm25(fts_main_messages, 1.0, 1.0, 0.5, 0.0, 0.0) FROM fts_main_messages "
        "WHERE fts_main_messages MATCH %s",
        [f"({expression(query)}) AND {scope}"],
    )
    return {row: -score for row, score in rows}


@pytest.mark.sqlite_only
def test_once_the_rarer_words_hold_enough_rows_only_their_rows_are_scored_as_before(
    prune_any_table, monkeypatch, sql
):
    kiln = [message("A kiln for pottery, the pottery kiln."), message("The kiln and its glaze.")]
    pottery = [message(f"Pottery class {n}.") for n in range(3)]
    message("A kiln for pottery.", agent="a2")  # another agent's: never found
    for n in range(6):
        message(f"Nothing else {n}.")
    # "kiln" is in 3 of the table's 12 rows, "pottery" in 5: both weigh.
    assert weighing("kiln pottery") == ["kiln", "pottery"]
    whole = bm25_of_whole_query(sql, "kiln pottery", "a1")

    monkeypatch.setattr(index_sqlite, "GATE_ROWS", 3)  # "kiln" alone reaches it
    hits = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="kiln pottery", k=10)
    assert [hit.id for hit in hits] == [kiln[0].pk, kiln[1].pk]
    assert {hit.id: hit.score for hit in hits} == {m.pk: whole[m.pk] for m in kiln}

    monkeypatch.setattr(index_sqlite, "GATE_ROWS", 4)  # not reached: every row holding a word
    assert set(found("kiln pottery")) == {m.pk for m in kiln + pottery}
    assert len(whole) == len(kiln + pottery)


@pytest.mark.sqlite_only
def test_a_small_table_has_no_gate(monkeypatch):
    monkeypatch.setattr(index_sqlite, "GATE_ROWS", 1)
    kiln = message("A kiln for pottery.")
    pottery = message("Pottery class.")
    assert set(found("kiln pottery")) == {kiln.pk, pottery.pk}  # under PRUNE_FROM_ROWS rows


# --- PostgreSQL: the terms that weigh, and the rows worth scoring ----------------------------


@pytest.fixture
def postgres_prunes_any_scope(monkeypatch):
    """Words in half the scope's rows are left out from 10,000 rows on; here from the first."""
    monkeypatch.setattr(index_postgres, "PRUNE_FROM_ROWS", 1)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts")
def test_postgres_leaves_out_a_word_in_half_the_agents_rows(postgres_prunes_any_scope):
    weather = [message(f"The weather today, note {n}.") for n in range(6)]
    pottery = message("The weather was fine for pottery.")
    kiln = message("A kiln for pottery, the pottery kiln.")
    message("Nothing else.")
    for n in range(20):
        message(f"Pottery and kilns elsewhere {n}.", agent="a2")  # another agent's counts
    # "weather" is in 7 of a1's 9 rows: its idf is floored, the rows holding only it go.
    assert found("weather pottery kiln") == [kiln.pk, pottery.pk]
    # A query of frequent words alone keeps them.
    assert sorted(found("weather")) == sorted([*(m.pk for m in weather), pottery.pk])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts")
def test_postgres_scores_only_the_rows_of_the_rarer_words_once_they_hold_enough(
    postgres_prunes_any_scope, monkeypatch
):
    kiln = [message("A kiln for pottery, the pottery kiln."), message("The kiln and its glaze.")]
    pottery = [message(f"Pottery class {n}.") for n in range(3)]
    for n in range(6):
        message(f"Nothing else {n}.")
    everything = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="kiln pottery", k=10)
    assert {hit.id for hit in everything} == {m.pk for m in kiln + pottery}

    monkeypatch.setattr(index_postgres, "GATE_ROWS", 2)  # "kiln" (2 rows) alone reaches it
    gated = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="kiln pottery", k=10)
    assert [hit.id for hit in gated] == [kiln[0].pk, kiln[1].pk]
    # Each scored with both words, as before; only the mean length is of the rows scored.
    assert all(hit.score > 0 for hit in gated)
    assert gated[0].score > max(
        hit.score for hit in everything if hit.id in {m.pk for m in pottery}
    )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts")
def test_postgres_below_the_threshold_nothing_is_left_out():
    for n in range(3):
        message(f"tea {n}")
    message("cake")
    assert len(found("tea cake")) == 4  # under PRUNE_FROM_ROWS rows: every word scores


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's counts")
@pytest.mark.django_db(transaction=True)
def test_postgres_keeps_an_agents_counts_outside_a_transaction(postgres_prunes_any_scope):
    for n in range(3):
        message(f"tea {n}")
    message("cake")
    index_postgres.forget_term_counts()
    with CaptureQueriesContext(connection) as queries:
        assert found("tea cake") == found("tea cake")
    assert len(queries) == 4  # counted once (scope, words), then the search twice
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        found("tea cake")
    assert len(queries) == 3  # in a transaction, what was kept is not used: counted anew
    index_postgres.forget_term_counts()
