"""Generates agent_sessions (README.md beside this file): conversations between people and
their AI assistant, composed from the hand-written blocks in blocks_en.py and blocks_zh.py.

    python tests/data/agent_sessions/generate.py [OUT_DIR]

writes conversations.jsonl and queries.jsonl to OUT_DIR (default: this folder). Standard
library only, one fixed seed: the same blocks always give the same files.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 33
SESSIONS = 60
TURNS = (5, 11)  # user turns per session (each answered by the assistant), fewest and most
MESSAGES = 900  # at least, per conversation
REPLY_WORDS = (150, 600)  # Chinese: characters / 2 (README)
REPLY_TARGET = (190, 500)  # the words a reply is composed up to, before its last block
MOST_SAID_PER_SESSION = 4  # user turns of one session that carry something said in passing
THEMED_REQUESTS = 3  # requests about each question's subject, per user
FOLLOW_UP_SHARE = 0.55  # of the later turns of a session: a follow-up on its last request
SESSION_TIMES = ["7:15 pm", "8:30 pm", "9:05 pm", "12:40 pm", "6:50 pm", "10:20 am", "9:45 pm"]
CN_DIGITS = "〇一二三四五六七八九十"
MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
# The kinds of question, in the order each conversation's questions are listed.
CATEGORIES = ("fact", "changed", "assistant", "temporal", "aggregation", "recommend")


def load(name: str) -> ModuleType:
    """A blocks module beside this file, whether run as a script or loaded by a test."""
    spec = importlib.util.spec_from_file_location(f"agent_sessions_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reply_words(text: str, *, chinese: bool) -> float:
    """Words of a reply: whitespace-separated in English, non-space characters / 2 in Chinese
    (a Chinese word is about two characters)."""
    return len("".join(text.split())) / 2 if chinese else len(text.split())


def normalised(text: str) -> str:
    return " ".join(text.split())


def opening_keys(text: str) -> list[str]:
    """What eval_locomo finds a turn by (bench/evaluation.py): its whole text, its first 80
    characters and its first sentence of 20 or more characters, whitespace-normalised."""
    text = normalised(text)
    keys = [text, text[:80]]
    end = re.search(r"[.!?](?=\s)|[。！？]", text)
    if end and end.end() >= 20:
        keys.append(text[: end.end()])
    return keys


@dataclass
class Language:
    blocks: ModuleType
    chinese: bool

    def join(self, *parts: str) -> str:
        return ("" if self.chinese else " ").join(parts)

    def addressed(self, subject: str) -> str:
        """A request's subject as the assistant says it ("my" -> "your")."""
        for pattern, replacement in self.blocks.PRONOUNS:
            subject = re.sub(pattern, replacement, subject)
        return subject

    def day(self, when: date) -> str:
        if self.chinese:
            return f"{when.year}年{when.month}月{when.day}日"
        return f"{when.day} {MONTHS[when.month - 1]} {when.year}"

    def month(self, month: int) -> str:
        if self.chinese:
            tens, ones = divmod(month, 10)
            return ("十" if tens else "") + (CN_DIGITS[ones] if ones else "")
        return MONTHS[month - 1]

    def days(self, count: int) -> str:
        return f"{count}天" if self.chinese else f"{count} days"

    def times(self, count: int) -> str:
        return f"{count}次" if self.chinese else f"{count} times"

    def listing(self, items: list[str]) -> str:
        return "、".join(items) if self.chinese else ", ".join(items)


@dataclass
class Said:
    """What goes into one user turn besides its request (or, for the assistant kind, the
    request and the reply's paragraph that says it). Things said around a question (its
    distractors) are Said too; no question lists them."""

    key: str
    session: int
    clause: str = ""
    offset: int = 0  # days before the session the event happened
    request_first: bool | None = None  # None: either order
    # topic, request, subject and maybe `said` (what the reply must say) or `own` (the
    # subject as the user says it, for follow-ups)
    assistant: dict[str, str] | None = None
    echo: str = ""  # what the reply to this turn says about it, in other words


@dataclass
class Question:
    category: str
    question: str
    answer: str
    keys: list[str]
    superseded: list[str] = field(default_factory=list)  # older statements of a changed fact


@dataclass
class Plan:
    """One persona's sessions, things said in passing, where they go, and the questions about
    them."""

    dates: list[date]
    sizes: list[int]  # user turns per session
    said: list[Said] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    # session -> what a reply of it says again about something the user said before
    recalled: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))

    def recall_later(self, rng: random.Random, said: Said) -> None:
        """The assistant brings a lasting fact up again in one to three later sessions, as
        assistants do ("since you're allergic to peanuts ...")."""
        later = range(said.session + 1, SESSIONS)
        for session in rng.sample(later, min(len(later), rng.randint(1, 3))):
            self.recalled[session].append(said.echo)

    def load(self, session: int) -> int:
        return sum(s.session == session for s in self.said)

    def pick(self, rng: random.Random, sessions: range | list[int]) -> int:
        """One of `sessions`, among those with the fewest things said in passing."""
        candidates = [s for s in sessions if self.load(s) < MOST_SAID_PER_SESSION] or list(sessions)
        return rng.choice(candidates)

    def around(
        self, rng: random.Random, key: str, clauses: list[str], sessions: range | list[int]
    ) -> None:
        """Distractors: each clause, said in passing in one of `sessions`, uses a question's
        words without answering it. They come in the order listed (booking an exam before
        waiting for its results)."""
        added = []
        for n, clause in enumerate(clauses):
            added.append(Said(f"{key}-around-{n}", self.pick(rng, sessions), clause))
            self.said.append(added[-1])
        for said, session in zip(added, sorted(s.session for s in added), strict=True):
            said.session = session


def fill(template: str, values: dict[str, Any]) -> str:
    return template.format(**values)


def session_dates(rng: random.Random, start: tuple[int, int, int]) -> list[date]:
    day = date(*start)
    dates = []
    for _ in range(SESSIONS):
        dates.append(day)
        day += timedelta(days=rng.randint(2, 5))
    return dates


def when(lang: Language, rng: random.Random, offset: int) -> str:
    return rng.choice(lang.blocks.WHEN[offset])


def not_saying(answer: str, clauses: list[str]) -> list[str]:
    """Distractors never hold the answer (the evidence alone says it)."""
    assert not any(answer in clause for clause in clauses), (answer, clauses)
    return clauses


def plan_simple(lang: Language, rng: random.Random, plan: Plan, persona: int) -> None:
    """Facts, preferences, dated events and the assistant's words: one turn each, and the
    turns around them that use their words."""
    b = lang.blocks
    everywhere = range(SESSIONS)
    for i, frame in enumerate(b.FACTS):
        v = frame["values"][persona]
        key = f"fact-{i}"
        said = Said(key, plan.pick(rng, everywhere), fill(frame["clause"], v))
        said.echo = fill(frame["echo"], v)
        plan.said.append(said)
        plan.recall_later(rng, said)
        answer = fill(frame["answer"], v)
        plan.around(rng, key, not_saying(answer, [fill(c, v) for c in frame["around"]]), everywhere)
        plan.questions.append(Question("fact", fill(frame["question"], v), answer, [key]))
    for i, frame in enumerate(b.PREFERENCES):
        v = frame["values"][persona]
        key = f"pref-{i}"
        said = Said(key, plan.pick(rng, range(SESSIONS - 2)), v["clause"], echo=v["echo"])
        plan.said.append(said)
        plan.recall_later(rng, said)
        plan.around(rng, key, frame["around"], everywhere)
        plan.questions.append(Question("recommend", frame["question"], v["answer"], [key]))
    for i, frame in enumerate(b.ASSISTANT_SAID):
        v = frame["values"][persona]
        key = f"said-{i}"
        # The same kind of advice about other things (another activity, dish, sum, product).
        for n, other in enumerate([v, *frame["others"]]):
            filled = {name: fill(frame[name], other) for name in ("request", "subject", "said")}
            filled["topic"] = frame["topic"]
            other_key = key if n == 0 else f"{key}-other-{n}"
            plan.said.append(Said(other_key, plan.pick(rng, everywhere), assistant=filled))
        # Other requests about the same thing, answered by the topic's advice alone.
        for n, (request, subject) in enumerate(frame["alike"]):
            alike = {
                "topic": frame["topic"],
                "request": fill(request, v),
                "subject": fill(subject, v),
            }
            said = Said(f"{key}-alike-{n}", plan.pick(rng, everywhere), assistant=alike)
            plan.said.append(said)
        plan.questions.append(
            Question("assistant", fill(frame["question"], v), fill(frame["answer"], v), [key])
        )
    for i, frame in enumerate(b.DATED):
        v = frame["values"][persona]
        key, offset = f"dated-{i}", rng.choice([0, 1])
        session = plan.pick(rng, range(SESSIONS // 4, SESSIONS - SESSIONS // 4))
        clause = fill(frame["clause"], v | {"when": when(lang, rng, offset)})
        plan.said.append(Said(key, session, clause, offset, echo=fill(frame["echo"], v)))
        # Planning it before, talking about it after: never with a day.
        plan.around(rng, f"{key}-before", [fill(c, v) for c in frame["before"]], range(session))
        after = range(session + 1, SESSIONS)
        plan.around(rng, f"{key}-after", [fill(c, v) for c in frame["after"]], after)
        answer = lang.day(plan.dates[session] - timedelta(days=offset))
        plan.questions.append(Question("temporal", fill(frame["question"], v), answer, [key]))


def plan_changed(lang: Language, rng: random.Random, plan: Plan, persona: int) -> None:
    """A fact said early and its new value said at least four sessions later: the question
    asks for the new one, whose turn alone is the evidence."""
    for i, frame in enumerate(lang.blocks.CHANGED):
        v = frame["values"][persona]
        old = plan.pick(rng, range(SESSIONS // 2))
        new = plan.pick(rng, range(old + 4, SESSIONS))
        echo_old, echo_new = fill(frame["echo_old"], v), fill(frame["echo_new"], v)
        plan.said.append(Said(f"changed-{i}-old", old, fill(frame["old"], v), echo=echo_old))
        plan.said.append(Said(f"changed-{i}", new, fill(frame["new"], v), echo=echo_new))
        answer = fill(frame["answer"], v)
        around = not_saying(answer, [fill(c, v) for c in frame["around"]])
        plan.around(rng, f"changed-{i}", around, range(SESSIONS))
        plan.questions.append(
            Question(
                "changed",
                fill(frame["question"], v),
                answer,
                [f"changed-{i}"],
                [f"changed-{i}-old"],
            )
        )


def plan_between(lang: Language, rng: random.Random, plan: Plan, persona: int) -> None:
    """Two dated events three to fifteen sessions apart: the question asks the days between.
    Around them: the first's words before it, both events' words between and after."""
    for i, frame in enumerate(lang.blocks.BETWEEN):
        v = frame["values"][persona]
        first = plan.pick(rng, range(SESSIONS // 6, SESSIONS - 20))
        second = plan.pick(rng, range(first + 3, first + 16))
        days = []
        for part, session in (("first", first), ("second", second)):
            offset = rng.choice([0, 1])
            clause = fill(frame[part], v | {"when": when(lang, rng, offset)})
            echo = fill(frame[f"echo_{part}"], v)
            plan.said.append(Said(f"between-{i}-{part}", session, clause, offset, echo=echo))
            days.append(plan.dates[session] - timedelta(days=offset))
        for part, sessions in (
            ("before", range(first)),
            ("between", range(first + 1, second)),
            ("after", range(second + 1, SESSIONS)),
        ):
            plan.around(rng, f"between-{i}-{part}", [fill(c, v) for c in frame[part]], sessions)
        keys = [f"between-{i}-first", f"between-{i}-second"]
        answer = lang.days((days[1] - days[0]).days)
        plan.questions.append(Question("temporal", fill(frame["question"], v), answer, keys))


def plan_aggregation(lang: Language, rng: random.Random, plan: Plan, persona: int) -> None:
    """Repeated events counted in one month, with more mentions in other months and turns
    about the activity that are no event of it; and a list gathered over sessions, with
    things that are not on it (a book started, a restaurant not tried). Mentions come after
    the turn's request: their openings repeat."""
    by_month: dict[int, list[int]] = defaultdict(list)
    for session, day in enumerate(plan.dates):
        by_month[day.month].append(session)
    busiest = sorted(by_month, key=lambda m: (-len(by_month[m]), m))
    for i, frame in enumerate(lang.blocks.COUNTED):
        v = frame["values"][persona]
        month = busiest[i]
        inside = rng.sample(by_month[month], rng.randint(2, 4))
        others = [s for s in range(SESSIONS) if plan.dates[s].month != month]
        outside = rng.sample(others, rng.randint(3, 5))
        keys = []
        for n, session in enumerate(inside + outside):
            key = f"counted-{i}-{n}"
            template = rng.choice(frame["mentions"])
            # "went climbing", or in other words: "did a few routes at the bouldering gym".
            did = rng.choice([v["did"], *v["alts"]])
            clause = fill(template, v | {"did": did, "when": when(lang, rng, 0)})
            echo = fill(frame["echo"], v)
            plan.said.append(Said(key, session, clause, request_first=True, echo=echo))
            if n < len(inside):
                keys.append(key)
        for n, clause in enumerate(frame["around"]):
            session = plan.pick(rng, range(SESSIONS))
            echo = fill(frame["echo_around"], v)
            plan.said.append(Said(f"counted-{i}-around-{n}", session, fill(clause, v), echo=echo))
        question = fill(frame["question"], v | {"month": lang.month(month)})
        plan.questions.append(Question("aggregation", question, lang.times(len(keys)), keys))
    for i, frame in enumerate(lang.blocks.LISTED):
        v = frame["values"][persona]
        items = v["items"]
        sessions = sorted(rng.sample(range(SESSIONS), len(items)))
        keys = [f"listed-{i}-{n}" for n in range(len(items))]
        for key, session, item in zip(keys, sessions, items, strict=True):
            clause = fill(frame["mention"], {"item": item})
            echo = fill(frame["echo"], {"item": item})
            plan.said.append(Said(key, session, clause, request_first=True, echo=echo))
        around = [fill(c, {"other": o}) for c, o in zip(frame["around"], v["others"], strict=True)]
        plan.around(rng, f"listed-{i}", around, range(SESSIONS))
        plan.questions.append(Question("aggregation", frame["question"], lang.listing(items), keys))


# The question frames of a blocks module and the prefix of their keys in a Plan.
FRAMES = (
    ("FACTS", "fact"),
    ("CHANGED", "changed"),
    ("ASSISTANT_SAID", "said"),
    ("DATED", "dated"),
    ("BETWEEN", "between"),
    ("COUNTED", "counted"),
    ("LISTED", "listed"),
    ("PREFERENCES", "pref"),
)


def plan_themes(lang: Language, rng: random.Random, plan: Plan, persona: int) -> None:
    """Requests about each question's subject ("Any tips for studying for my AWS
    certification exam?"): people come back to the things in their lives, so a question's
    words come up in many turns besides its evidence. An exam is studied for before it, a
    course talked about while it runs."""
    session_of = {s.key: s.session for s in plan.said}
    for name, prefix in FRAMES:
        for i, frame in enumerate(getattr(lang.blocks, name)):
            topic, phrase, where = frame["theme"]
            own = fill(phrase, frame["values"][persona])
            first = session_of.get(f"{prefix}-{i}-first", 0)
            sessions = {
                "any": range(SESSIONS),
                "before": range(session_of.get(f"{prefix}-{i}", SESSIONS)),
                "between": range(first + 1, session_of.get(f"{prefix}-{i}-second", SESSIONS)),
            }[where]
            for n, template in enumerate(rng.sample(lang.blocks.THEME_REQUESTS, THEMED_REQUESTS)):
                theme = {"topic": topic, "request": template.format(theme=own)}
                theme |= {"subject": lang.addressed(own), "own": own}
                key = f"{prefix}-{i}-theme-{n}"
                plan.said.append(Said(key, plan.pick(rng, sessions), assistant=theme))


def compose_reply(
    lang: Language,
    rng: random.Random,
    topic: dict[str, Any],
    openers: list[str],
    subject: str,
    said: str | None,
    echoes: list[str],
) -> str:
    """An assistant's reply of 150 to 600 words: an opener naming the request (from `openers`,
    a request's or a follow-up's), the topic's tips and generic advice in paragraphs and
    lists, maybe code and a disclaimer, a closer; `said`, the paragraph a question asks about,
    among the first blocks; `echoes`, what it says about things the user said, anywhere in
    its body."""
    b = lang.blocks
    tips = rng.sample(topic["tips"], len(topic["tips"]))
    generic = rng.sample(b.GENERIC, len(b.GENERIC))
    intros = rng.sample(b.LIST_INTROS, len(b.LIST_INTROS))

    def sentences(count: int) -> list[str]:
        return [(tips if tips and (rng.random() < 0.7 or not generic) else generic).pop()
                for _ in range(count) if tips or generic]  # fmt: skip

    def block() -> str:
        if len(tips) >= 3 and intros and rng.random() < 0.3:
            items = [tips.pop() for _ in range(min(len(tips), rng.randint(3, 5)))]
            return "\n".join([intros.pop(), *(f"- {item}" for item in items)])
        return lang.join(*sentences(rng.randint(2, 4)))

    target = rng.randint(*REPLY_TARGET)
    opener = rng.choice(openers).format(subject=subject)
    body: list[str] = []
    ending = [rng.choice(b.DISCLAIMERS)] if rng.random() < 0.3 else []
    ending.append(rng.choice(b.CLOSERS))

    def text() -> str:
        return "\n\n".join([opener, *body, *ending])

    while reply_words(text(), chinese=lang.chinese) < target and (tips or generic):
        body.append(block())
        if len(body) == 1 and "code" in topic and rng.random() < 0.5:
            body.append(rng.choice(topic["code"]))
    kept = [*echoes, *([said] if said is not None else [])]
    for echo in echoes:
        body.insert(rng.randint(0, len(body)), echo)
    if said is not None:
        body.insert(rng.randint(0, min(2, len(body))), said)
    while reply_words(text(), chinese=lang.chinese) > REPLY_WORDS[1]:
        body.pop(next(i for i in reversed(range(len(body))) if body[i] not in kept))
    reply = text()
    assert REPLY_WORDS[0] <= reply_words(reply, chinese=lang.chinese) <= REPLY_WORDS[1], reply
    return reply


@dataclass
class Request:
    topic: str
    text: str
    subject: str  # as the assistant names it ("your")
    own_subject: str  # as the user names it in a follow-up ("my")


@dataclass
class Requests:
    """A persona's requests. Those of turns that carry something said in passing are set
    aside first and used once (no other turn may repeat an evidence turn's opening); the
    others are used in turn, and again once all are used, as people ask again."""

    set_aside: list[Request]
    every: dict[str, list[Request]]
    left: dict[str, list[Request]] = field(default_factory=dict)

    @classmethod
    def shuffled(cls, lang: Language, rng: random.Random, set_aside: int) -> Requests:
        every: list[Request] = []
        for name, topic in lang.blocks.TOPICS.items():
            for text, subject, options in topic["requests"]:
                for x in options:
                    own = subject.format(x=x)
                    every.append(Request(name, text.format(x=x), lang.addressed(own), own))
        rng.shuffle(every)
        by_topic: dict[str, list[Request]] = defaultdict(list)
        for request in every[set_aside:]:
            by_topic[request.topic].append(request)
        return cls(every[:set_aside], dict(by_topic))

    def take(self, rng: random.Random, topics: list[str]) -> Request:
        if not any(self.left.values()):
            self.left = {t: rng.sample(rs, len(rs)) for t, rs in sorted(self.every.items())}
        left = [t for t in topics if self.left.get(t)] or [t for t in self.left if self.left[t]]
        return self.left[rng.choice(left)].pop()


def session_datetime(rng: random.Random, day: date) -> str:
    """LoCoMo's "8:30 pm on 2 February, 2026", in either language (eval_locomo reads it)."""
    return f"{rng.choice(SESSION_TIMES)} on {day.day} {MONTHS[day.month - 1]}, {day.year}"


@dataclass
class Turn:
    """A user turn and what its reply needs: the topic, the subject its opener names (a
    follow-up's reply has openers of its own) and what it must say (the assistant kind)."""

    topic: str
    text: str
    subject: str
    said: str | None = None
    follow_up: bool = False


def user_turn(lang: Language, rng: random.Random, item: Said, requests: Requests) -> Turn:
    """A turn that carries `item`: a request set aside for it, the thing said in passing
    before or after it (or the assistant kind's own request, and what the reply must say)."""
    if item.assistant is not None:
        said = item.assistant
        return Turn(said["topic"], said["request"], said["subject"], said.get("said"))
    request = requests.set_aside.pop()
    first = item.request_first if item.request_first is not None else rng.random() < 0.5
    text = lang.join(request.text, item.clause) if first else lang.join(item.clause, request.text)
    return Turn(request.topic, text, request.subject)


def session_turns(
    lang: Language,
    rng: random.Random,
    size: int,
    items: dict[int, Said],
    requests: Requests,
    topics: list[str],
) -> list[Turn]:
    """A session's user turns: requests on a few topics, each maybe followed by follow-ups
    on it ("Going back to ...: what should I avoid?"); carried items sit on requests."""
    b = lang.blocks
    made: list[Turn] = []
    last: Request | None = None
    follow_ups: list[str] = []
    for slot in range(size):
        if slot in items:
            made.append(user_turn(lang, rng, items[slot], requests))
            theme = items[slot].assistant
            if theme is not None and "own" in theme:  # a request about a question's subject
                last = Request(theme["topic"], theme["request"], theme["subject"], theme["own"])
                follow_ups = rng.sample(b.FOLLOW_UPS, len(b.FOLLOW_UPS))
        elif last is not None and follow_ups and rng.random() < FOLLOW_UP_SHARE:
            text = follow_ups.pop().format(subject=last.own_subject)
            made.append(Turn(last.topic, text, last.subject, follow_up=True))
        else:
            last = requests.take(rng, topics)
            follow_ups = rng.sample(b.FOLLOW_UPS, len(b.FOLLOW_UPS))
            made.append(Turn(last.topic, last.text, last.subject))
    return made


def conversation(
    lang: Language, rng: random.Random, persona: tuple[str, str, tuple[int, int, int]], index: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One persona's turns and questions (without qa_index)."""
    b = lang.blocks
    conversation_id, speaker, start = persona
    plan = Plan(session_dates(rng, start), [rng.randint(*TURNS) for _ in range(SESSIONS)])
    assert 2 * sum(plan.sizes) >= MESSAGES, (conversation_id, sum(plan.sizes))
    for step in (plan_changed, plan_between, plan_aggregation, plan_simple, plan_themes):
        step(lang, rng, plan, index)
    carried = sum(s.assistant is None for s in plan.said)
    requests = Requests.shuffled(lang, rng, carried)
    turns: list[dict[str, Any]] = []
    turn_of: dict[str, str] = {}
    for session, day in enumerate(plan.dates):
        when_said = session_datetime(rng, day)
        size = plan.sizes[session]
        said = [s for s in plan.said if s.session == session]
        items = dict(zip(rng.sample(range(size), len(said)), said, strict=True))
        recalled = dict(zip(rng.sample(range(size), len(plan.recalled[session])),
                            plan.recalled[session], strict=True))  # fmt: skip
        topics = rng.sample(sorted(b.TOPICS), 3)
        for slot, turn in enumerate(session_turns(lang, rng, size, items, requests, topics)):
            item = items.get(slot)
            echoes = [e for e in (item.echo if item else "", recalled.get(slot, "")) if e]
            openers = b.FOLLOW_UP_OPENERS if turn.follow_up else b.OPENERS
            reply = compose_reply(
                lang, rng, b.TOPICS[turn.topic], openers, turn.subject, turn.said, echoes
            )
            for n, (speaker_name, said_text) in enumerate(
                ((speaker, turn.text), (b.ASSISTANT, reply))
            ):
                turns.append(
                    {
                        "conversation_id": conversation_id,
                        "session_id": f"{conversation_id}/session_{session + 1}",
                        "session_index": session + 1,
                        "session_datetime": when_said,
                        "turn_id": f"D{session + 1}:{2 * slot + 1 + n}",
                        "speaker": speaker_name,
                        "text": said_text,
                    }
                )
            if item is not None:
                turn_of[item.key] = turns[-1 if item.assistant else -2]["turn_id"]
    assert not requests.set_aside, conversation_id
    asked = plan.dates[-1] + timedelta(days=rng.randint(3, 9))
    asked_at = f"8:00 pm on {asked.day} {MONTHS[asked.month - 1]}, {asked.year}"
    position = {turn["turn_id"]: n for n, turn in enumerate(turns)}

    def in_order(keys: list[str]) -> list[str]:
        return sorted((turn_of[key] for key in keys), key=position.__getitem__)

    questions = [
        {
            "conversation_id": conversation_id,
            "question": q.question,
            "answer": q.answer,
            "category": q.category,
            "evidence": in_order(q.keys),
            "asked_at": asked_at,
        }
        | ({"superseded": in_order(q.superseded)} if q.superseded else {})
        for q in plan.questions
    ]
    return turns, questions


def check_openings_are_their_own(
    turns: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    """No evidence turn is found, by eval_locomo's rule, in another turn of its conversation."""
    texts: dict[str, dict[str, str]] = defaultdict(dict)
    for turn in turns:
        texts[turn["conversation_id"]][turn["turn_id"]] = normalised(turn["text"])
    for question in questions:
        said = texts[question["conversation_id"]]
        for turn_id in question["evidence"]:
            keys = opening_keys(said[turn_id])
            for other, text in said.items():
                if other != turn_id:
                    assert not any(key in text for key in keys), (question, other)


def generate() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    turns: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for name, chinese in (("blocks_en", False), ("blocks_zh", True)):
        lang = Language(load(name), chinese)
        for index, persona in enumerate(lang.blocks.PERSONAS):
            rng = random.Random(f"{SEED}-{persona[0]}")
            more_turns, more_questions = conversation(lang, rng, persona, index)
            turns += more_turns
            questions += more_questions
    check_openings_are_their_own(turns, questions)
    questions.sort(key=lambda q: (q["conversation_id"], CATEGORIES.index(q["category"])))
    for index, question in enumerate(questions):
        question["qa_index"] = index
    keys = ["conversation_id", "qa_index", "question", "answer", "category", "evidence"]
    keys += ["superseded", "asked_at"]
    return turns, [{key: q[key] for key in keys if key in q} for q in questions]


def write(folder: Path) -> None:
    turns, questions = generate()
    for name, rows in (("conversations.jsonl", turns), ("queries.jsonl", questions)):
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        (folder / name).write_text(lines, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
