"""The context counts exactly what it sends: every layer's items carry the text that goes into
the prompt, and their tokens are that text's. Checked on contexts of a store as agents write
it (tool calls, a sub-agent's result, summaries, memories, earlier sessions), in English and
in Chinese, with and without vectors, from a window too small for much to one with room."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from memory import vectors
from memory.context import context_build
from memory.context_items import SECTIONS, header_tokens
from memory.memories import memory_create
from memory.recall_render import message_ref
from memory.summaries import summarize_turns
from memory.tokens import CUT_MARK, CUT_MARK_CHINESE, TRUNCATION_MARK, estimate_tokens
from tests.factories import add_message

pytestmark = pytest.mark.django_db

say = partial(add_message, summarize=False)
DAY_ONE = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
WINDOWS = (256, 512, 1024, 4096, 8192)


@dataclass(frozen=True)
class Language:
    past: list[tuple[str, list[str]]]  # earlier sessions: (id, alternating user and assistant)
    session: list[str]  # this session's first turns: user, assistant, ...
    call: str  # the assistant's words with its tool call
    answer: str  # the tool's answer
    asks_subagent: str
    subagent_result: str
    last_turns: list[str]  # user, assistant, user: the newest
    memories: list[tuple[str, str]]  # (type, text)
    queries: tuple[str | None, ...]
    cut_mark: str  # how a recalled message shown cut ends, in the language of its text
    today: str  # how the date line starts, in the language of the query


ENGLISH = Language(
    past=[
        (
            "trip",
            [
                "We went camping at the lake last weekend with the kids.",
                "That sounds lovely! " + "Camping by a lake is a fine way to rest. " * 40,
                "They loved roasting marshmallows by the fire.",
                "Marshmallows are the best part of camping.",
            ],
        ),
        (
            "health",
            [
                "I am allergic to peanuts and shellfish.",
                "Noted: no peanuts and no shellfish in any recipe I suggest.",
            ],
        ),
        (
            "notes",
            [
                "My notes from camping at the lake: " + "kayaks at dawn, a fire at night. " * 50,
                "Thanks for sharing them.",
            ],
        ),
    ],
    session=[
        "Plan a weekend trip for my family, please.",
        "Happy to. Where would you like to go, and how many days?",
        "Two days, somewhere near water; the kids like kayaks.",
        "A lake with kayak rental would suit you; I will look at the weather.",
    ],
    call="Checking the weather for the lake this weekend. " * 12,
    answer="Saturday sunny, 24 degrees; Sunday light rain.",
    asks_subagent="Let me ask the research agent for campsites with kayak rental.",
    subagent_result="Three campsites rent kayaks: Pine Cove, Lakeside, Birch Bay.",
    last_turns=["Which one allows dogs?", "Pine Cove allows dogs on a leash.", "Book Pine Cove."],
    memories=[
        ("preference", "The user prefers short answers."),
        ("fact", "The user is allergic to peanuts and shellfish."),
        ("fact", "The user has two kids who love kayaks."),
        ("project", "Planning a family camping weekend at a lake."),
    ],
    queries=(None, "camping at the lake with kayaks", "do you remember me?"),
    cut_mark=CUT_MARK,
    today="Today is ",
)

CHINESE = Language(
    past=[
        (
            "旅行",
            [
                "上周末我们带孩子去湖边露营了。",
                "听起来很棒！" + "在湖边露营是很好的休息方式。" * 20,
                "孩子们最喜欢在篝火边烤棉花糖。",
                "烤棉花糖是露营最好玩的部分。",
            ],
        ),
        ("健康", ["我对花生和贝类过敏。", "记住了：我推荐的菜谱里不放花生和贝类。"]),
        ("笔记", ["我在湖边露营的笔记：" + "清晨划皮划艇，晚上点篝火。" * 30, "谢谢分享。"]),
    ],
    session=[
        "请帮我计划一次家庭周末旅行。",
        "好的。你想去哪里，玩几天？",
        "两天，离水近一点；孩子们喜欢皮划艇。",
        "有皮划艇租赁的湖边很适合你们；我查一下天气。",
    ],
    call="正在查询这个周末湖边的天气。" * 6,
    answer="周六晴，24度；周日小雨。",
    asks_subagent="我请调研助手找一下能租皮划艇的营地。",
    subagent_result="有三个营地出租皮划艇：松湾、湖畔、桦树湾。",
    last_turns=["哪个营地可以带狗？", "松湾允许牵绳带狗。", "就订松湾吧。"],
    memories=[
        ("preference", "用户喜欢简短的回答。"),
        ("fact", "用户对花生和贝类过敏。"),
        ("fact", "用户有两个喜欢皮划艇的孩子。"),
        ("project", "正在计划一次湖边的家庭露营周末。"),
    ],
    queries=(None, "湖边露营和皮划艇", "你还记得我吗？"),
    cut_mark=CUT_MARK_CHINESE,
    today="今天是",
)

CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def store(language: Language) -> None:
    """Earlier sessions, memories (one expired, one curated by a person), and this session:
    turns with their summaries, a tool exchange, a malformed call, a sub-agent's result."""
    from subagents.runs import subagent_finish

    for day, (session, lines) in enumerate(language.past):
        for minute, text in enumerate(lines):
            say(
                text,
                role="user" if minute % 2 == 0 else "assistant",
                session_id=session,
                timestamp=DAY_ONE + timedelta(days=day, minutes=minute),
                metadata={"speaker": "Sam"} if minute == 0 else None,
            )
    for number, (memory_type, text) in enumerate(language.memories):
        memory_create(
            agent_id="a1",
            content=text,
            memory_type=memory_type,
            actor="api" if number % 2 else "consolidation",
            expires_at=DAY_ONE if number == 3 else None,
        )
    replies = [
        say(text, role="user" if i % 2 == 0 else "assistant", session_id="now")
        for i, text in enumerate(language.session)
    ]
    summarize_turns(replies[1::2])
    say(language.call, role="assistant", session_id="now", metadata={"tool_calls": [CALL]})
    say(language.answer, role="tool", session_id="now", metadata={"tool_call_id": "call_1"})
    say(language.call, role="assistant", session_id="now", metadata={"tool_calls": [{"id": 7}]})
    parent = say(language.asks_subagent, role="assistant", session_id="now")
    subagent_finish(parent=parent, agent_name="researcher", content=language.subagent_result)
    for i, text in enumerate(language.last_turns):
        say(text, role="user" if i % 2 == 0 else "assistant", session_id="now")


def sent_pieces(system: str, context: Any) -> list[tuple[Any, str]]:
    """The system message cut where the items' pieces say it is made of them: the date line
    and a blank line, then each section's header line, its items' pieces one after the other,
    and the blank line before the next section. Each (item, the sent text it stands for);
    fails where the text is not exactly that (a piece counted but not sent, or sent but not
    counted)."""
    text = system + "\n"  # the last section's line break, which the message does not end with
    assert text.startswith(context.date_line + "\n\n"), text
    cursor = len(context.date_line) + 2
    pieces: list[tuple[Any, str]] = []
    sections = [(name, header) for name, header in SECTIONS if context.layers[name].items]
    for number, (name, header) in enumerate(sections):
        assert text.startswith(header + "\n", cursor), (name, text[cursor:])
        cursor += len(header) + 1
        for item in context.layers[name].items:
            for piece in item.sent:
                sent = text[cursor : cursor + len(piece)]
                assert sent == piece, (name, item.id, sent, piece)
                pieces.append((item, sent))
                cursor += len(sent)
        if number < len(sections) - 1:
            assert text[cursor] == "\n", (name, text[cursor:])
            cursor += 1
    assert cursor == len(text), text[cursor:]
    return pieces


def check_counted_as_sent(context: Any) -> None:
    system = context.messages[0]["content"] if context.messages[0]["role"] == "system" else None
    chat = context.messages[1:] if system is not None else context.messages
    # Working memory: one chat message per item, whose content is the item's counted text.
    working = context.layers["working"].items
    assert len(chat) == len(working)
    for item, message in zip(working, chat, strict=True):
        assert (message["content"],) == item.sent
        assert item.tokens == estimate_tokens(message["content"])
    # The memory layers: the system message is their headers and their items' pieces.
    pieces = sent_pieces(system or "", context) if system is not None else []
    for name, _ in SECTIONS:
        layer = context.layers[name]
        for item in layer.items:
            assert item.tokens == sum(estimate_tokens(sent) for one, sent in pieces if one is item)
        header = next(h for n, h in SECTIONS if n == name)
        assert layer.overhead == (header_tokens(header) if layer.items else 0)
    counted = sum(layer.used for layer in context.layers.values()) + context.date_line_tokens
    if system is None:
        assert context.date_line is None and context.date_line_tokens == 0
    else:
        assert context.date_line_tokens == header_tokens(context.date_line)
    sent_tokens = (
        context.date_line_tokens
        + sum(estimate_tokens(m["content"]) for m in chat)
        + sum(estimate_tokens(sent) for _, sent in pieces)
        + sum(header_tokens(h) for n, h in SECTIONS if context.layers[n].items)
    )
    assert counted == sent_tokens == context.used <= context.budget
    # Counted as one text (no rounding per piece), what is sent is never more.
    assert sum(estimate_tokens(m["content"]) for m in context.messages) <= context.used


@pytest.mark.parametrize("language", [ENGLISH, CHINESE], ids=["english", "chinese"])
@pytest.mark.parametrize("with_vectors", [False, True], ids=["lexical", "vectors"])
def test_it_counts_every_layer_from_the_text_it_sends(language, with_vectors, request):
    if with_vectors:
        request.getfixturevalue("fake_embedder")
    store(language)
    if with_vectors:
        vectors.embed_pending()

    seen: set[str] = set()
    other_marks = {CUT_MARK, CUT_MARK_CHINESE, TRUNCATION_MARK} - {language.cut_mark}
    for window in WINDOWS:
        for query in language.queries:
            context = context_build(
                agent_id="a1", session_id="now", query=query, model_window=window
            )
            check_counted_as_sent(context)
            if context.date_line is not None:
                assert context.date_line.startswith(language.today)
            seen |= {name for name, layer in context.layers.items() if layer.items}
            seen |= {"cut"} if context.cuts else set()
            contents = [m["content"] for m in context.messages]
            seen |= (
                {"sub-agent result"}
                if any("[result of sub-agent" in c for c in contents)
                else set()
            )
            seen |= (
                {"call left behind"}
                if any(c.startswith("[tool result]") for c in contents)
                else set()
            )
            seen |= {"tool pair"} if any("tool_call_id" in m for m in context.messages) else set()
            seen |= {"truncated"} if any(language.cut_mark in c for c in contents) else set()
            assert not any(mark in c for c in contents for mark in other_marks)
            recalled = context.layers["recall"].items
            replies = [i for i in recalled if i.role == "assistant"]
            seen |= {"trimmed"} if any(message_ref(i.id) in i.line for i in replies) else set()

    # The store reaches every case the counting has: each layer, each form of a tool result,
    # a recalled message cut short, a long reply trimmed to its opening and what the query
    # names, the cut order.
    assert seen == {
        "working",
        "short_term",
        "long_term",
        "recall",
        "cut",
        "sub-agent result",
        "call left behind",
        "tool pair",
        "truncated",
        "trimmed",
    }


def test_it_counts_a_result_sent_as_text_with_the_words_that_introduce_it():
    """A tool result without its call goes as "[result of sub-agent ...] text": the words
    before the text are sent, so they are counted, and the budget holds."""
    from subagents.runs import subagent_finish

    for number in range(30):
        parent = say(f"Ask the researcher about lake {number}.", role="assistant")
        subagent_finish(parent=parent, agent_name="researcher", content=f"Lake {number} is calm.")

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=256)

    sent = [m["content"] for m in context.messages]
    assert "[result of sub-agent researcher] Lake 29 is calm." in sent
    assert sum(estimate_tokens(text) for text in sent) == context.used <= context.budget
