"""The order in which the context's recall tries its candidates (memory.context's `_recall`).

Search ranks each message by its words and meaning alone. A question that names a period
("How many times did I order takeout in March?", "last month", "the past month", 上个月,
三月份, 最近一个月: memory.dates.find_periods) is about the messages of that time, so a hit
whose day is in the period is raised by PERIOD_BOOST. It is raised, never required: a period
that holds no hit changes nothing (conversations imported from the past are asked about
long after). Scores count as shares of the best hit's, the same scale for every search mode
(BM25 is not on a 0-1 scale).

Not here: spreading recall over sessions (a session's second hit after the best of every
other session). Measured, it lost evidence on LoCoMo and on the agent-style probe, also when
only questions that gather ("how many", 几次, 哪些) were spread (docs/EVALUATION.md, "What we
tried").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from memory.dates import Period, find_periods
from memory.search import SearchHit

PERIOD_BOOST = 0.3
# A message tells of the days just before it ("yesterday", "on Saturday"): one dated up to
# three days after a period may be about it (on LoCoMo's questions naming a period, at 4,096:
# none 64 evidence turns, three days 65, a week 64).
TOLD_WITHIN = timedelta(days=3)


def ranked(hits: Sequence[SearchHit], *, query: str, now: datetime) -> list[SearchHit]:
    """The hits in the order recall tries them: the search's, with the hits of a period the
    query names raised (see the module's docstring); `now` is when relative periods count
    from."""
    periods = find_periods(query, now=now)
    if not periods:
        return list(hits)
    best = max((hit.score for hit in hits), default=0.0)
    scale = best if best > 0 else 1.0
    raised = {hit.message.pk: hit.score / scale + _boost(hit, periods) for hit in hits}
    return sorted(hits, key=lambda hit: (-raised[hit.message.pk], hit.message.pk))


def _boost(hit: SearchHit, periods: Sequence[Period]) -> float:
    when = hit.message.timestamp
    told = any(p.holds(when) or p.holds(when - TOLD_WITHIN) for p in periods)
    return PERIOD_BOOST if told else 0.0
