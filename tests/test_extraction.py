"""The offline extractor: first-person statements become typed, attributed long-term memories."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.extraction import classify, offline_extract, sentences
from memory.messages import message_add
from memory.models import LongTermMemory, MainMessage
from tests.factories import consolidate_session

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def said(
    content: str,
    *,
    role: str = "user",
    speaker: str | None = None,
    timestamp: datetime | None = MAY_8,
) -> MainMessage:
    """An unsaved message, as consolidation reads it from the database."""
    metadata = {"speaker": speaker} if speaker else None
    return MainMessage(role=role, content=content, metadata=metadata, timestamp=timestamp)


def memories(*messages: MainMessage) -> list[tuple[str, str]]:
    return [(e.memory_type, e.content) for e in offline_extract(messages)]


@pytest.mark.parametrize(
    ("sentence", "memory_type"),
    [
        ("I'm a single parent.", "fact"),
        ("I just started a new job at a bank.", "fact"),
        ("We adopted a dog named Max.", "fact"),
        ("Last week I went to a LGBTQ support group.", "fact"),
        ("My partner and I went fishing in the lake.", "fact"),
        ("My mother passed away last year.", "fact"),
        ("I'm originally from Sweden.", "fact"),
        ("I've been painting for years.", "preference"),
        ("My kids love camping.", "preference"),
        ("I don't like spicy food.", "preference"),
        ("I'm a big fan of classical music.", "preference"),
        ("I usually run before work.", "preference"),
        ("I've decided to run for office again.", "decision"),
        ("We're planning a family reunion in June.", "fact"),  # a plan, not a decision
        ("I'm writing a novel about my grandmother.", "project"),
    ],
)
def test_it_keeps_what_an_english_speaker_says_about_themselves(sentence, memory_type):
    assert classify(sentence) == memory_type


@pytest.mark.parametrize(
    ("sentence", "memory_type"),
    [
        ("我女儿叫小美", "fact"),
        ("我对花生过敏", "fact"),
        ("我上个月搬到了杭州", "fact"),
        ("我在一家银行上班", "fact"),
        ("我养了一只猫", "fact"),
        ("我是一名程序员", "fact"),
        ("我不吃辣", "preference"),
        ("我喜欢喝绿茶", "preference"),
        ("我们决定用 Django", "decision"),
        ("我打算下个月去日本", "fact"),  # a plan, not a decision
        ("我在做一个记账应用的项目", "project"),
    ],
)
def test_it_keeps_what_a_chinese_speaker_says_about_themselves(sentence, memory_type):
    assert classify(sentence) == memory_type


@pytest.mark.parametrize(
    "sentence",
    [
        # questions
        "Did you go to the support group?",
        "What do you love about painting?",
        "你喜欢喝茶吗",
        "我养的猫叫什么来着",
        # greetings and small talk
        "Hey Mel! Good to see you!",
        "Thanks so much.",
        "I'm so happy for you!",
        "你好，很高兴认识你",
        # the other person
        "You love painting.",
        "Your kids love camping.",
        "I love your painting.",
        "你女儿叫小美",
        # hypotheticals, wishes, the future
        "If I had time I would paint.",
        "I'd love to go camping with the kids.",
        "I want to adopt a dog.",
        "I'll start a new job soon.",
        "我想去杭州",
        "如果我有钱，我会买房",
        # nothing that stands alone without the picture or the earlier turn
        "I love it!",
        "I painted that after a visit to the beach.",
        "Here's a pic of my family camping at the beach.",
        "Last Sunday I visited her old house.",
        "It reminds me why I love being a mom.",
        "Everyone we love was there.",
    ],
)
def test_it_drops_what_is_not_a_statement_about_the_speaker(sentence):
    assert classify(sentence) is None


def test_a_named_speaker_is_named_in_the_memory_in_their_own_words():
    message = said("I'm a single parent. How about you?", speaker="Caroline")
    assert memories(message) == [("fact", "Caroline: I'm a single parent.")]


def test_a_relative_time_is_anchored_to_the_day_it_was_said():
    english = said("I went to a LGBTQ support group yesterday.", speaker="Caroline")
    chinese = said("我上个月搬到了杭州。")
    undated = said("I went to a LGBTQ support group yesterday.", timestamp=None)

    assert memories(english, chinese, undated) == [
        ("fact", "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday."),
        ("fact", "[8 May 2023] 我上个月搬到了杭州。"),
    ]  # "yesterday" without a date would turn false: dropped


def test_an_unnamed_assistant_is_the_ai_and_its_statements_are_not_memories():
    assert memories(said("I'm a language model trained to help.", role="assistant")) == []
    assert memories(said("I love camping.", role="system", speaker="Ops")) == []
    # Named as the speaker, an assistant is a person (in LoCoMo both sides are): they count.
    assert memories(said("I love camping.", role="assistant", speaker="Melanie")) == [
        ("preference", "Melanie: I love camping.")
    ]


@pytest.mark.parametrize("speaker", ["Assistant", "assistant", "AI", "助手", "AI 助手", "智能助手"])
def test_an_assistant_named_for_its_role_is_the_ai(speaker):
    # agent_sessions (and clients) label the agent's turns "Assistant" or 助手: still the AI.
    replies = [
        said(
            "We decided to keep the reply short. I'm an AI, I can't check prices.",
            role="assistant",
            speaker=speaker,
        ),
        said(
            "我们决定用 Postgres。改成骑电动车上班是个不错的变化。",
            role="assistant",
            speaker=speaker,
        ),
    ]
    assert memories(*replies) == []


def test_an_assistant_repeating_the_user_makes_no_second_memory():
    user = said("I prefer tabs over spaces.")
    echo = said("Got it. I'll remember that. I prefer tabs too, honestly.", role="assistant")
    # OpenAI's "name" on an assistant names the bot, not a person speaking.
    bot = MainMessage(
        role="assistant",
        content="I'm Orca, an assistant. I use short answers.",
        metadata={"name": "orca-bot"},
        timestamp=MAY_8,
    )
    assert memories(user, echo, bot) == [("preference", "I prefer tabs over spaces.")]


def test_pasted_code_and_quoted_lines_are_not_the_persons_words():
    message = said(
        "I use Neovim.\n```python\n# I'm a vegan and I live in Paris\n```\n"
        "> We decided to ship on Friday.\nWhat does this do?"
    )
    assert memories(message) == [("preference", "I use Neovim.")]


def test_each_statement_of_a_sentence_is_a_memory_of_its_own():
    first = said("你好，我叫小王，我是后端工程师。")
    later = said("我是后端工程师。")  # said again alone: the same memory, for dedup to merge
    assert memories(first, later) == [("fact", "我叫小王"), ("fact", "我是后端工程师。")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "I love hiking, but I hate crowds.",
            [("preference", "I love hiking"), ("preference", "I hate crowds.")],
        ),
        ("But my sister lives in Lisbon.", [("fact", "My sister lives in Lisbon.")]),
        ("So, we adopted a cat.", [("fact", "We adopted a cat.")]),
        (
            "我对花生过敏，另外我下个月要去成都出差。",
            [("fact", "我对花生过敏"), ("fact", "[8 May 2023] 我下个月要去成都出差。")],
        ),
        ("我是素食者，而且我不吃辣。", [("fact", "我是素食者"), ("preference", "我不吃辣。")]),
        # Not a joining word: a word that begins with one.
        ("Android is my favourite OS.", [("fact", "Android is my favourite OS.")]),
    ],
)
def test_a_statement_stands_alone_without_the_word_that_joined_it(content, expected):
    assert memories(said(content)) == expected


def test_a_clause_without_a_cue_stays_with_the_statement_it_explains():
    message = said("I had a day out with the gang last weekend, we went biking.")
    assert memories(message) == [
        ("fact", "[8 May 2023] I had a day out with the gang last weekend, we went biking.")
    ]


def test_a_question_or_a_courtesy_is_cut_from_the_statement():
    assert memories(said("I'm building a CLI in Rust, any tips?")) == [
        ("project", "I'm building a CLI in Rust")
    ]
    assert memories(said("我叫小王，很高兴认识你！")) == [("fact", "我叫小王")]
    # A clause about the listener that is not a question colours the whole sentence.
    assert memories(said("Since you asked, I'm vegan.")) == []


def test_an_image_caption_is_not_the_speakers_words():
    message = said("Look at this! [image: a photo of my dog named Rex. I adopted him]")
    assert memories(message) == []


def test_the_same_statement_twice_makes_one_memory():
    assert memories(said("I love jazz."), said("I love jazz!")) == [("preference", "I love jazz.")]


def test_sentences_end_at_punctuation_but_not_inside_a_number():
    assert sentences("Version 3.5 is out. 我喜欢它。你呢？Great!") == [
        "Version 3.5 is out.",
        "我喜欢它。",
        "你呢？",
        "Great!",
    ]


@pytest.mark.django_db
def test_consolidation_stores_each_speakers_statements_attributed():
    for speaker, text in [
        ("Caroline", "Hey Mel! I went to a LGBTQ support group yesterday."),
        ("Melanie", "Wow, did you like it? My kids love camping, by the way."),
    ]:
        message_add(
            agent_id="conv-26",
            session_id="conv-26:session_1",
            role="user",
            content=text,
            metadata={"speaker": speaker},
            timestamp=MAY_8,
        )

    run = consolidate_session(
        agent_id="conv-26", session_id="conv-26:session_1", trigger="session_end"
    )

    assert (run.extractor, run.created) == ("rules", 2)
    assert sorted(LongTermMemory.objects.values_list("memory_type", "content")) == [
        ("fact", "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday."),
        ("preference", "Melanie: My kids love camping, by the way."),
    ]


def locomo(folder: Path) -> Path:
    turns = [
        ("D1:1", "Caroline", "Hey Mel! Good to see you! How have you been?"),
        ("D1:2", "Melanie", "I'm swamped with the kids & work. My kids love camping."),
        ("D1:3", "Caroline", "I went to a LGBTQ support group yesterday."),
    ]
    folder.mkdir()
    (folder / "conversations.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": "conv-26",
                    "session_id": "conv-26/session_1",
                    "session_datetime": "1:56 pm on 8 May, 2023",
                    "turn_id": turn_id,
                    "speaker": speaker,
                    "text": text,
                }
            )
            + "\n"
            for turn_id, speaker, text in turns
        )
    )
    return folder


def test_eval_extractor_counts_memories_and_samples_them_with_their_source_turn(tmp_path):
    out = StringIO()

    call_command("eval_extractor", str(locomo(tmp_path / "locomo")), "--json", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "conv-26: 2 memories from 3 messages"
    assert lines[1] == "total: 2 memories (preference 1, fact 1, decision 0, project 0)"
    report = json.loads(lines[-1])
    assert report["sample"] == [
        {
            "conversation": "conv-26",
            "turn_id": "D1:2",
            "memory_type": "preference",
            "content": "Melanie: My kids love camping.",
        },
        {
            "conversation": "conv-26",
            "turn_id": "D1:3",
            "memory_type": "fact",
            "content": "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday.",
        },
    ]


def test_eval_extractor_explains_a_missing_folder(tmp_path):
    with pytest.raises(CommandError, match="conversations.jsonl does not exist"):
        call_command("eval_extractor", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="either DIR or --judged FILE"):
        call_command("eval_extractor")


def test_eval_extractor_judges_turns_against_the_memories_a_person_would_keep(tmp_path):
    rows = [
        {"lang": "en", "text": "Hi, I'm Dana.", "expect": [["fact", "Dana"]]},
        {"lang": "en", "text": "I'm Lee, I teach kids.", "expect": [["preference", "teach"]]},
        {"lang": "zh", "text": "我想去京都。", "expect": [["fact", "京都"]]},
        {"lang": "zh", "text": "你好", "expect": []},
    ]
    judged = tmp_path / "judged.jsonl"
    judged.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    out = StringIO()

    call_command("eval_extractor", "--judged", str(judged), "--json", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[:7] == [
        "[en] Hi, I'm Dana.",
        "    right  fact: I'm Dana.",
        "[en] I'm Lee, I teach kids.",
        "    WRONG  fact: I'm Lee",  # the judge wanted only a preference
        "    WRONG  fact: I teach kids.",
        "    MISSED preference: ...teach...",
        "[zh] 我想去京都。",
    ]
    scores = json.loads(lines[-1])
    assert scores["en"] == {
        "turns": 2,
        "made": 3,
        "right": 1,
        "expected": 2,
        "found": 1,
        "precision": 0.333,
        "recall": 0.5,
    }
    assert (scores["zh"]["made"], scores["zh"]["recall"]) == (0, 0.0)
    assert scores["all"]["turns"] == 4


def test_a_long_sentence_of_many_pieces_is_read_in_linear_time():
    # Each piece once: re-reading the growing clause at every comma took 42 s for this one.
    started = time.perf_counter()
    assert memories(said("a, " * 10_000)) == []
    assert time.perf_counter() - started < 10
