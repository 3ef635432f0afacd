"""The recall layer: an agent's earlier messages in the context of a new session, the budget
shared by four layers, and nothing said twice."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from memory import vectors
from memory.context import _summarised_messages, context_build
from memory.context_items import SummaryItem
from memory.memories import memory_create
from memory.models import LongTermMemory
from memory.search import SearchQuery, search
from memory.summaries import summarize_turns
from memory.tokens import CUT_MARK, CUT_MARK_CHINESE, TRUNCATION_MARK, estimate_tokens
from tests.factories import add_message
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.django_db

DAY_ONE = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


# Turns queue no summary of their own (as past sessions replayed by an import): a test that
# needs one makes it with summarize_turns, so the summaries are only those it made.
say = partial(add_message, summarize=False)


def chat(session: str, lines: list[str], *, start: datetime, agent: str = "a1"):
    """A past session: lines alternate user and assistant, a minute apart."""
    return [
        say(
            text,
            role="user" if i % 2 == 0 else "assistant",
            session_id=session,
            agent_id=agent,
            timestamp=start + timedelta(minutes=i),
        )
        for i, text in enumerate(lines)
    ]


def system_text(context) -> str:
    first = context.messages[0] if context.messages else {}
    return first.get("content", "") if first.get("role") == "system" else ""


def test_a_new_session_gets_the_earlier_messages_that_answer_its_question_with_their_reply():
    camping = chat(
        "monday",
        [
            "We went camping at the lake last weekend.",
            "That sounds lovely! Did the kids enjoy it?",
            "They loved roasting marshmallows by the fire.",
            "Marshmallows are the best part.",
        ],
        start=DAY_ONE,
    )
    chat(
        "tuesday",
        ["My sister visits on Friday.", "Will you cook for her?"],
        start=DAY_ONE + timedelta(days=1),
    )
    question = say("Where did we go camping?", session_id="new")

    context = context_build(agent_id="a1", session_id="new", query=None, model_window=8192)

    assert context.query == "Where did we go camping?"
    assert context.query_source == "newest user message"
    recall = context.layers["recall"]
    recalled = [item.id for item in recall.items]
    assert camping[0].pk in recalled and camping[1].pk in recalled  # the hit and its reply
    assert question.pk not in recalled  # in working memory, sent once
    by_id = {item.id: item for item in recall.items}
    assert by_id[camping[1].pk].method == "neighbour"
    assert by_id[camping[0].pk].method == "lexical"
    text = system_text(context)
    # Each line dated; shown whole, it needs no id (GET /messages/{id}) to be read.
    assert "Session monday:\n- [8 May 2023 13:56] user: We went camping at the lake" in text
    assert "- [8 May 2023 13:57] assistant: That sounds lovely!" in text
    assert "[#" not in text
    assert context.messages[-1] == {"role": "user", "content": "Where did we go camping?"}


def test_recalled_messages_are_grouped_by_session_in_time_order_with_their_speaker():
    later = chat("later", ["I bought a red kayak.", "Nice kayak!"], start=DAY_ONE + timedelta(3))
    earlier = chat("earlier", ["I want a kayak.", "Which kayak?"], start=DAY_ONE)
    say(
        "Caroline here: the kayak is red.",
        session_id="earlier",
        timestamp=DAY_ONE + timedelta(hours=1),
        metadata={"speaker": "Caroline"},
    )
    say("tell me about the kayak", session_id="new")

    context = context_build(agent_id="a1", session_id="new", query=None, model_window=8192)

    sessions = [item.session_id for item in context.layers["recall"].items]
    assert sessions == ["earlier"] * 3 + ["later"] * 2
    times = [item.timestamp for item in context.layers["recall"].items]
    assert times[:3] == sorted(times[:3]) and times[3:] == sorted(times[3:])
    text = system_text(context)
    assert text.index("Session earlier:") < text.index("Session later:")
    assert "] Caroline: Caroline here: the kayak is red." in text
    assert {earlier[0].pk, later[0].pk} <= {item.id for item in context.layers["recall"].items}


def test_recall_never_includes_another_agent_or_a_subagent_transcript():
    from subagents.runs import subagent_finish, subagent_record

    ask = say("please research zebra migration", role="assistant", session_id="old")
    subagent_record(parent=ask, agent_name="r", role="assistant", content="zebra secret notes")
    subagent_finish(parent=ask, agent_name="r", content="zebras migrate in july")
    say("zebra facts from agent two", session_id="theirs", agent_id="a2")
    say("what about zebra migration?", session_id="new")

    context = context_build(agent_id="a1", session_id="new", query=None, model_window=8192)

    text = str(context.messages)
    assert "zebras migrate in july" in text  # the run's result is the agent's own message
    assert "secret notes" not in text and "agent two" not in text
    assert {item.session_id for item in context.layers["recall"].items} == {"old"}


def _random_store(rng: random.Random) -> None:
    words = ["tea", "kayak", "camping", "lake", "paint", "music", "dog", "cat", "berlin"]
    for s in range(6):
        for i in range(rng.randint(2, 30)):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 120)))
            say(
                text,
                role="user" if i % 2 == 0 else "assistant",
                session_id=f"s{s}",
                timestamp=DAY_ONE + timedelta(days=s, minutes=i),
            )
    for i in range(rng.randint(0, 8)):
        LongTermMemory.objects.create(
            agent_id="a1",
            content=" ".join(rng.choice(words) for _ in range(rng.randint(3, 60))),
            memory_type="fact",
            access_count=i,
        )
    say(
        " ".join(rng.choice(words) for _ in range(8)),
        session_id="s5",
        timestamp=DAY_ONE + timedelta(days=9),
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window", [256, 1024, 4096])
def test_the_budget_holds_with_four_layers(seed, window):
    _random_store(random.Random(seed))

    context = context_build(agent_id="a1", session_id="s5", query=None, model_window=window)

    layers = context.layers
    sent = sum(estimate_tokens(m["content"]) for m in context.messages)
    assert sent <= context.used <= context.budget == int(window * 0.6)

    def unused(name: str) -> int:
        return max(0, layers[name].share - layers[name].used)

    pool = layers["long_term"].used + layers["recall"].used
    pool_share = layers["long_term"].share
    assert layers["working"].used <= layers["working"].share + unused("short_term") + max(
        0, pool_share - pool
    )
    assert pool <= pool_share + unused("working") + unused("short_term")
    if not context.cuts:
        assert layers["working"].items, "the newest message always fits these windows"


def test_a_four_message_session_holds_no_summary_of_its_own_messages():
    say("我喜欢喝绿茶。")
    first = say("好的，记住了：绿茶。", role="assistant")
    say("明天提醒我买茶叶。")
    second = say("好的，明天提醒你。", role="assistant")
    summarize_turns([first])
    summarize_turns([second])

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)

    assert context.layers["short_term"].items == []
    assert "Earlier in this session" not in system_text(context)
    assert [m["content"] for m in context.messages] == [
        "我喜欢喝绿茶。",
        "好的，记住了：绿茶。",
        "明天提醒我买茶叶。",
        "好的，明天提醒你。",
    ]


def test_a_turn_that_fell_out_of_working_memory_is_represented_by_its_summary():
    old_question = say("alpha " * 400)  # 600 tokens: falls out of a 1000-token window's 300
    old_reply = say("beta " * 400, role="assistant")
    (summary,) = summarize_turns([old_reply])
    say("gamma question")
    say("delta answer", role="assistant")

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=1000)

    working = [item.id for item in context.layers["working"].items]
    assert old_reply.pk not in working and old_question.pk not in working
    assert [item.id for item in context.layers["short_term"].items] == [summary.pk]
    # Recall does not repeat the summarised turn.
    recalled = {item.id for item in context.layers["recall"].items}
    assert not recalled & {old_question.pk, old_reply.pk}


def test_the_messages_summaries_stand_for_are_each_turns_messages():
    turns = [
        [say("q1"), say("r1", role="assistant")],
        [say("q2a"), say("q2b"), say("r2", role="assistant")],
        [say("q3"), say("r3", role="assistant")],
        [say("q4"), say("r4", role="assistant")],
    ]
    first, _, third, _ = summarize_turns([turn[-1] for turn in turns])
    say("q5")
    items = [SummaryItem.made(s.pk, s.content, reply_id=s.reply_id) for s in (first, third)] + [
        SummaryItem.made(0, "no turn", reply_id=None)
    ]

    covered = _summarised_messages("a1", "s1", items)

    assert covered == {m.pk for turn in (turns[0], turns[2]) for m in turn}
    assert _summarised_messages("a1", "s1", items[2:]) == set()


def test_a_memory_identical_to_a_recalled_message_appears_once():
    message = chat("old", ["I am allergic to peanuts.", "Noted, no peanuts."], start=DAY_ONE)[0]
    memory = memory_create(
        agent_id="a1",
        content="I am allergic to peanuts.",
        memory_type="fact",
        actor="consolidation",
    )
    say("can I eat peanuts?", session_id="new")

    context = context_build(agent_id="a1", session_id="new", query=None, model_window=8192)

    assert system_text(context).count("allergic to peanuts") == 1
    assert message.pk in {item.id for item in context.layers["recall"].items}
    left_out = context.layers["long_term"].left_out
    assert [(o.id, o.reason) for o in left_out] == [
        (memory.pk, f"says the same as message {message.pk}")
    ]


def test_the_method_names_what_chose_each_item_after_the_identity_filter(fake_embedder):
    # No memory is similar enough to "do you remember me": the person's facts fill in.
    LongTermMemory.objects.create(
        agent_id="a1", content="xylophone lessons weekly", memory_type="fact", access_count=3
    )
    vectors.embed_pending()

    context = context_build(
        agent_id="a1", session_id="s1", query="do you remember me", model_window=8192
    )

    layer = context.layers["long_term"]
    assert [(item.method, item.why) for item in layer.items] == [
        ("identity", "identity question: a fact")
    ]
    assert layer.method == "identity"


@pytest.mark.parametrize(
    "question, evidence, distractors",
    [
        (
            "Where did Caroline go camping in June?",
            "Caroline: we went camping in the mountains in June.",
            ["Caroline likes tea.", "June was rainy in the city.", "Mountains are far."],
        ),
        (
            "我女儿叫什么名字？",
            "我女儿叫小美，今年五岁了。",
            ["名字不重要。", "我喜欢跑步。", "女儿节快乐。"],
        ),
    ],
)
def test_a_stored_question_never_pushes_the_evidence_out(question, evidence, distractors):
    past = chat("past", [evidence, *distractors], start=DAY_ONE)
    say(question, session_id="new")

    context = context_build(agent_id="a1", session_id="new", query=question, model_window=2048)

    assert past[0].pk in {item.id for item in context.layers["recall"].items}
    assert evidence in system_text(context)
    assert system_text(context).count(question) == 0  # the question is sent once, as itself


def test_a_chinese_query_with_an_english_only_model_does_not_use_vectors(monkeypatch):
    from memory import embeddings

    english_only = FakeEmbedder(name="local", model="all-MiniLM-L6-v2")
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: english_only)
    vectors.query_vector.cache_clear()
    say("I drink green tea every morning.", session_id="old")
    vectors.embed_pending()
    calls = len(english_only.calls)

    context = context_build(
        agent_id="a1", session_id="new", query="我喝什么茶？", model_window=8192
    )

    assert len(english_only.calls) == calls  # the query was not embedded
    assert any("English-only" in reason for reason in context.degraded)
    assert context.layers["recall"].method == "lexical"
    english = context_build(agent_id="a1", session_id="new", query="what tea", model_window=8192)
    assert english.degraded == [] and english.layers["recall"].method == "hybrid"


def _well_formed_call(call: object) -> bool:
    """A tool call as OpenAI's chat API takes it."""
    return (
        isinstance(call, dict)
        and set(call) == {"id", "type", "function"}
        and isinstance(call["id"], str)
        and call["type"] == "function"
        and isinstance(call["function"], dict)
        and set(call["function"]) == {"name", "arguments"}
        and isinstance(call["function"]["name"], str)
        and isinstance(call["function"]["arguments"], str)
    )


def _valid_for_openai(messages: list[dict]) -> bool:
    """The chat API rules: every tool call is well formed, a `tool` message answers a call of
    the assistant message before it (only tool messages between), and every call of such an
    assistant message is answered."""
    for position, message in enumerate(messages):
        if "tool_calls" in message and not (
            message["tool_calls"] and all(map(_well_formed_call, message["tool_calls"]))
        ):
            return False
        if message["role"] == "tool":
            before = position - 1
            while before >= 0 and messages[before]["role"] == "tool":
                before -= 1
            calls = messages[before].get("tool_calls", []) if before >= 0 else []
            if message.get("tool_call_id") not in {call["id"] for call in calls}:
                return False
        if message.get("tool_calls"):
            answered = set()
            for after in messages[position + 1 :]:
                if after["role"] != "tool":
                    break
                answered.add(after["tool_call_id"])
            if answered != {call["id"] for call in message["tool_calls"]}:
                return False
    return True


CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def tool_exchange(call_text: str) -> None:
    """An assistant message calling a tool (CALL), then the tool's answer."""
    for role, content, metadata in (
        ("assistant", call_text, {"tool_calls": [CALL]}),
        ("tool", "sunny", {"tool_call_id": "call_1"}),
    ):
        say(content, role=role, metadata=metadata)


def test_context_messages_are_valid_input_for_openai_compatible_chat_apis():
    from subagents.runs import subagent_finish

    ask = say("what's the weather?")
    tool_exchange("checking the weather")
    say("now ask the researcher", role="assistant")
    subagent_finish(parent=ask, agent_name="researcher", content="it will rain later")
    say("orphan output", role="tool")

    messages = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192).messages

    assert _valid_for_openai(messages)
    assert {"role": "tool", "tool_call_id": "call_1", "content": "sunny"} in messages
    assert {
        "role": "assistant",
        "content": "checking the weather",
        "tool_calls": [CALL],
    } in messages
    assert {
        "role": "assistant",
        "content": "[result of sub-agent researcher] it will rain later",
    } in messages
    assert {"role": "assistant", "content": "[tool result] orphan output"} in messages


def test_malformed_tool_calls_are_left_out_of_the_message_and_the_item_says_so():
    arguments_as_object = dict(CALL, function={"name": "weather", "arguments": {"city": "杭州"}})
    say("checking", role="assistant", metadata={"tool_calls": [arguments_as_object, {"id": "c9"}]})
    say("sunny", role="tool", metadata={"tool_call_id": "call_1"})
    say("and now?", role="assistant", metadata={"tool_calls": [dict(CALL, id="c2", type=7)]})
    say("rain", role="tool", metadata={"tool_call_id": "c2"})

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)

    assert _valid_for_openai(context.messages)
    sent_call = dict(CALL, function={"name": "weather", "arguments": '{"city": "杭州"}'})
    assert context.messages[-4:] == [
        {"role": "assistant", "content": "checking", "tool_calls": [sent_call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "and now?"},
        {"role": "assistant", "content": "[tool result] rain"},
    ]
    left_out = [item.left_out_tool_calls for item in context.layers["working"].items]
    assert [note and note.split(":")[0] for note in left_out] == [
        "1 tool call(s) not sent, malformed",
        None,
        "1 tool call(s) not sent, malformed",
        None,
    ]


def test_a_tool_answer_whose_call_fell_out_of_working_memory_is_sent_as_text():
    tool_exchange("x " * 400)

    # The call (200 tokens) does not fit a 256 window's budget of 153.
    messages = context_build(agent_id="a1", session_id="s1", query=None, model_window=256).messages

    assert _valid_for_openai(messages)
    assert messages[-1] == {"role": "assistant", "content": "[tool result] sunny"}


@pytest.mark.parametrize("seed", range(4))
def test_every_context_answer_is_valid_for_openai(seed, api):
    rng = random.Random(seed)
    for i in range(40):
        role = rng.choice(["user", "assistant", "tool", "system"])
        metadata = None
        if role == "assistant" and rng.random() < 0.4:
            metadata = {"tool_calls": [dict(CALL, id=f"c{i}")]}
        if role == "tool" and rng.random() < 0.7:
            metadata = {"tool_call_id": f"c{i - rng.randint(1, 2)}"}
        api.post(
            "/sessions/s1/messages",
            {"role": role, "content": f"m{i} " * rng.randint(1, 60), "metadata": metadata},
        )
    for window in (256, 1024, 8192):
        body = api.post("/sessions/s1/context", {"model_window": window}).json()
        assert _valid_for_openai(body["messages"]), body["messages"]


@pytest.mark.parametrize("question", ["Do you remember my preferences?", "你记得我的偏好吗？"])
@pytest.mark.parametrize("with_vectors", [False, True])
def test_a_curated_preference_outranks_a_rule_extracted_one(question, with_vectors, monkeypatch):
    from memory import embeddings

    embedder = FakeEmbedder()
    monkeypatch.setattr(
        embeddings, "configured_embedder", lambda: embedder if with_vectors else None
    )
    vectors.query_vector.cache_clear()
    extracted = memory_create(
        agent_id="a1",
        content="Do you remember my preferences? 你记得我的偏好吗？ Please write a checklist.",
        memory_type="preference",
        actor="consolidation",
    )
    # Confirmed by many extractions and used often: only who wrote it tells them apart.
    LongTermMemory.objects.filter(pk=extracted.pk).update(access_count=20, confidence=1.0)
    person = memory_create(
        agent_id="a1",
        content="User prefers short answers with code samples",
        memory_type="preference",
        actor="api",
        confidence=1.0,
    )
    vectors.embed_pending()

    context = context_build(agent_id="a1", session_id="new", query=question, model_window=8192)

    ranked = [item.id for item in context.layers["long_term"].items]
    assert context.identity_recall and person.curated and not extracted.curated
    assert ranked.index(person.pk) < ranked.index(extracted.pk)
    assert ranked[0] == person.pk


def test_a_memory_that_a_working_message_says_is_left_out():
    message = say("I am allergic to peanuts.", session_id="new")
    memory = memory_create(
        agent_id="a1",
        content="I am allergic to peanuts.",
        memory_type="fact",
        actor="consolidation",
    )

    context = context_build(agent_id="a1", session_id="new", query=None, model_window=8192)

    assert context.layers["long_term"].items == []
    assert [(o.id, o.reason) for o in context.layers["long_term"].left_out] == [
        (memory.pk, f"says the same as message {message.pk}")
    ]
    assert str(context.messages).count("allergic to peanuts") == 1


def test_two_texts_say_the_same_when_one_contains_the_other_or_the_wording_is_close():
    from memory.text import folded, folded_say_the_same

    def says_the_same(a: str, b: str) -> bool:
        return folded_say_the_same(folded(a), folded(b))

    assert says_the_same("I am allergic to peanuts.", "Caroline: I am allergic to peanuts!")
    assert says_the_same("我喜欢喝绿茶", "我喜欢喝绿茶。")
    assert says_the_same("the user prefers green tea", "the user prefers green teas")
    assert not says_the_same("the user prefers green tea", "the user prefers black coffee")
    assert not says_the_same("tea", "a long message that never mentions the drink")
    assert not says_the_same("", "anything")


def test_the_api_explains_the_recall_layer(api):
    api.post("/sessions/old/messages", {"role": "user", "content": "We went camping at the lake."})
    api.post("/sessions/old/messages", {"role": "assistant", "content": "Lovely, which lake?"})
    api.post("/sessions/new/messages", {"role": "user", "content": "where did we go camping?"})

    body = api.post("/sessions/new/context", {"model_window": 4096}).json()

    recall = body["explanation"]["layers"]["recall"]
    assert [item["method"] for item in recall["items"]] == ["lexical", "neighbour"]
    assert recall["items"][0]["details"]["session_id"] == "old"
    assert recall["items"][0]["details"]["timestamp"].endswith("Z")
    assert recall["used"] == sum(item["tokens"] for item in recall["items"]) + recall["overhead"]
    assert recall["overhead"] == 10  # "Recalled from earlier conversations:" and a blank line
    assert body["explanation"]["query_source"] == "newest user message"
    assert "Session old:" in body["messages"][0]["content"]


def test_the_evaluation_counts_the_tokens_that_repeat_another_item():
    from bench.evaluation import duplicate_share
    from memory.context import Context, Item, Layer

    def layer(*texts: str) -> Layer:
        items = [Item(i, text, 0) for i, text in enumerate(texts)]
        return Layer(share=0, budget=0, method="newest", items=items)

    said = "I am allergic to peanuts and shellfish."  # 10 tokens
    context = Context(
        window=8192,
        budget=4915,
        query=None,
        query_source="none",
        layers={
            "working": layer("where is my inhaler?"),  # 5 tokens
            "long_term": layer("allergic to peanuts"),  # 5 tokens, inside the message below
            "recall": layer(said, said.upper()),  # the second says the same again
        },
        messages=[],
        cuts=[],
        degraded=[],
        identity_recall=False,
    )

    assert duplicate_share(context) == pytest.approx((5 + 10) / (5 + 5 + 10 + 10))


# --- what was left out, and why -----------------------------------------------------------


def left_out(context, layer: str) -> dict[int, str]:
    return {o.id: o.reason for o in context.layers[layer].left_out}


@pytest.mark.parametrize(
    ("said", "places", "reply", "thanks", "query"),
    [
        (
            "I took the kayak out on {} today.",
            ["the lake", "the river", "the bay", "the canal", "the reservoir"],
            "Sounds peaceful! How long did you stay out on the water, and did you see birds?",
            "Thanks!",
            "kayak",
        ),
        (
            "我今天去{}划皮划艇了。",
            ["湖上", "河上", "海湾", "运河", "水库"],
            "听起来很放松！你在水上待了多久？有没有看到水鸟？",
            "谢谢！",
            "皮划艇",
        ),
    ],
)
def test_a_small_budget_takes_the_other_hits_before_their_replies(
    said, places, reply, thanks, query
):
    # Each reply is longer than any hit, so that one fits only where a hit would; a thank-you
    # ends each session, so that the turns widening adds around a hit are never replies.
    turns = [
        chat(f"day-{n}", [said.format(place), reply, thanks], start=DAY_ONE + timedelta(days=n))
        for n, place in enumerate(places)
    ]
    replies = {hit.pk: answer.pk for hit, answer, _ in turns}
    say(query, session_id="new")
    best = search(agent_id="a1", query=SearchQuery(query, k=20)).hits[0].message

    seen = set()
    for window in range(200, 1200, 8):
        context = context_build(agent_id="a1", session_id="new", query=query, model_window=window)
        recall = context.layers["recall"]
        recalled = {item.id for item in recall.items}
        hits = [item for item in recall.items if item.id in replies]
        taken = {replies[item.id] for item in hits} & recalled
        if any(left.reason == "over budget" for left in recall.left_out):
            # A hit waits for room: no reply but the best hit's is in.
            assert taken <= {replies[best.pk]}, window
        seen.add((len(hits), len(taken)))
    # Windows with room for more hits and only the best's reply, and for every hit and reply.
    assert {(3, 1), (5, 5)} <= seen, seen


def test_matches_below_the_chosen_are_left_out_with_their_rank_and_score():
    def tea(text: str, **fields):
        return memory_create(agent_id="a1", content=text, memory_type="fact", actor="api", **fields)

    best, second = tea("green tea green tea every day"), tea("green tea at noon")
    third = tea("tea with lunch")
    expired = tea("green tea green tea green tea", expires_at=DAY_ONE)

    context = context_build(agent_id="a1", session_id="s1", query="green tea", model_window=8192)

    chosen = [item.id for item in context.layers["long_term"].items]
    reasons = left_out(context, "long_term")
    assert reasons[third.pk] == "ranked below the 2 chosen"
    # The best text match of all, expired: its score halved puts it below the chosen two.
    assert chosen == [best.pk, second.pk]
    assert reasons == {
        expired.pk: "ranked below the 2 chosen (expired: its score counts 0.5)",
        third.pk: "ranked below the 2 chosen",
    }
    scores = {o.id: o.score for o in context.layers["long_term"].left_out}
    assert scores[expired.pk] == 0.5 and 0 < scores[third.pk] < 0.5
    assert LongTermMemory.objects.get(pk=third.pk).access_count == 0


def test_recall_reads_the_turns_around_only_the_hits_it_reaches(monkeypatch):
    from memory import index, recall_fill

    # 60 earlier turns about tea, each its own hit; a window with room for a few of them.
    for day in range(60):
        chat(
            f"day-{day}",
            [f"Green tea number {day} was fine.", f"Noted, tea {day}."],
            start=DAY_ONE + timedelta(days=day),
        )
    asked: list[int] = []
    real = index.messages_around

    def messages_around(message_ids, **kwargs):
        ids = list(message_ids)
        asked.extend(ids)
        return real(ids, **kwargs)

    monkeypatch.setattr(index, "messages_around", messages_around)
    context = context_build(agent_id="a1", session_id="new", query="green tea", model_window=768)

    recall = context.layers["recall"]
    hits = [item for item in recall.items if item.method != "neighbour"]
    over_budget = [left for left in recall.left_out if left.reason == "over budget"]
    assert 0 < len(hits) < recall_fill.RECALL_CHUNK
    assert len(over_budget) > 2 * recall_fill.RECALL_CHUNK
    # The neighbours were read for the chunks of hits that the filling reached with room
    # left, not for all 100: the first chunk or two.
    assert len(asked) in (recall_fill.RECALL_CHUNK, 2 * recall_fill.RECALL_CHUNK)
    assert {item.id for item in hits} <= set(asked)


def test_the_identity_rule_and_missing_vectors_are_named(fake_embedder):
    def fact(text: str) -> LongTermMemory:
        return memory_create(agent_id="a1", content=text, memory_type="fact", actor="api")

    strong = [
        fact("do you remember me Sam"),
        fact("remember me at the lake"),
        fact("you remember me"),
    ]
    weak = fact("xylophone lessons weekly")
    vectors.embed_pending()
    # No vector yet: similarity cannot find them, their words can.
    waiting = fact("remember me as a tea lover")
    unrelated = fact("allergic to peanuts")

    context = context_build(
        agent_id="a1", session_id="s1", query="do you remember me", model_window=8192
    )

    assert context.identity_recall
    items = context.layers["long_term"].items
    assert {item.id for item in items} == {m.pk for m in strong} | {waiting.pk}
    (taken,) = [item for item in items if item.id == waiting.pk]
    assert (taken.method, taken.why) == (
        "lexical",
        "not embedded yet, by its words: matched 1 of 1 query words",
    )
    assert left_out(context, "long_term") == {
        weak.pk: "below the relevance floor: similarity 0.00 < 0.3",
        unrelated.pk: "not embedded yet: below the relevance floor: matched 0 of 1 query words",
    }


def test_a_weak_match_the_top_up_takes_is_not_also_left_out(fake_embedder):
    weak = memory_create(
        agent_id="a1", content="xylophone lessons weekly", memory_type="fact", actor="api"
    )
    vectors.embed_pending()

    context = context_build(
        agent_id="a1", session_id="s1", query="do you remember me", model_window=8192
    )

    assert [item.id for item in context.layers["long_term"].items] == [weak.pk]
    assert context.layers["long_term"].left_out == []


def test_a_summary_of_a_turn_in_working_memory_is_left_out():
    question = add_message("Which tea do I like?", session_id="s1")
    reply = add_message("Green tea.", role="assistant", session_id="s1", summarize=False)
    (summary,) = summarize_turns([reply])

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)

    assert {question.pk, reply.pk} <= {item.id for item in context.layers["working"].items}
    assert context.layers["short_term"].items == []
    assert left_out(context, "short_term") == {summary.pk: "its turn is in working memory"}


@pytest.mark.parametrize(
    ("long", "question", "mark"),
    [
        (
            "We camped by the lake and paddled kayaks all day. " * 60,
            "kayaks at the lake?",
            CUT_MARK,
        ),
        ("我们在湖边露营，划了一整天皮划艇。" * 40, "湖边的皮划艇？", CUT_MARK_CHINESE),
    ],
    ids=["english", "chinese"],
)
def test_a_long_recalled_message_is_cut_in_its_language_and_its_id_gives_it_whole(
    api, long, question, mark
):
    """The cut ends in the text's language (a sub-agent's stored result keeps the design's
    mark); the line's #id is the one `GET /messages/{id}` answers with the whole text."""
    stored = api.post("/sessions/old/messages", {"role": "user", "content": long}).json()
    api.post("/sessions/old/messages", {"role": "assistant", "content": "Lovely!"})
    api.post("/sessions/new/messages", {"role": "user", "content": question})

    system = api.post("/sessions/new/context", {"model_window": 8192}).json()["messages"][0]
    line = next(line for line in system["content"].splitlines() if "[#" in line)
    named = int(re.search(r"\[#(\d+)\]", line)[1])
    whole = api.get(f"/messages/{named}").json()

    assert line.endswith(mark) and TRUNCATION_MARK not in line
    assert "] assistant: Lovely!" in system["content"]  # whole, without an id
    assert system["content"].count("[#") == 1
    assert named == stored["id"] and whole["content"] == long
    assert long.startswith(line.split(": ", 1)[1].removesuffix(mark))
