"""Generates the updates set (README.md beside this file): people telling their AI assistant
facts that change over months, composed from the facts in blocks_en.py and blocks_zh.py and
the requests, tips and replies of agent_sessions' blocks.

    python tests/data/updates/generate.py [OUT_DIR]

writes conversations.jsonl and queries.jsonl to OUT_DIR (default: this folder). Standard
library only, one fixed seed: the same blocks always give the same files.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
AGENT_SESSIONS = HERE.parent / "agent_sessions"
SEED = 34
SESSIONS = 24
TURNS = (4, 6)  # user turns per session (each answered by the assistant), fewest and most
GAP_DAYS = (6, 11)  # between two sessions
MOST_SAID_PER_SESSION = 3  # user turns of one session that say a fact or its look-alike
CHANGED_TWICE = 4  # of a persona's changed facts, those said with three values
RESTATED_SHARE = 0.3  # of the first values, those said again before they change
FOLLOW_UP_SHARE = 0.35  # of the other turns after a session's first: a follow-up
ECHO_SHARE = 0.5  # of the statements, those the assistant's reply says back
CODE_SHARE = 0.15  # of the replies to a topic with code, those with a code block
REPLY_WORDS = (100, 400)  # Chinese: characters / 2 (README)
REPLY_TARGET = (130, 320)  # the words a reply is composed up to, before its closer
ASKED_AFTER_DAYS = 5
SESSION_TIMES = ["7:15 pm", "8:30 pm", "9:05 pm", "12:40 pm", "6:50 pm", "10:20 am", "9:45 pm"]
MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
CJK = re.compile(r"[\u4e00-\u9fff]")


def load(path: Path, name: str) -> ModuleType:
    """A blocks module, whether this file runs as a script or a test loads it."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def phrase_in(phrase: str, text: str) -> bool:
    """Whether a value's key phrase is said in `text`, as the evaluation looks for it
    (bench/updates.py): Chinese as a substring, other text ignoring case and not next to a
    Latin letter or digit."""
    if CJK.search(phrase):
        return phrase in text
    pattern = rf"(?<![0-9a-z]){re.escape(phrase)}(?![0-9a-z])"
    return re.search(pattern, text, re.IGNORECASE) is not None


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


def reply_words(text: str, *, chinese: bool) -> float:
    return len("".join(text.split())) / 2 if chinese else len(text.split())


@dataclass
class Language:
    facts: ModuleType  # this set's blocks
    talk: ModuleType  # agent_sessions' blocks: requests, tips, openers
    chinese: bool

    def join(self, *parts: str) -> str:
        return ("" if self.chinese else " ").join(part for part in parts if part)

    def addressed(self, subject: str) -> str:
        for pattern, replacement in self.talk.PRONOUNS:
            subject = re.sub(pattern, replacement, subject)
        return subject

    def words(self, text: str) -> float:
        return reply_words(text, chinese=self.chinese)


@dataclass
class Said:
    """A fact's statement (or a look-alike) to say in a user turn of `session`."""

    key: str  # the fact's frame
    role: str  # "value" (a statement of `value`), "also" or "around"
    session: int
    clause: str
    value: str = ""
    echo: str = ""  # what the assistant's reply says back, if anything
    turn_id: str = ""  # set when it is placed


@dataclass
class Fact:
    """A question's fact: its statements in the order said."""

    key: str
    question: str
    category: str
    statements: list[Said] = field(default_factory=list)
    also: list[Said] = field(default_factory=list)


@dataclass
class Plan:
    rng: random.Random
    load: list[int] = field(default_factory=lambda: [0] * (SESSIONS + 1))
    said: list[Said] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)

    def session(self, low: int, high: int) -> int:
        """A session in [low, high] with room for one more thing said."""
        free = [s for s in range(low, high + 1) if self.load[s] < MOST_SAID_PER_SESSION]
        assert free, (low, high)
        chosen = self.rng.choice(free)
        self.load[chosen] += 1
        return chosen

    def say(self, said: Said) -> Said:
        self.said.append(said)
        return said


def echo_of(rng: random.Random, frame: dict[str, Any], value: str) -> str:
    if "echo" not in frame or rng.random() >= ECHO_SHARE:
        return ""
    return frame["echo"].format(v=value)


def plan_changed(plan: Plan, frame: dict[str, Any], values: list[str], twice: bool) -> None:
    rng = plan.rng
    chain = values if twice else values[:2]
    fact = Fact(frame["key"], frame["question"], "changed_twice" if twice else "changed_once")
    first = plan.session(1, 7)
    sessions = [first, plan.session(9, 15), plan.session(18, 23)] if twice else [first]
    if not twice:
        sessions.append(plan.session(10, 22))
    firsts = rng.sample(frame["first"], 2)
    changes = rng.sample(frame["change"], 2)
    for n, (session, value) in enumerate(zip(sessions, chain, strict=True)):
        template = firsts[0] if n == 0 else changes[n - 1]
        clause = template.format(v=value, old=chain[n - 1] if n else "")
        fact.statements.append(
            plan.say(Said(fact.key, "value", session, clause, value, echo_of(rng, frame, value)))
        )
    if rng.random() < RESTATED_SHARE and sessions[1] - sessions[0] > 2:
        again = plan.session(sessions[0] + 1, sessions[1] - 1)
        clause = firsts[1].format(v=chain[0])
        fact.statements.insert(1, plan.say(Said(fact.key, "value", again, clause, chain[0])))
    plan.facts.append(fact)


def plan_control(plan: Plan, frame: dict[str, Any], value: str, other: str) -> None:
    rng = plan.rng
    fact = Fact(frame["key"], frame["question"], "unchanged")
    first = plan.session(1, 8)
    clause = rng.choice(frame["first"]).format(v=value)
    fact.statements.append(plan.say(Said(fact.key, "value", first, clause, value)))
    clause = rng.choice(frame["also"]).format(w=other)
    also = plan.session(first + 4, SESSIONS - 1)
    fact.also.append(plan.say(Said(fact.key, "also", also, clause, other)))
    plan.facts.append(fact)


def plan_persona(rng: random.Random, lang: Language, index: int) -> Plan:
    plan = Plan(rng)
    frames = lang.facts.CHANGED
    twice = set(rng.sample(range(len(frames)), CHANGED_TWICE))
    for n, frame in enumerate(frames):
        plan_changed(plan, frame, frame["values"][index], n in twice)
    for frame in lang.facts.CONTROLS:
        plan_control(plan, frame, *frame["values"][index])
    for frame in [*frames, *lang.facts.CONTROLS]:
        for clause in frame["around"]:
            plan.say(Said(frame["key"], "around", plan.session(1, SESSIONS), clause))
    return plan


@dataclass
class Request:
    topic: str
    text: str
    subject: str


def requests_of(lang: Language) -> list[Request]:
    return [
        Request(topic, text.format(x=option), subject.format(x=option))
        for topic, blocks in lang.talk.TOPICS.items()
        for text, subject, options in blocks["requests"]
        for option in options
    ]


def user_turn(rng: random.Random, lang: Language, said: Said, request: Request) -> str:
    if rng.random() < 0.5:
        template = rng.choice(lang.facts.JOIN_FIRST)
    else:
        template = rng.choice(lang.facts.JOIN_AFTER)
    return template.format(
        clause=said.clause,
        request=request.text,
        request_lower=request.text[0].lower() + request.text[1:],
    )


def reply(
    rng: random.Random, lang: Language, request: Request, *, follow_up: bool, echo: str
) -> str:
    """An opener naming the request, what the user said back if anything, then the topic's
    tips and generic advice in paragraphs and a list, maybe code, and a closer."""
    talk = lang.talk
    subject = lang.addressed(request.subject)
    opener = rng.choice(talk.FOLLOW_UP_OPENERS if follow_up else talk.OPENERS)
    blocks = talk.TOPICS[request.topic]
    pool = rng.sample(blocks["tips"], len(blocks["tips"])) + rng.sample(talk.GENERIC, 8)
    target = rng.randint(*REPLY_TARGET)
    paragraphs = [lang.join(opener.format(subject=subject), echo)]
    while lang.words("\n\n".join(paragraphs)) < target and len(pool) >= 3:
        if rng.random() < 0.4:
            items = [pool.pop() for _ in range(3)]
            paragraphs.append(
                rng.choice(talk.LIST_INTROS) + "\n" + "\n".join(f"- {i}" for i in items)
            )
        else:
            paragraphs.append(lang.join(*(pool.pop() for _ in range(2))))
    if "code" in blocks and rng.random() < CODE_SHARE:
        paragraphs.append(rng.choice(blocks["code"]))
    paragraphs.append(rng.choice(talk.CLOSERS))
    text = "\n\n".join(paragraphs)
    assert REPLY_WORDS[0] <= lang.words(text) <= REPLY_WORDS[1], text
    return text


def session_datetime(rng: random.Random, day: date) -> str:
    """LoCoMo's "8:30 pm on 2 February, 2026", in either language (eval_locomo reads it)."""
    return f"{rng.choice(SESSION_TIMES)} on {day.day} {MONTHS[day.month - 1]}, {day.year}"


def conversation(
    rng: random.Random, lang: Language, persona: tuple[str, str, tuple[int, int, int]], plan: Plan
) -> list[dict[str, Any]]:
    conversation_id, speaker, start = persona
    requests = requests_of(lang)
    rng.shuffle(requests)
    # A turn that says something uses a request no other turn uses, so no other turn opens
    # as it does (eval_locomo finds a turn by its opening).
    reserved, shared = requests[: len(plan.said)], requests[len(plan.said) :]
    turns: list[dict[str, Any]] = []
    day = date(*start)
    for session in range(1, SESSIONS + 1):
        when = session_datetime(rng, day)
        said = [s for s in plan.said if s.session == session]
        size = max(rng.randint(*TURNS), len(said))
        slots = dict(zip(rng.sample(range(size), len(said)), said, strict=True))
        last: Request | None = None
        for slot in range(size):
            follow_up = False
            if slot in slots:
                request = reserved.pop()
                text = user_turn(rng, lang, slots[slot], request)
                echo = slots[slot].echo
            elif last is not None and rng.random() < FOLLOW_UP_SHARE:
                request, follow_up = last, True
                text = rng.choice(lang.talk.FOLLOW_UPS).format(subject=request.subject)
                echo = ""
            else:
                request = rng.choice(shared)
                text, echo = request.text, ""
            last = request
            turn_id = f"D{session}:{2 * slot + 1}"
            if slot in slots:
                slots[slot].turn_id = turn_id
            answer = reply(rng, lang, request, follow_up=follow_up, echo=echo)
            for n, (who, words) in enumerate(((speaker, text), (lang.talk.ASSISTANT, answer))):
                turns.append(
                    {
                        "conversation_id": conversation_id,
                        "session_id": f"{conversation_id}/session_{session}",
                        "session_index": session,
                        "session_datetime": when,
                        "turn_id": f"D{session}:{2 * slot + 1 + n}",
                        "speaker": who,
                        "text": words,
                    }
                )
        day += timedelta(days=rng.randint(*GAP_DAYS))
    return turns


def questions(
    conversation_id: str, plan: Plan, turns: list[dict[str, Any]], first_index: int, chinese: bool
) -> list[dict[str, Any]]:
    last = max(
        (t for t in turns if t["conversation_id"] == conversation_id),
        key=lambda t: t["session_index"],
    )
    day = re.search(r"on (\d+) (\w+), (\d+)", last["session_datetime"])
    assert day is not None
    ended = date(int(day[3]), MONTHS.index(day[2]) + 1, int(day[1]))
    asked = ended + timedelta(days=ASKED_AFTER_DAYS)
    asked_at = f"8:00 pm on {asked.day} {MONTHS[asked.month - 1]}, {asked.year}"
    made = []
    for n, fact in enumerate(plan.facts):
        newest = fact.statements[-1]
        older = fact.statements[:-1]
        superseded_values = list(dict.fromkeys(s.value for s in older if s.value != newest.value))
        made.append(
            {
                "conversation_id": conversation_id,
                "qa_index": first_index + n,
                "question": fact.question,
                "answer": newest.value,
                "category": fact.category,
                "language": "zh" if chinese else "en",
                "evidence": [newest.turn_id],
                "superseded": [s.turn_id for s in older if s.value != newest.value],
                "superseded_values": superseded_values,
                "also": [s.turn_id for s in fact.also],
                "asked_at": asked_at,
            }
        )
    return made


def check(plan: Plan, turns: list[dict[str, Any]], asked: list[dict[str, Any]]) -> None:
    """What the README promises: each value is said only in its fact's turns (and the
    replies right after them), and no evidence or superseded turn's opening is in another
    turn."""
    said_in = {s.turn_id: s for s in plan.said}
    position = {t["turn_id"]: n for n, t in enumerate(turns)}
    for s in plan.said:
        if not s.value:
            continue
        own = {s2.turn_id for s2 in plan.said if s2.key == s.key}
        allowed = own | {f"D{t.split(':')[0][1:]}:{int(t.split(':')[1]) + 1}" for t in own}
        for turn in turns:
            if phrase_in(s.value, turn["text"]):
                assert turn["turn_id"] in allowed, (s.value, turn["turn_id"], turn["text"][:200])
    for question in asked:
        for turn_id in question["evidence"] + question["superseded"]:
            assert turn_id in said_in
            keys = opening_keys(turns[position[turn_id]]["text"])
            for other in turns:
                if other["turn_id"] != turn_id:
                    assert not any(key in normalised(other["text"]) for key in keys), turn_id


def generate() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(SEED)
    all_turns: list[dict[str, Any]] = []
    all_questions: list[dict[str, Any]] = []
    for code, chinese in (("en", False), ("zh", True)):
        lang = Language(
            load(HERE / f"blocks_{code}.py", f"updates_blocks_{code}"),
            load(AGENT_SESSIONS / f"blocks_{code}.py", f"agent_sessions_blocks_{code}"),
            chinese,
        )
        for index, persona in enumerate(lang.facts.PERSONAS):
            plan = plan_persona(rng, lang, index)
            turns = conversation(rng, lang, persona, plan)
            asked = questions(persona[0], plan, turns, len(all_questions), chinese)
            check(plan, turns, asked)
            all_turns += turns
            all_questions += asked
    return all_turns, all_questions


def write(folder: Path) -> None:
    turns, asked = generate()
    for name, rows in (("conversations.jsonl", turns), ("queries.jsonl", asked)):
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        (folder / name).write_text(lines, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
