"""Recall that knows who is speaking: what the person said comes first, and an agent's long
reply is support, shown compactly (its opening and the sentences the query names, within a
cap, with its id), unless the question asks what the agent said. In English and Chinese."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from memory.context import context_build
from memory.index_schema import query_terms
from memory.recall_render import (
    GAP,
    MESSAGE_TOKENS,
    OPENING_CHARS,
    REPLY_TOKENS,
    compact,
    message_ref,
    opening,
)
from memory.search import SearchQuery, search
from memory.tokens import estimate_tokens
from tests.factories import add_message

say = partial(add_message, summarize=False)
DAY_ONE = datetime(2026, 2, 2, 20, 30, tzinfo=UTC)


@dataclass(frozen=True)
class Speakers:
    fact: str  # what the person said once, in passing
    fact_reply: str  # the agent's short answer to it
    essay: str  # an agent's long reply that says the question's words more often
    asks: str  # a user turn before each essay
    question: str  # about the fact
    advice: list[str]  # a long reply: its sentences, the answer among them
    answer: str  # the sentence of `advice` that answers `about_advice`
    unrelated: str  # a sentence of `advice` the question does not name
    about_advice: str  # what did you tell me ...?
    mentions: list[str]  # user turns that say the words of `about_advice`


ENGLISH = Speakers(
    fact="Oh and btw I went to the Radiohead concert with my sister last Friday.",
    fact_reply="Sounds like a great night!",
    essay=(
        "Concerts with your sister are a lovely tradition, and going to concerts together "
        "gives you both something to look forward to. When you go to a concert, plan the "
        "trip home, bring earplugs, and check the venue's bag policy before you go. "
    )
    * 6,
    asks="Any tips for concerts with family?",
    question="Which concert did I go to with my sister?",
    advice=[
        "Good to know, and it is worth planning for, because Kyoto in April can be chilly.",
        "Days are often mild, but mornings and evenings can drop to five degrees.",
        "Temples are cold inside, since you take your shoes off on wooden floors.",
        "Pack a light down jacket that packs small, and two or three thin layers.",
        "Buy disposable heat packs called kairo at any convenience store in Japan.",
        "A compact umbrella helps too, since April showers are common.",
        "Carry a small bag for your shoes at the temples, and your allergy card.",
        "A portable battery is useful, since you will use maps all day.",
    ]
    * 3,
    answer="Buy disposable heat packs called kairo at any convenience store in Japan.",
    unrelated="A portable battery is useful, since you will use maps all day.",
    about_advice="What did you tell me to buy at a convenience store in Japan?",
    mentions=[f"I need snacks from the convenience store, number {n}." for n in range(24)],
)

CHINESE = Speakers(
    fact="对了，上周五我跟妹妹去了五月天的演唱会。",
    fact_reply="听起来很棒！",
    essay=(
        "不管你和妹妹去看了谁的演唱会，一起去看演唱会都是很好的回忆。去演唱会之前可以提前规划交通，"
        "记得带耳塞，和妹妹约好集合的地点，演唱会散场时人很多。"
    )
    * 4,
    asks="和家人去演唱会有什么建议？",
    question="我和妹妹去看了谁的演唱会？",
    advice=[
        "恭喜豆豆进入新阶段，六个月左右开始添加辅食是普遍推荐的时间。",
        "刚开始不用紧张，奶仍然是主要的营养来源。",
        "每次只加一种新食物，方便观察有没有过敏反应。",
        "第一口辅食建议吃强化铁的婴儿米粉，用温水调成稀糊。",
        "选在上午两顿奶之间喂，宝宝精神好又不太饿。",
        "一岁以内不要加盐、糖和酱油。",
        "宝宝扭头、闭嘴、推开勺子，就是吃饱了。",
    ]
    * 3,
    answer="第一口辅食建议吃强化铁的婴儿米粉，用温水调成稀糊。",
    unrelated="宝宝扭头、闭嘴、推开勺子，就是吃饱了。",
    about_advice="你建议豆豆的第一口辅食吃什么？",
    mentions=[f"豆豆的辅食今天吃了第{n}口。" for n in range(24)],
)

LANGUAGES = pytest.mark.parametrize("language", [ENGLISH, CHINESE], ids=["english", "chinese"])


def turn(text: str, *, role: str, session: str, minute: int, day: int = 0):
    return say(
        text,
        role=role,
        session_id=session,
        timestamp=DAY_ONE + timedelta(days=day, minutes=minute),
    )


def recall_lines(context) -> dict[int, str]:
    return {item.id: item.line for item in context.layers["recall"].items}


def text_of(line: str) -> str:
    """A recalled line without its date and speaker (and id)."""
    return line.split(": ", 1)[1]


@pytest.mark.django_db
@LANGUAGES
def test_a_short_user_turn_beats_long_replies_that_match_more_words(language):
    """Replies that say the question's words many times rank above the person's one mention
    of the fact. Whatever the window, the room goes to what the person said first: a reply is
    never in while the fact is out; the replies take what is left, each within its cap until
    every hit is in."""
    for day in range(3):
        turn(language.asks, role="user", session=f"tips-{day}", minute=0, day=day)
        turn(language.essay, role="assistant", session=f"tips-{day}", minute=1, day=day)
    fact = turn(language.fact, role="user", session="friday", minute=0, day=9)
    turn(language.fact_reply, role="assistant", session="friday", minute=1, day=9)
    say(language.question, session_id="new")
    # The premise: search ranks the replies above the fact.
    ranked = search(agent_id="a1", query=SearchQuery(language.question, k=20)).hits
    first = [hit.message.pk for hit in ranked].index(fact.pk)
    assert sum(hit.message.role == "assistant" for hit in ranked[:first]) == 3

    seen = set()
    for window in range(256, 2048, 32):
        context = context_build(
            agent_id="a1", session_id="new", query=language.question, model_window=window
        )
        recall = context.layers["recall"]
        replies = [item for item in recall.items if item.role == "assistant" and item.tokens > 50]
        assert fact.pk in {item.id for item in recall.items} or not replies, window
        # Within their cap while anything waits for room; at more length only once all is in.
        cap = (
            REPLY_TOKENS
            if any(left.reason == "over budget" for left in recall.left_out)
            else MESSAGE_TOKENS
        )
        for item in replies:
            assert estimate_tokens(text_of(item.line)) <= cap
            assert message_ref(item.id) in item.line
        assert context.used <= context.budget
        seen.add(("fact" if fact.pk in {i.id for i in recall.items} else "") + f"{len(replies)}")
    # Windows with room for the fact alone, for it and some replies, for all.
    assert {"fact0", "fact1", "fact3"} <= seen


@pytest.mark.django_db
@LANGUAGES
def test_it_shows_a_long_reply_by_its_opening_and_the_sentences_that_answer(language):
    """A question about what the agent said: its reply is found, though the person's turns
    say the question's words too, and it is shown by its opening (verbatim, as the
    evaluation finds a turn) and the sentence that answers, not by sentences nobody asked
    about; the whole text is one call away (its id)."""
    advice_text = " ".join(language.advice)
    turn("Kyoto? 豆豆?", role="user", session="trip", minute=0)
    reply = turn(advice_text, role="assistant", session="trip", minute=1)
    for day, mention in enumerate(language.mentions, start=1):
        turn(mention, role="user", session=f"later-{day}", minute=0, day=day)
        turn("OK!", role="assistant", session=f"later-{day}", minute=1, day=day)
    say(language.about_advice, session_id="new")

    context = context_build(
        agent_id="a1", session_id="new", query=language.about_advice, model_window=1024
    )

    lines = recall_lines(context)
    assert reply.pk in lines
    line = lines[reply.pk]
    shown = text_of(line)
    assert shown.startswith(language.advice[0])
    assert language.answer in shown
    assert language.unrelated not in shown
    assert shown.endswith(GAP)
    assert f"{message_ref(reply.pk)} assistant: " in line
    assert estimate_tokens(shown) <= REPLY_TOKENS < estimate_tokens(advice_text)


@pytest.mark.django_db
@LANGUAGES
def test_a_long_reply_after_a_recalled_turn_takes_more_room_only_when_all_else_is_in(language):
    """The reply after the person's turn comes along compactly (its opening and what the
    question names) while other turns want the room; once every hit and the turns around
    them are in, the room left shows it at more length, never whole past MESSAGE_TOKENS."""
    fact = turn(language.fact, role="user", session="friday", minute=0)
    essay = " ".join(language.advice) + language.essay
    reply = turn(essay, role="assistant", session="friday", minute=1)
    others = [
        turn(f"{language.fact} {n}", role="user", session=f"again-{n}", minute=0, day=n)
        for n in range(1, 13)
    ]
    say(language.question, session_id="new")

    def reply_shown(window: int) -> tuple[str | None, set[int]]:
        context = context_build(
            agent_id="a1", session_id="new", query=language.question, model_window=window
        )
        lines = recall_lines(context)
        return (text_of(lines[reply.pk]) if reply.pk in lines else None), set(lines)

    # The smallest window that has room for the reply: the person's turns are all in first.
    tight, recalled = next(
        shown for shown in map(reply_shown, range(512, 4096, 64)) if shown[0] is not None
    )
    assert {fact.pk, *(o.pk for o in others)} <= recalled
    roomy, _ = reply_shown(8192)

    assert tight.startswith(language.advice[0]) and roomy.startswith(language.advice[0])
    assert estimate_tokens(tight) <= REPLY_TOKENS < estimate_tokens(roomy) <= MESSAGE_TOKENS


@LANGUAGES
def test_a_trimmed_reply_keeps_its_opening_and_the_matching_sentences_within_the_cap(language):
    text = "\n".join(language.advice)
    terms = query_terms(language.about_advice)

    shown = compact(text, terms, REPLY_TOKENS)

    assert shown.startswith(language.advice[0])
    assert language.answer in shown
    assert estimate_tokens(shown) <= REPLY_TOKENS
    # Sentences left out are marked, once each gap.
    assert f" {GAP} " in shown and f"{GAP} {GAP}" not in shown


def test_a_reply_that_opens_with_a_few_words_keeps_its_first_80_characters():
    """ "Great plan." says nothing: the opening is the reply's first 80 characters, to the end
    of the word there, as an evaluation reading a turn by its opening finds it."""
    text = (
        "Great plan. A ryokan stay is one of the most memorable parts of a Kyoto trip, "
        "and Higashiyama is the ideal area for it. " * 5
    )

    start = opening(text, REPLY_TOKENS)

    assert start.startswith(text[:OPENING_CHARS])
    assert (
        start == "Great plan. A ryokan stay is one of the most memorable parts of a Kyoto trip, and"
    )
    assert (
        opening("很好。" + "在湖边露营是很好的休息方式。" * 20, REPLY_TOKENS)
        == (("很好。" + "在湖边露营是很好的休息方式。" * 20)[:OPENING_CHARS])
    )


@pytest.mark.parametrize("seed", range(40))
def test_a_trimmed_reply_is_never_over_its_cap(seed):
    """Whatever the text, the query and the cap: long sentences, no sentence end, Chinese,
    mixed scripts, a cap smaller than the opening."""
    rng = random.Random(seed)
    words = ["tea", "kayak", "湖边", "露营", "pack", "heat", "。", ".", "\n", "- ", "**", "：", "!"]
    text = "".join(
        rng.choice(words) + rng.choice(["", " ", " "]) for _ in range(rng.randint(1, 900))
    )
    limit = rng.choice([8, 20, 60, REPLY_TOKENS])
    terms = query_terms(" ".join(rng.sample(words[:6], 2)))

    shown = compact(text, terms, limit)

    assert estimate_tokens(shown) <= limit
    flat = " ".join(text.split())
    assert flat.startswith(shown.split(f" {GAP}")[0])  # the opening, verbatim
