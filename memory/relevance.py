"""Whether a memory or a recalled message is about the query: the context's relevance floors.

A search always answers its k best, however poor: a KNN returns the nearest vectors of
whatever the store holds, and BM25 ranks every text sharing one word with the query. The
context takes an item only above a floor of a fixed scale:
- a vector similarity against its model's own floor (`Thresholds.relevance`: each model
  scores unrelated texts at its own level);
- for words, the share of the query's terms (index_schema.query_terms: stop words and Chinese
  function bigrams dropped, CJK runs as bigrams, days as phrases) that the item's own text
  says. BM25 has no such scale: it grows with the store's size and the text's length, and the
  context's normalisation by the best hit made that hit 1.0 whatever it matched.
The floors were measured on LoCoMo and the Chinese set (`manage.py eval_floors`,
docs/EVALUATION.md, "Relevance floors"). A memory's floors know its type: a question asking
for a recommendation takes the person's preferences and facts more readily (`memory_verdict`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.translation import gettext_noop

from memory.embeddings import Thresholds
from memory.index_schema import Term
from memory.models import MemoryType
from memory.phrases import Phrase
from memory.text import without_cjk


@dataclass(frozen=True)
class LexicalFloors:
    """The share of the query's words (and days), and of its CJK bigrams, a text must say."""

    words: float
    bigrams: float


# A memory is one short statement: it says most of what a question asks about it, at least
# half of an English question's words. A Chinese question is read as overlapping bigrams,
# many of which cross a word boundary ("定订" in "决定订单") and match nothing: a quarter.
MEMORY_FLOORS = LexicalFloors(words=0.5, bigrams=0.25)
# A message is one turn of a conversation, and the turns around it carry the rest (the
# index reads the two before it too): it must say one of the query's terms itself. A floor of
# half the words lost LoCoMo evidence, and much of our Chinese set's evidence says few of its
# question's bigrams (docs/EVALUATION.md, "Relevance floors").
MESSAGE_FLOORS = LexicalFloors(words=0.0, bigrams=0.0)

# Words agree when they share all but their last two letters, at least three: the index
# matches stems (FTS5's porter, PostgreSQL's english), "painted" and "painting" alike; this
# reading is a little looser ("card" and "cars"), never stricter for a regular English suffix.
_STEM_SLACK = 2
_MIN_STEM = 3


@dataclass(frozen=True)
class TermMatch:
    """How many of the query's words (and days) and of its CJK bigrams a text says."""

    words_matched: int
    words: int
    bigrams_matched: int
    bigrams: int

    def passes(self, floors: LexicalFloors) -> bool:
        return _reaches(self.words_matched, self.words, floors.words) or _reaches(
            self.bigrams_matched, self.bigrams, floors.bigrams
        )

    def said(self) -> Phrase:
        """ "matched 2 of 3 query words and 1 of 2 query bigrams", the counts there are."""
        parts = [
            Phrase(msgid, matched=matched, total=total)
            for matched, total, msgid in (
                (
                    self.words_matched,
                    self.words,
                    gettext_noop("%(matched)s of %(total)s query words"),
                ),
                (
                    self.bigrams_matched,
                    self.bigrams,
                    gettext_noop("%(matched)s of %(total)s query bigrams"),
                ),
            )
            if total
        ]
        if len(parts) == 2:
            return Phrase(
                gettext_noop("matched %(words)s and %(bigrams)s"), words=parts[0], bigrams=parts[1]
            )
        if parts:
            return Phrase(gettext_noop("matched %(terms)s"), terms=parts[0])
        return Phrase(gettext_noop("no query terms"))


def _reaches(matched: int, total: int, floor: float) -> bool:
    return matched > 0 and matched / total >= floor


def _same_word(query_word: str, word: str) -> bool:
    if query_word == word:
        return True
    shorter = min(len(query_word), len(word))
    stem = max(_MIN_STEM, shorter - _STEM_SLACK)
    return shorter >= _MIN_STEM and query_word[:stem] == word[:stem]


def term_match(terms: Sequence[Term], text: str, label: str = "") -> TermMatch:
    """How many of `terms` the text says; `label` is what the index stores with a message
    besides its text (its date and speaker, memory.text's message_label), which a day term
    and a speaker's name match."""
    said = f"{label} {text}".lower()
    words = set(re.findall(r"\w+", without_cjk(said)))
    # Words agreeing in their stem share its first letters: only those are compared.
    by_start: dict[str, list[str]] = {}
    for word in words:
        by_start.setdefault(word[:_MIN_STEM], []).append(word)
    counts = {"word": [0, 0], "bigram": [0, 0]}
    for term in terms:
        if term.kind == "day":
            found = term.text.lower() in label.lower()
        elif term.kind == "bigram":
            found = term.text in said
        else:
            found = term.text in words or any(
                _same_word(term.text, w) for w in by_start.get(term.text[:_MIN_STEM], ())
            )
        count = counts["bigram" if term.kind == "bigram" else "word"]
        count[0] += found
        count[1] += 1
    return TermMatch(*counts["word"], *counts["bigram"])


def terms_said(terms: Sequence[Term], text: str) -> list[str]:
    """The words and bigrams of `terms` that `text` itself says, as term_match reads them
    (a word by its stem): why a search hit matched, when it did by its own words."""
    said = []
    for term in terms:
        if term.kind == "day":  # a day is on the date label, not in the text
            continue
        match = term_match([term], text)
        if match.words_matched + match.bigrams_matched:
            said.append(term.text)
    return said


@dataclass(frozen=True)
class Verdict:
    """Whether an item is relevant, and why in words (the context preview shows it)."""

    relevant: bool
    why: str


def verdict(
    *,
    similarity: float | None,
    floor: float,
    match: TermMatch | None,
    floors: LexicalFloors = MESSAGE_FLOORS,
) -> Verdict:
    """Relevant when the similarity reaches the model's floor or the words reach theirs.
    Either suffices: an answer may share no word with its question, and a rare name may be
    all a vector misses."""
    reasons: list[str] = []
    if similarity is not None:
        values = {"similarity": f"{similarity:.2f}", "floor": f"{floor:g}"}
        if similarity >= floor:
            return Verdict(
                True, Phrase(gettext_noop("similarity %(similarity)s >= %(floor)s"), **values)
            )
        reasons.append(Phrase(gettext_noop("similarity %(similarity)s < %(floor)s"), **values))
    if match is not None:
        if match.passes(floors):
            return Verdict(True, match.said())
        reasons.append(match.said())
    if len(reasons) == 2:
        reasons = [
            Phrase(gettext_noop("%(first)s, %(second)s"), first=reasons[0], second=reasons[1])
        ]
    return Verdict(
        False,
        Phrase(
            gettext_noop("below the relevance floor: %(reasons)s"),
            reasons=reasons[0] if reasons else Phrase(gettext_noop("no score")),
        ),
    )


# --- recommendation questions -------------------------------------------------------------

# The words that ask for a recommendation say nothing of its topic: a memory need not say them.
_REQUEST_WORDS = frozenset(
    {"recommend", "recommendation", "recommendations", "suggest", "suggestion", "suggestions"}
    | {"ideas", "idea", "tips", "advice", "good", "best"}
)
_REQUEST_CHARACTERS = frozenset("推荐建议该")


# What a recommendation must respect: the person's likes and standing facts (vegetarian,
# allergic, on a budget, up at 5:30). For a recommendation question these memories qualify
# at a share of the model's floor: with the default model, related pairs in one script ("What
# should I cook for dinner tonight?" against "I'm vegetarian, so no meat for me") score 0.17
# to 0.33, unrelated ones (the same question against "My favourite editor is Helix") under
# 0.16 (tests/test_context_relevance.py); a neighbour topic may pass ("Can you recommend a
# keyboard?" against the favourite editor: 0.19). Pairs in two scripts keep their floor:
# already lowered by the model's `cross_script`, it is below the share ...
RECOMMENDATION_TYPES = frozenset({MemoryType.PREFERENCE, MemoryType.FACT})
RECOMMENDATION_FLOOR_SHARE = 0.65
# ... or by one of the question's words that name its topic (not "recommend", not 推荐).
RECOMMENDATION_FLOORS = LexicalFloors(words=0.0, bigrams=0.0)
# ... and the person's two preferences closest to the question qualify whatever their score:
# the default model puts "I'd rather not drive for more than an hour" at 0.11 from "Can you
# recommend somewhere for a weekend away?", under any floor that keeps unrelated memories out
# (agent_sessions: what a recommendation must respect is above the floor for 17 of 24
# questions, among the two closest preferences for 17, one or the other for 22). Two lines
# are a small, bounded cost.
CLOSEST_PREFERENCES = 2


def _names_the_topic(term: Term) -> bool:
    if term.kind == "bigram":
        return not _REQUEST_CHARACTERS.intersection(term.text)
    return term.text not in _REQUEST_WORDS


def memory_verdict(
    *,
    memory_type: str,
    content: str,
    similarity: float | None,
    thresholds: Thresholds,
    base: float,
    query: str,
    terms: Sequence[Term] | None,
    recommending: bool,
    closest: bool,
) -> Verdict:
    """Whether a memory is about the query: its similarity against the model's floor (`base`,
    its relevance or identity floor, for this query and this text: `Thresholds.floor`), or
    its words (`terms`, on the lexical path) against MEMORY_FLOORS. Type-aware: for a
    recommendation question a preference or a fact qualifies at RECOMMENDATION_FLOOR_SHARE
    of the floor, or by one word of the question's topic, and a preference among the
    person's closest to the question (`closest`: memories.closest_preferences) whatever its
    score."""
    floor = thresholds.floor(base, query, content)
    if not (recommending and memory_type in RECOMMENDATION_TYPES):
        match = term_match(terms, content) if terms is not None else None
        return verdict(similarity=similarity, floor=floor, match=match, floors=MEMORY_FLOORS)
    topic = None if terms is None else [t for t in terms if _names_the_topic(t)]
    judged = verdict(
        similarity=similarity,
        floor=min(floor, base * RECOMMENDATION_FLOOR_SHARE),
        match=term_match(topic, content) if topic is not None else None,
        floors=RECOMMENDATION_FLOORS,
    )
    if closest and not judged.relevant:
        close = Phrase(
            gettext_noop("among the %(n)s closest to the question (similarity %(similarity)s)"),
            n=CLOSEST_PREFERENCES,
            similarity="-" if similarity is None else f"{similarity:.2f}",
        )
        judged = Verdict(True, close)
    why = Phrase(
        gettext_noop("recommendation question, a %(type)s: %(why)s"),
        type=Phrase(memory_type),
        why=judged.why,
    )
    return Verdict(judged.relevant, why)
