"""Whether a newly extracted memory supersedes an existing one, by rules (no chat model).

Similarity alone cannot tell an update from a second fact: with the default model "I like
tea" / "I like coffee" (both hold) score 0.69 and "I live in Paris" / "I moved to Berlin"
0.47. So the rule is conservative and needs four things beside the same type (the caller's
candidates): the same subject (similar enough: the model's `Thresholds.same_subject`, or
the texts' cores `SAME_SUBJECT_TEXT`; and the same people named: "my sister" is not "my
brother"), words that say the value changed ("moved", "now", "no longer", 搬到, 现在, 改成)
and none that say it is one more ("also", 也), and a value that differs (a word the old text
does not say). Anything less leaves both memories as they are. The pairs the levels were
measured on are in tests/test_supersession.py; docs/EVALUATION.md ("Updates that supersede")
says how the levels were set.

A few subjects the rule can name without similarity: the person's single-valued attributes
(memory.attributes: home, employer, partner…). "I work at Spotify" and "my first week at
Shopify was a blur" share no word, but both give the employer a value, so the newer
supersedes the older (`attribute_verdict`), unless it says it is one more or repeats the
value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory import attributes
from memory.attributes import PEOPLE
from memory.text import CJK_RUN, statement_of, text_similarity

# Two texts are about the same subject above this bigram similarity of their cores (`core`:
# without the words that say a change and those that carry no value, such as "I", "the user",
# 用户): "my budget is $500" / "my budget is now $800" 0.75, "项目截止日期是3月3日" /
# "项目截止日期改到了4月10日" 0.53; a new fact that shares only its frame ("The user likes tea" /
# "The user moved to Berlin": 0.17, 0.49 on the whole texts) is another subject.
SAME_SUBJECT_TEXT = 0.5

# Words that say a value changed: the new text must hold one. English by word, Chinese as is.
_CHANGE_EN = (
    r"now|nowadays|anymore|any more|no longer|moved|moving|relocated|switched|switching"
    r"|changed|changing|new|instead|became|from now on|these days|used to|no more|left|quit"
    r"|upgraded|replaced"
    r"|raised|lowered|increased|decreased|went up|went down|rescheduled|postponed|pushed"
)
_CHANGE_ZH = (
    r"现在|如今|目前|已经|不再|不住|搬到|搬去|搬家|换成|换到|换了|改成|改到|改为|改用|变成"
    r"|变为|调到|调整|升到|降到|涨到|推迟|提前|新的|以后|从此|之后|辞职|跳槽|离开"
)
CHANGE = re.compile(rf"\b({_CHANGE_EN})\b|{_CHANGE_ZH}", re.IGNORECASE)
# Words that say the new value is one more, not a replacement: both hold.
ADDITION = re.compile(r"\b(also|too|as well|another|either)\b|也|还有|另外|同时", re.IGNORECASE)
# Words that carry no value: a new text saying only these (and the old text's words) says
# nothing new.
_FILLER = re.compile(
    r"\b(i|i'm|i've|me|my|we|our|you|your|the|a|an|is|am|are|was|were|be|been|to|in|at|of|on"
    r"|for|and|it|that|this|with|as|so|just|really|user|user's|users)\b"
    r"|用户|我们|我|的|了|是|在",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Verdict:
    supersedes: bool
    why: str


def _people(text: str) -> frozenset[str]:
    return frozenset(match.group().lower().rstrip("s") for match in PEOPLE.finditer(text))


def core(text: str) -> str:
    """The text without its labels, the words that say a change and those that carry no
    value: what its subject and value are made of."""
    return _FILLER.sub(" ", CHANGE.sub(" ", statement_of(text)))


def _terms(text: str) -> set[str]:
    """Lower-case words, and each CJK character on its own (Chinese has no spaces)."""
    words = {word.lower() for word in _WORD.findall(CJK_RUN.sub(" ", text))}
    return words | {char for run in CJK_RUN.findall(text) for char in run}


def says_a_new_value(old: str, new: str) -> bool:
    """The new text's core holds a term (a word, a number, a CJK character) the old one's
    does not."""
    return bool(_terms(core(new)) - _terms(core(old)))


def verdict(old: str, new: str, *, similarity: float | None, same_subject: float) -> Verdict:
    """Whether `new` (extracted later, of the same type) supersedes `old`, and why.

    `similarity` is the two texts' cosine similarity, None when their vectors are unknown or
    mean nothing (an English-only model and Chinese text); `same_subject` the model's level
    above which two memories are about one subject.
    """
    text_similar = text_similarity(core(old), core(new))
    if not (
        (similarity is not None and similarity >= same_subject) or text_similar >= SAME_SUBJECT_TEXT
    ):
        return Verdict(False, "another subject")
    if _people(old) != _people(new):
        return Verdict(False, "about other people")
    if not CHANGE.search(new) or ADDITION.search(new):
        return Verdict(False, "says no change")
    if not says_a_new_value(old, new):
        return Verdict(False, "the same value")
    how = (
        f"similarity {similarity:.2f} >= {same_subject:g}"
        if similarity is not None and similarity >= same_subject
        else f"core text similarity {text_similar:.2f} >= {SAME_SUBJECT_TEXT:g}"
    )
    return Verdict(True, f"{how}, a change and a new value")


def attribute_verdict(old: str, new: str) -> Verdict:
    """Whether `new` (said later) gives a new value to the attribute `old` gave one to
    (memory.attributes): "I work at Spotify" and "my first week at Shopify" share no word,
    yet the second replaces the first. Whatever their types or their similarity."""
    attribute = attributes.of_memory(new)
    if attribute is None or attributes.of_memory(old) != attribute:
        return Verdict(False, "not a value of the same attribute")
    if ADDITION.search(new):
        return Verdict(False, "says it is one more")
    if not says_a_new_value(old, new):
        return Verdict(False, "the same value")
    return Verdict(True, f"a new value of the same attribute ({attribute})")
