"""The order in which the context's recall tries its candidates (memory.context's `_recall`).

Search ranks each message alone; recall then fills its budget in this order:
- a hit whose day is in a period the query names (memory.dates.find_periods: "in February",
  "last month", "the past month", 上个月, 三月份, 最近一个月) is raised by PERIOD_BOOST. It is
  raised, never required: a period that holds no hit changes nothing (conversations imported
  from the past are asked about long after).
- a question that gathers mentions over sessions ("How many times did I go climbing in
  January?", "我读完了哪些书？": `is_aggregation`) needs one from each session that has one,
  not the ten best of the session that says most: a hit is lowered by SESSION_DECAY for each
  better hit of its session and speaker before it, so the best of another session comes
  before a session's second. A person's turn is not lowered for the agent's long reply
  after it, which matches more words. Other questions keep the search's order: their answer
  often takes several turns of one session (LoCoMo lost recall when every question was
  spread: docs/EVALUATION.md, "The period a question names, and spreading over sessions").
Scores count as shares of the best hit's, the same scale for every search mode (BM25 is not
on a 0-1 scale).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from memory.dates import Period, find_periods
from memory.search import SearchHit

PERIOD_BOOST = 0.3
SESSION_DECAY = 0.75

# Questions that gather mentions over sessions, in either language.
AGGREGATION_PATTERNS: tuple[str, ...] = (
    r"\bhow (?:many|often)\b",
    r"\b(?:which|what)\b[^?.!]{0,60}\b(?:have|has) (?:i|we)\b",
    r"\ball (?:the|of (?:the|my|our))\b",
    r"\bso far\b",
    r"\bevery time\b",
    r"几次|多少次|哪些|哪几|一共|总共|所有",
)
_AGGREGATION = re.compile("|".join(AGGREGATION_PATTERNS), re.IGNORECASE)


def is_aggregation(query: str) -> bool:
    return bool(_AGGREGATION.search(query))


def ranked(hits: Sequence[SearchHit], *, query: str, now: datetime) -> list[SearchHit]:
    """The hits in the order recall tries them (see the module's docstring); `now` is when
    relative periods count from."""
    periods = find_periods(query, now=now)
    best = max((hit.score for hit in hits), default=0.0)
    scale = best if best > 0 else 1.0
    raised = {hit.message.pk: hit.score / scale + _boost(hit, periods) for hit in hits}
    order = sorted(hits, key=lambda hit: (-raised[hit.message.pk], hit.message.pk))
    if not is_aggregation(query):
        return order
    before: Counter[tuple[str, str]] = Counter()  # better hits of a session and speaker
    spread: dict[int, float] = {}
    for hit in order:
        voice = (hit.message.session_id, hit.message.role)
        spread[hit.message.pk] = raised[hit.message.pk] * SESSION_DECAY ** before[voice]
        before[voice] += 1
    return sorted(order, key=lambda hit: (-spread[hit.message.pk], hit.message.pk))


def _boost(hit: SearchHit, periods: Sequence[Period]) -> float:
    return PERIOD_BOOST if any(p.holds(hit.message.timestamp) for p in periods) else 0.0
