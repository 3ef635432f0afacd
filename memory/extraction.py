"""The offline extractor: first-person statements become typed long-term memories, by rules.

Consolidation uses it when no chat model is configured. It reads one sentence at a time and
keeps those where the speaker says something about themselves ("I've been painting for years",
"我对花生过敏"), classified by the cue that matched. Precision over recall: a wrong memory is
shown to the agent in every later session, a missed one only costs recall, and search (over
messages) never depends on these memories. So questions, statements about the other person
("you", 你), hypotheticals and wishes are dropped, even when they hold a cue.

A memory keeps the speaker's words. The context builder shows it without the message it came
from, so it is made to stand alone: prefixed with the speaker's name when the message has one
("Caroline: I'm a single parent."), and with the message's date when the sentence leans on a
relative time word ("[8 May 2023] Caroline: I went to a support group yesterday."), which
would otherwise turn false as time passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from memory.models import MainMessage, MemoryType, Role

MEMORY_CHARS = 300
# Shorter sentences are reactions ("Love it!", "好的"), not statements about the speaker.
MIN_WORDS = 3
MIN_CJK_CHARS = 4


@dataclass(frozen=True)
class Extracted:
    memory_type: str
    content: str


# A sentence holding one of these cues becomes a memory of that type; first match wins, so the
# narrower types come first ("I've decided to move" is a decision, not a fact about moving).
# <I> stands for the speaker as a subject: "I", "we" (their family, mostly), "my partner and I".
CUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        MemoryType.DECISION,
        (
            r"我们?(已经)?决定|决定(用|采用|使用|把|了)|就这么定|定下来|我们?(打算|准备(?!好))",
            r"\b<I>('ve| have)? (just |finally |already )?decided\b|\bmade up my mind\b",
            r"\bwe will (use|go)\b|\blet's go with\b",
            r"\b<I>('m| am|'re| are)? (planning|plan) (to|on|a|an)\b",
            r"\b(i'm|i am|we're|we are) (going|heading) to (a|an|the|my|our)\b",
        ),
    ),
    (
        MemoryType.PROJECT,
        (
            r"项目|我们?在(做|开发|写)(一个|一款|一本)",
            r"\b(my|our) (\w+ )?(project|book|novel|thesis|startup|business)\b",
            r"\bour (app|product|service|repo|codebase)\b|\bwe('re| are) building\b",
            r"\b(i'm|i am|i've been|we're|we've been) (working on|writing|building|developing)"
            r" (a|an|my|our) (\w+ ){0,2}(project|book|novel|app|website|game|album|thesis"
            r"|startup|business|series|course|blog|podcast)\b",
            r"\b(i'm|i am|i've been|we're|we've been) working on (this|a|an|my|our)"
            r" (\w+ )?project\b",
        ),
    ),
    (
        MemoryType.PREFERENCE,
        (
            r"我(很|最|比较|更|也|特别|非常|一直)?(喜欢|爱吃|爱喝|偏好|习惯|讨厌)"
            r"|我不(太)?(喜欢|吃|喝)|我受不了|请(用|以|不要|别|尽量)|以后(都)?请",
            r"\b<I> (really |also |absolutely |totally |just |still |both |all )?"
            r"(like|love|loved|enjoy|adore|prefer|hate|dislike|can't stand)\b",
            r"\bmy (\w+ )?(kids|children|son|daughter|family|fam|husband|wife|partner|dogs?"
            r"|cats?) (really |also |all )?(loves?|likes?|enjoys?|adores?|hates?)\b",
            r"\bi don't (like|eat|drink)\b|\bi'd rather\b|\bmy favou?rite\b|\bi find \w+ing\b",
            r"\bplease (always|never|use|answer|reply|write|keep)\b",
            r"\b(i'm|i am|i've been) (really )?(a (big |huge )?fan of|into|passionate about"
            r"|interested in)\b",
            # habits
            r"\b<I> (usually|always|often|never)\b",
            r"\bi've been \w+ing for (years|ages|decades|a long time|\d+|a few|most of)\b",
            r"\b<I> (\w+ ){1,6}(every (day|morning|evening|night|week|weekend)|once a (week|month)"
            r"|each (day|week))\b",
        ),
    ),
    (
        MemoryType.FACT,
        (
            # identity, home, work, family, health
            r"我叫|我是(一名|一个|一位|个)?[^说不吗觉]|我住在|我来自|我老家"
            r"|我(目前|现在)?在.{0,10}(工作|上班|读书|上学)|我的.{0,8}(是|叫)"
            r"|我(女儿|儿子|孩子|老婆|妻子|丈夫|老公|妈妈|爸爸|父母|哥哥|姐姐|弟弟|妹妹|男朋友|女朋友)"
            r"(叫|是|在|今年)|我对.{1,10}过敏|我有(一|两|三|[0-9])(个|只|条)|我今年.{1,4}岁",
            r"\bmy name is\b|\b<I> live in\b|\bi work (at|for|as|in)\b|\b(i'm|i am) an? \b",
            r"\b(i'm|i am) (originally )?from\b|\bi (was born|grew up)\b",
            r"\b(i'm|i am) (married|divorced|single|engaged|pregnant|retired|vegan|vegetarian"
            r"|allergic)\b",
            r"\b(i'm|i am) (still |currently |now )?(volunteering|studying|learning|teaching"
            r"|living in|working (as|at|for|in)"
            r"|taking (a|an) (\w+ ){0,2}(class|course|lessons?))\b",
            r"\b<I>( have|'ve got| have got) (a|an|two|three|four|\d+) (?!(lot|feeling|few|photo"
            r"|pic))",
            r"\bmy (\w+ )?(kids|children|son|daughter|husband|wife|partner|mom|dad|mother|father"
            r"|brother|sister|grandma|grandpa|aunt|uncle|dogs?|cats?|puppy)"
            r" (also |just |recently )?(is (a|an|named|called)|was (a|an|born)|named|called|works"
            r"|worked|lives|lived|has|had|got|started|turned|passed|died|moved|graduated|went"
            r"|took|made)\b",
            # events: what they did, in the past tense
            r"我.{0,6}(搬到|搬去|养了|毕业于|出生在|出生于)"
            r"|我(去年|上个月|上周|昨天|刚)?(去了|参加了|开始了|换了|买了|结婚|离婚)",
            r"\b<I> (just |recently |finally |also )?(moved|adopted|started|joined|went|ran|took"
            r"|visited|attended|bought|finished|graduated|won|volunteered|signed up|painted|built"
            r"|wrote|published|launched|opened|lost|quit|traveled|travelled|learned|organized"
            r"|accepted|told|recorded"
            r"|got (a|an|my|our|another|married|engaged|divorced|promoted|hired|accepted|picked"
            r"|selected|elected|back from)|tried (?!to)|made (?!(a |an )?(\w+ )?(difference"
            r"|impact)))(?!')\b",
        ),
    ),
)
_SUBJECT = r"(i|we|my (\w+ ){1,2}and i)"
_CUES = [
    (kind, re.compile("|".join(parts).replace("<I>", _SUBJECT), re.IGNORECASE))
    for kind, parts in CUES
]

# Sentences that are not a statement about the speaker, whatever cue they hold.
REJECT = (
    # questions
    r"[?？]|^(what|how|why|where|when|who|which|did|do|does|are|is|was|were|have|has|can"
    r"|could|would|will|should|shall)\b|什么|怎么|为什么|哪里|哪儿|谁|[吗呢吧][。！!]?$",
    # the other person
    r"\b(you|your|yours|yourself|u|ya)\b|[你您]",
    # hypotheticals, wishes, guesses, the future
    r"\b(if|would|could|can|can't|cannot|might|maybe|perhaps|wish|hope|hoping|someday|imagine"
    r"|unless|probably|should|gonna|wanna|want|wants|wanted|thinking (of|about)|i'll|we'll"
    r"|won't|i will)\b|\b(i|we)'d\b(?! rather)|\bgoing to\b(?! (a|an|the|my|our)\b)"
    r"|如果|要是|假如|的话|也许|可能|希望|我想|我要|想要|我会|会不会",
    # leaning on what the listener sees or was just told: nothing to stand alone
    r"^\W*(it|it's|its|they|they're|they've|this|that|that's|these|those|here|here's|there"
    r"|there's|he|she|his|her|check|look|take a look|seeing|hearing|reminds?|reminded)\b",
    r"\b(here's|here is|check (it |this |them )?out|take a look|look at|similar)\b",
    r"\b(this|that|these|those) (\w+ )?(place|spot|quote|one|pic|photo|picture|shot|image"
    r"|thing|things|stuff|event|animals|people)\b",
    r"\bthe \w+( and \w+)? it \w+s\b",  # "I love the freedom it brings": what brings it?
    r"\bthere\b(?!('s| is| are| was| were))|\b(it|this|that|them|those|these|to|here)\W*$",
    r"\b(love|loved|like|enjoy|adore|made|got|took|did|bought|painted|finished|tried)"
    r" (it|them)\b",
    r"\b(love|loved|like|enjoy|adore|made|got|took|did|bought|painted|finished|tried|\w+ing)"
    r" (it|them|one|this|that|these|those)\b(?=\s*([,.;!–—-]|$|(a few|an|the|after|because"
    r"|when|with|for|at|in|last|yesterday|and|but|so|to|from|on|together|again|too)\b))",
    r"\b(love|loved|like|enjoy) (that|this|how|what|when|seeing|hearing|reading about|the way"
    r"|their|his|her|its|all the)\b",
)
_REJECT = re.compile("|".join(REJECT), re.IGNORECASE)

# Words that may come before "I"/"we"/"my" in a sentence about the speaker ("Last week I went");
# any other word there makes the cue part of a clause about something else ("people we love").
_OPENERS = re.compile(
    r"(\W*(so|and|but|also|now|then|actually|oh|well|yeah|yes|yep|wow|hey|btw|plus|sadly"
    r"|luckily|thankfully|honestly|anyway|guess|what|last|this|past|next|a|few|couple|of|ago"
    r"|since|finally|just|recently|lately|yesterday|today|week|weekend|month|year|night"
    r"|morning|afternoon|evening|summer|winter|spring|fall|two|three|days|weeks|months|years"
    r"|(mon|tues?|wed(nes)?|thu(rs)?|fri|sat(ur)?|sun)(day)?)\b)*\W*",
    re.IGNORECASE,
)

# Words that date a statement from when it was said.
RELATIVE_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|recently|lately|just|ago|soon|currently|now"
    r"|nowadays|these days|the other day|upcoming|since we last \w+"
    r"|(this|last|next|past) (morning|afternoon|evening|night|week|weekend|month|year|spring"
    r"|summer|fall|autumn|winter|monday|tuesday|wednesday|thursday|friday|saturday|sunday|few))\b"
    r"|昨天|今天|明天|前天|后天|前几天|最近|刚才|刚刚|刚|上周|上星期|上个月|下周|下个月|去年|今年|明年"
    r"|这周|本周|这个月|现在|目前",
    re.IGNORECASE,
)

_SENTENCE_END = re.compile(r"(?<=[。！？；\n])\s*|(?<=[.!?;])\s+")
# "Hi Maria, " before a statement: it says nothing about the speaker.
_GREETING = re.compile(r"^(hi|hey|hello)( [A-Z]\w*)?[,!]\s*", re.IGNORECASE)
# LoCoMo appends an image's caption to the turn; it is not the speaker's words.
_IMAGE_CAPTION = re.compile(r"\s*\[image: [^\]]*\]")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_THIRD_PERSON = re.compile(r"\b(he|she|him|her|his|them)\b|[他她]", re.IGNORECASE)
# What a pronoun may point back to: "my mom", "the kids", "a friend", a name.
_ANTECEDENT = re.compile(
    r"\b(my|our|the|a|an)\s+\w|[\u4e00-\u9fff]{2}"
    r"|(?<=\w )(?!(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b)[A-Z][a-z]+"
)


def sentences(text: str) -> list[str]:
    """Split after 。！？； or a newline, and after .!?; followed by a space (not in "3.5")."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _without_greeting(sentence: str) -> str:
    rest = _GREETING.sub("", sentence)
    return rest[:1].upper() + rest[1:] if rest != sentence else sentence


def speaker_name(message: MainMessage) -> str | None:
    """The person named in the metadata ("speaker", or OpenAI's "name"), if any."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    for key in ("speaker", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def speaks_for_a_person(message: MainMessage) -> bool:
    """The user always; an assistant only when named (LoCoMo: both sides are people).

    An unnamed assistant is the AI itself: what it says is not a fact about the user.
    """
    if message.role == Role.USER:
        return True
    return message.role == Role.ASSISTANT and speaker_name(message) is not None


def _long_enough(sentence: str) -> bool:
    if _CJK.search(sentence):
        return len(_CJK.findall(sentence)) >= MIN_CJK_CHARS
    return len(sentence.split()) >= MIN_WORDS


def _opens_a_clause(sentence: str, start: int) -> bool:
    """Whether the cue at `start` begins the sentence or a clause of it (English only)."""
    before = sentence[:start]
    if not before.strip() or _CJK.search(sentence) or re.search(r"[,;:–—-]\s*$", before):
        return True
    return _OPENERS.fullmatch(before) is not None


def _dangling_pronoun(sentence: str) -> bool:
    """A he, she or them with nobody named before: "I visited her old house" (whose?).

    "they" is left alone: it mostly points back to a plural noun ("cats, and they...").
    """
    pronoun = _THIRD_PERSON.search(sentence)
    return pronoun is not None and not _ANTECEDENT.search(sentence[: pronoun.start()])


def classify(sentence: str) -> str | None:
    """The memory type of a sentence about its speaker, or None when it is not one."""
    sentence = sentence.replace("’", "'")  # curly apostrophes, as in "I’m"
    if not _long_enough(sentence) or _REJECT.search(sentence) or _dangling_pronoun(sentence):
        return None
    for kind, cue in _CUES:
        if any(_opens_a_clause(sentence, m.start()) for m in cue.finditer(sentence)):
            return kind
    return None


def _date(message: MainMessage) -> str | None:
    when = message.timestamp
    return f"{when.day} {when:%B %Y}" if isinstance(when, datetime) else None


def memory_text(sentence: str, message: MainMessage) -> str | None:
    """The sentence, standing alone: "[date] speaker: sentence"; None if it cannot be dated."""
    prefix = []
    if RELATIVE_TIME.search(sentence):
        date = _date(message)
        if date is None:
            return None  # "yesterday" with no date would be a false claim later
        prefix.append(f"[{date}]")
    name = speaker_name(message)
    if name:
        prefix.append(f"{name}:")
    return " ".join([*prefix, sentence])[:MEMORY_CHARS]


def extract_with_sources(
    messages: Iterable[MainMessage],
) -> list[tuple[Extracted, MainMessage]]:
    """Each memory with the message it came from; one per distinct text, first kept."""
    found: dict[str, tuple[Extracted, MainMessage]] = {}
    for message in messages:
        if not speaks_for_a_person(message):
            continue
        for sentence in sentences(_IMAGE_CAPTION.sub("", message.content)):
            sentence = _without_greeting(sentence)
            kind = classify(sentence)
            text = memory_text(sentence, message) if kind else None
            if kind and text:
                key = re.sub(r"[\W_]+", "", text.lower())
                found.setdefault(key, (Extracted(kind, text), message))
    return list(found.values())


def offline_extract(messages: Iterable[MainMessage]) -> list[Extracted]:
    return [extracted for extracted, _ in extract_with_sources(messages)]
