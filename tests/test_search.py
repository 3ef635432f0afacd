"""One search function, three modes, component scores, filters and the lexical fallback."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from bench.evaluation import fuse_rrf
from memory import index, vectors
from memory import search as search_module
from memory.index import MESSAGE_VECTORS
from memory.models import MainMessage
from memory.search import SearchQuery, candidates, fuse_weighted, search
from memory.validation import InvalidInput
from memory.vectors import query_embedding
from subagents.runs import subagent_record
from tests.factories import add_message

pytestmark = pytest.mark.django_db

CHINESE_SET = json.loads(
    (Path(__file__).parent / "data" / "chinese_lexical.json").read_text("utf-8")
)
DATED_SET = json.loads((Path(__file__).parent / "data" / "dated_lexical.json").read_text("utf-8"))


# A fixed time: a message is embedded with its date and time ("[8 May 2023 13:56] user: ..."),
# so with the clock's, the fake embedder's words (and ties) would change every minute.
CORPUS_TIME = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def corpus(fake_embedder):
    at = {"timestamp": CORPUS_TIME}
    rows = {
        "tea": add_message("I drink green tea every morning", **at),
        "coffee": add_message(
            "coffee keeps me awake at night", role="assistant", session_id="s3", **at
        ),
        "hiking": add_message("we went hiking in the mountains", session_id="s2", **at),
        "decision": add_message(
            "we decided to ship the release on friday", msg_type="decision", session_id="s4", **at
        ),
        "other": add_message("green tea secrets of another agent", agent_id="a2", **at),
    }
    vectors.embed_pending()
    return rows


def ids(result) -> list[int]:
    return [hit.message.pk for hit in result.hits]


def test_lexical_mode_ranks_by_bm25_with_its_score(corpus):
    result = search(agent_id="a1", query=SearchQuery("green tea", mode="lexical"))
    assert result.mode == "lexical" and result.degraded == []
    assert ids(result) == [corpus["tea"].pk]
    hit = result.hits[0]
    assert hit.lexical_score > 0 and hit.lexical_rank == 1
    assert hit.vector_score is None and hit.score == hit.lexical_score


def test_vector_mode_ranks_by_cosine_similarity(corpus):
    result = search(agent_id="a1", query=SearchQuery("morning tea drink", mode="vector", k=2))
    assert result.mode == "vector"
    assert ids(result)[0] == corpus["tea"].pk
    top = result.hits[0]
    assert 0 < top.vector_score <= 1 and top.score == top.vector_score
    assert top.lexical_score is None and top.vector_rank == 1


def test_hybrid_mode_fuses_both_lists_and_explains_each_hit(corpus):
    result = search(
        agent_id="a1", query=SearchQuery("green tea in the morning", mode="hybrid", k=3)
    )
    assert result.mode == "hybrid"
    top = result.hits[0]
    assert top.message.pk == corpus["tea"].pk
    assert top.lexical_rank == 1 and top.vector_rank == 1
    assert top.score == pytest.approx(1.0)  # best of both lists: 0.35 x 1 + 0.65 x 1
    assert all(0 <= hit.score <= 1 for hit in result.hits)
    assert all(hit.message.agent_id == "a1" for hit in result.hits)


def test_search_is_its_candidates_fused_by_weight_and_the_evaluation_can_fuse_them_otherwise(
    corpus,
):
    query = SearchQuery("green tea in the morning", mode="hybrid", k=3)
    found = candidates(agent_id="a1", query=query)
    assert found.best(fuse_weighted) == search(agent_id="a1", query=query)
    rrf = found.best(fuse_rrf)
    assert rrf.hits[0].message.pk == corpus["tea"].pk
    assert rrf.hits[0].score == pytest.approx(2 / 61)  # 1 / (60 + rank 1), in both lists


def test_a_word_match_beyond_the_nearest_vectors_is_fused_with_its_own_similarity(
    fake_embedder, monkeypatch
):
    # Each list brings two candidates: the nearest vectors are the messages that repeat the
    # query's stop words, which the text index does not read; the word match is not among them.
    monkeypatch.setattr(search_module, "POOL", 1)
    at = {"timestamp": CORPUS_TIME}
    for text in ["the in the", "in the in the", "the the in"]:
        add_message(text, **at)
    leaves = add_message("tea leaves", **at)
    vectors.embed_pending()
    query = SearchQuery("the tea in the", mode="hybrid", k=1)

    found = {c.id: c for c in candidates(agent_id="a1", query=query).ranked}

    word_match = found[leaves.pk]
    assert word_match.lexical_rank == 1 and word_match.vector_rank is None
    embedding = query_embedding(query.text)
    every = index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=embedding.vector, k=10)
    assert word_match.vector == pytest.approx(dict(every)[leaves.pk], abs=1e-6)
    assert all(c.vector is not None for c in found.values())


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_filters_apply_in_every_mode(corpus, mode):
    def found(**filters) -> list[int]:
        return ids(
            search(
                agent_id="a1",
                query=SearchQuery("tea coffee hiking ship", mode=mode, k=10, **filters),
            )
        )

    assert found(session_id="s2") == [corpus["hiking"].pk]
    assert found(role="assistant") == [corpus["coffee"].pk]
    assert found(msg_type="decision") == [corpus["decision"].pk]
    assert found(until=CORPUS_TIME - timedelta(days=1)) == []
    assert len(found(since=CORPUS_TIME - timedelta(days=1))) == 4
    assert found(since=CORPUS_TIME + timedelta(minutes=1)) == []


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_a_query_is_searched_as_built_however_often(corpus, mode):
    query = SearchQuery(
        "tea coffee hiking ship",
        mode=mode,
        session_id="s2",
        exclude_session="s3",
        exclude_ids=frozenset({corpus["tea"].pk}),
        since=datetime(2023, 5, 8, 21, 56, tzinfo=timezone.get_fixed_timezone(480)),
    )
    copy = dataclasses.replace(query)

    first = search(agent_id="a1", query=query)

    assert search(agent_id="a1", query=query) == first and ids(first) == [corpus["hiking"].pk]
    assert query == copy
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.session_id = "s3"  # type: ignore[misc]


def test_since_and_until_with_an_offset_find_the_same_rows_in_every_mode(fake_embedder, api_for):
    # 01:00 and 03:00 UTC; 10:00+08:00 is 02:00 UTC. Compared as text, the lexical filter saw
    # "2024-05-01 10:00:00+08:00" later than both (no rows since, both until).
    early = add_message("tea at one", timestamp=datetime(2024, 5, 1, 1, 0, tzinfo=UTC))
    late = add_message("tea at three", timestamp=datetime(2024, 5, 1, 3, 0, tzinfo=UTC))
    vectors.embed_pending()
    api = api_for("a1")

    for mode in ("lexical", "vector", "hybrid"):
        since = api.get("/search", q="tea", mode=mode, since="2024-05-01T10:00:00+08:00").json()
        until = api.get("/search", q="tea", mode=mode, until="2024-05-01T10:00:00+08:00").json()
        assert since["mode"] == until["mode"] == mode
        assert [hit["message"]["id"] for hit in since["hits"]] == [late.pk], mode
        assert [hit["message"]["id"] for hit in until["hits"]] == [early.pk], mode
    west = search(
        agent_id="a1",
        query=SearchQuery(
            "tea", mode="lexical", since=datetime.fromisoformat("2024-04-30T21:30-04:00")
        ),
    )
    assert ids(west) == [late.pk]  # 01:30 UTC


def test_a_since_beyond_utc_is_refused_before_searching(corpus):
    with pytest.raises(InvalidInput):
        search(
            agent_id="a1",
            query=SearchQuery("tea", since=datetime.fromisoformat("0001-01-01T00:30+01:00")),
        )


def test_without_vectors_it_answers_lexically_and_says_why(corpus, monkeypatch):
    from memory import embeddings

    monkeypatch.setattr(embeddings, "configured_embedder", lambda: None)
    result = search(agent_id="a1", query=SearchQuery("green tea", mode="hybrid"))
    assert result.mode == "lexical"
    assert result.degraded == ["vector search is unavailable: no embedding provider is configured"]
    assert ids(result) == [corpus["tea"].pk]


def test_query_embeddings_are_cached(corpus, fake_embedder):
    calls = len(fake_embedder.calls)
    search(agent_id="a1", query=SearchQuery("a repeated question", mode="vector"))
    search(agent_id="a1", query=SearchQuery("a repeated question", mode="hybrid"))
    assert len(fake_embedder.calls) == calls + 1


def test_subagent_transcripts_are_never_searched(corpus, fake_embedder):
    subagent_record(
        parent=corpus["tea"], agent_name="coder", role="assistant", content="zebra zebra"
    )
    vectors.embed_pending()
    for mode in ("lexical", "vector", "hybrid"):
        assert all(
            "zebra" not in hit.message.content
            for hit in search(agent_id="a1", query=SearchQuery("zebra", mode=mode)).hits
        )


def test_it_refuses_bad_modes_and_sizes():
    with pytest.raises(InvalidInput, match="mode must be one of hybrid, lexical, vector"):
        SearchQuery("x", mode="semantic")
    with pytest.raises(InvalidInput, match="k must be between 1 and 100"):
        SearchQuery("x", k=0)


def test_the_endpoint_searches_only_the_keys_agent(corpus, api_for):
    api = api_for("a1")
    body = api.get("/search", q="green tea", mode="hybrid", k=5).json()
    assert body["mode"] == "hybrid" and body["degraded"] == []
    assert body["hits"][0]["message"]["id"] == corpus["tea"].pk
    assert set(body["hits"][0]) == {
        "message",
        "score",
        "lexical_score",
        "vector_score",
        "lexical_rank",
        "vector_rank",
        "raised",
    }
    assert body["hits"][0]["raised"] == []
    assert corpus["other"].pk not in [hit["message"]["id"] for hit in body["hits"]]
    assert api.get("/search", q="tea", mode="semantic").status_code == 422
    assert api.get("/search", q="tea", k=1000).status_code == 422
    assert api.get("/search").status_code == 422


def test_the_chinese_set_finds_every_expected_message_lexically():
    rows = [add_message(text, session_id=f"s{i}") for i, text in enumerate(CHINESE_SET["messages"])]
    misses = []
    for case in CHINESE_SET["queries"]:
        found = ids(search(agent_id="a1", query=SearchQuery(case["query"], mode="lexical", k=3)))
        expected = [rows[i].pk for i in case["expect"]]
        if not set(expected) <= set(found):
            misses.append((case["query"], [r.content for r in rows if r.pk in found]))
    assert misses == []


def test_the_dated_set_finds_the_messages_of_the_days_it_names_lexically():
    now = datetime.fromisoformat(DATED_SET["now"])
    misses = []
    for agent, part in DATED_SET["sets"].items():
        rows = [
            add_message(
                text, agent_id=agent, session_id=f"s{i}", timestamp=datetime.fromisoformat(at)
            )
            for i, (at, text) in enumerate(part["messages"])
        ]
        for case in part["queries"]:
            found = ids(
                search(
                    agent_id=agent, query=SearchQuery(case["query"], mode="lexical", k=3), now=now
                )
            )
            every = {rows[i].pk for i in case.get("expect", [])}
            any_of = {rows[i].pk for i in case.get("expect_any", [])}
            if not every <= set(found) or (any_of and not any_of & set(found)):
                misses.append((case["query"], [r.content for r in rows if r.pk in found]))
    assert misses == []


def test_a_weekday_of_last_week_finds_the_message_of_that_day():
    thursday = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
    wednesday = add_message("我们讨论了预算", timestamp=datetime(2023, 5, 3, 15, 0, tzinfo=UTC))
    add_message("我们讨论了预算", timestamp=datetime(2023, 5, 10, 15, 0, tzinfo=UTC))
    add_message("我们讨论了预算", timestamp=datetime(2023, 4, 26, 15, 0, tzinfo=UTC))

    result = search(
        agent_id="a1", query=SearchQuery("上周三讨论了什么？", mode="lexical"), now=thursday
    )
    assert ids(result)[0] == wednesday.pk
    assert result.hits[0].lexical_score > result.hits[1].lexical_score


def test_relative_days_count_from_the_time_of_the_request(api_for):
    yesterday = add_message(
        "the plumber fixed the sink", timestamp=timezone.now() - timedelta(days=1)
    )
    add_message("the plumber fixed the sink", timestamp=timezone.now() - timedelta(days=3))
    body = api_for("a1").get("/search", q="昨天的plumber", mode="lexical").json()
    assert body["hits"][0]["message"]["id"] == yesterday.pk
    assert body["hits"][0]["lexical_score"] > body["hits"][1]["lexical_score"]


def test_min_max_keeps_the_spread_of_the_others_when_one_score_is_an_outlier():
    from memory.search import _min_max

    assert _min_max([100.0, 4.0, 3.0, 2.0]) == [1.0, 0.5, 0.25, 0.0]
    assert _min_max([4.0, 3.0, 2.0]) == [1.0, 0.5, 0.0]  # no outlier: plain min-max
    assert _min_max([5.0]) == [1.0] and _min_max([2.0, 2.0]) == [1.0, 1.0]


@pytest.mark.parametrize(
    "question, evidence, others",
    [
        (
            "Where did Caroline go camping in June?",
            "Caroline went camping in the mountains in June",
            ["Caroline likes tea", "June was rainy", "the mountains are far", "camping gear"],
        ),
        (
            "我女儿叫什么名字？",
            "我女儿叫小美，今年五岁了",
            ["名字不重要", "我喜欢跑步", "女儿节快乐", "我的名字很好听"],
        ),
    ],
)
@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_stored_question_leaves_the_other_hits_in_their_order(
    fake_embedder, question, evidence, others, mode
):
    for text in [evidence, *others]:
        add_message(text, session_id="past")
    vectors.embed_pending()
    before = [
        h.message.pk for h in search(agent_id="a1", query=SearchQuery(question, mode=mode)).hits
    ]

    stored = add_message(question, session_id="new")  # as an agent does before it asks
    vectors.embed_pending()
    after = [
        h.message.pk for h in search(agent_id="a1", query=SearchQuery(question, mode=mode)).hits
    ]

    assert stored.pk not in after
    assert after == before and MainMessage.objects.get(content=evidence).pk in after


def test_an_old_message_that_repeats_the_query_is_still_found():
    old = add_message("where is the red kayak", timestamp=timezone.now() - timedelta(hours=1))
    assert [
        h.message.pk
        for h in search(agent_id="a1", query=SearchQuery("where is the red kayak")).hits
    ] == [old.pk]


def test_search_can_leave_out_a_session_or_messages(fake_embedder):
    kept = add_message("the blue kayak", session_id="past")
    current = add_message("the blue kayak is mine", session_id="now")
    other = add_message("a blue kayak for sale", session_id="past")
    vectors.embed_pending()

    by_session = search(agent_id="a1", query=SearchQuery("blue kayak", exclude_session="now")).hits
    by_id = search(
        agent_id="a1", query=SearchQuery("blue kayak", exclude_ids=frozenset([other.pk]))
    ).hits

    assert {h.message.pk for h in by_session} == {kept.pk, other.pk}
    assert {h.message.pk for h in by_id} == {kept.pk, current.pk}


def test_a_chinese_query_with_an_english_only_model_is_answered_lexically(monkeypatch):
    from memory import embeddings
    from tests.fakes import FakeEmbedder

    english_only = FakeEmbedder(name="local", model="all-MiniLM-L6-v2")
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: english_only)
    vectors.query_vector.cache_clear()
    add_message("我喜欢喝绿茶")
    vectors.embed_pending()

    result = search(agent_id="a1", query=SearchQuery("绿茶"))

    assert result.mode == "lexical" and len(result.hits) == 1
    assert result.degraded == [
        "vectors not used: all-MiniLM-L6-v2 is English-only and the query is Chinese, "
        "Japanese or Korean"
    ]


def test_the_api_leaves_out_the_callers_session_and_own_question(api):
    api.post("/sessions/past/messages", {"role": "user", "content": "my kayak is red"})
    api.post("/sessions/now/messages", {"role": "user", "content": "the kayak in the garage"})
    api.post("/sessions/now/messages", {"role": "user", "content": "what colour is my kayak?"})

    echo_left_out = api.get("/search", q="what colour is my kayak?").json()["hits"]
    session_left_out = api.get("/search", q="kayak", exclude_session="now").json()["hits"]

    assert {h["message"]["content"] for h in echo_left_out} == {
        "my kayak is red",
        "the kayak in the garage",
    }
    assert [h["message"]["session_id"] for h in session_left_out] == ["past"]


# The person's words in passing against the agent's long replies that say the query's words
# more often, in English and Chinese; a named assistant (LoCoMo's second person) is a person.
REPLY_CASES = [
    pytest.param(
        "which laptop should I buy for travel",
        "By the way, my old travel laptop died on the train last week.",
        "Good question. What matters most is weight and battery life: for a laptop you carry "
        "every day, stay under 1.4 kg, and check the charger works on travel adapters before "
        "you buy one.",
        "What laptop did you tell me to buy for travel?",
        id="en",
    ),
    pytest.param(
        "旅行用的笔记本电脑买哪款",
        "顺便说一下，我的旧笔记本电脑上周在火车上坏了。",
        "好问题。旅行买哪款笔记本电脑，最重要的是重量和续航：每天背着的，选一点四公斤以下的，"
        "买之前确认充电器在转换插头上能用。",
        "你之前推荐我买哪款旅行用的笔记本电脑？",
        id="zh",
    ),
]


@pytest.mark.parametrize(("query", "said", "reply", "about_the_reply"), REPLY_CASES)
def test_the_agents_replies_count_less_than_the_persons_words(
    query, said, reply, about_the_reply, monkeypatch
):
    # Each turn in a session of its own: a row's index also holds the words of the messages
    # before it, which would favour whichever turn comes second.
    person = add_message(said, session_id="s1")
    agent = add_message(reply, role="assistant", session_id="s2")
    named = add_message(
        reply, role="assistant", agent_id="a2", session_id="s3", metadata={"speaker": "Melanie"}
    )
    add_message(said, agent_id="a2", session_id="s4")

    def ranked(agent_id: str, text: str) -> list[int]:
        return ids(search(agent_id=agent_id, query=SearchQuery(text, mode="lexical")))

    # The reply says the query's words more often: by words alone it comes first.
    monkeypatch.setattr(search_module, "REPLY_WEIGHT", 1.0)
    assert ranked("a1", query) == [agent.pk, person.pk]
    monkeypatch.undo()
    assert ranked("a1", query) == [person.pk, agent.pk]
    # Asked what the agent said, its reply is the answer; a named person's reply is a person's.
    assert ranked("a1", about_the_reply)[0] == agent.pk
    assert ranked("a2", query)[0] == named.pk


@pytest.mark.parametrize(
    ("asks", "tells", "question", "about_asking"),
    [
        (
            "Any tips for my AWS exam? How should I prepare for the AWS exam?",
            "Sat the AWS exam this morning, then a long walk by the river with my sister.",
            "When did I sit the AWS exam?",
            "What did I ask you about the AWS exam?",
        ),
        (
            "科目二考试有什么技巧？科目二考试前一天该做什么？",
            "今天上午考完了科目二考试，下午和妹妹去河边走了很久。",
            "我是哪天考的科目二考试？",
            "我之前问过你科目二考试的什么问题？",
        ),
    ],
)
def test_a_message_that_only_asks_counts_at_a_share_of_its_score(
    monkeypatch, asks, tells, question, about_asking
):
    asked = add_message(asks, session_id="tips").pk
    told = add_message(tells, session_id="done").pk

    def order(query: str) -> list[int]:
        hits = search(agent_id="a1", query=SearchQuery(query, mode="lexical")).hits
        return [hit.message.pk for hit in hits]

    weighed, about_it = order(question), order(about_asking)
    monkeypatch.setattr(search_module, "ASKING_WEIGHT", 1.0)

    assert order(question) == [asked, told]  # its words, said twice, rank it first
    assert weighed == [told, asked]
    assert about_it == [asked, told]  # asked what the person asked: its question answers
