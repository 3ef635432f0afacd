"""The recall layer's filling: which earlier messages a context takes, in what order, within
its allowance (memory.context's `_recall` searches and judges the hits; memory.recall_render
says how each reads).

What the person said comes first: hits in rank order, the best with the reply after it;
then the replies after the other hits; a long reply (a hit, or the reply after one:
`recall_render.is_support`) waits until every other hit and reply was tried, unless the
query asks what the agent said; then the turns around the best hits; then, with room left
and nothing waiting, the trimmed replies at more length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.utils.translation import gettext_noop

from memory import index
from memory.context_items import (
    RECALL_HEADER,
    Item,
    LeftOut,
    RecalledItem,
    as_line,
    header_tokens,
)
from memory.index_schema import Term
from memory.models import MainMessage
from memory.phrases import Phrase
from memory.recall_render import (
    MESSAGE_TOKENS,
    REPLY_TOKENS,
    is_support,
    recalled_line,
    shown_whole,
)
from memory.relevance import Verdict
from memory.search import SearchHit
from memory.tokens import estimate_tokens

RECALL_MIN_ROOM = 20
# The hits whose reply is taken with them; the other hits' replies come once every hit was
# tried. A small budget then holds more hits: LoCoMo at window 2048, evidence 0.807 with
# every hit's reply, 0.823 with the best hit's, 0.820 with none, 0.821 with three
# (docs/EVALUATION.md, "Hits before their replies").
REPLIES_WITH_HIT = 1
# Recall hits whose neighbours are read together, as the filling reaches them: a context
# takes a fraction of its hits, and reading the turns around all of them cost more than the
# rest of the filling (docs/BENCHMARKS.md, "Recall reads its hits' neighbours as it reaches
# them").
RECALL_CHUNK = 25


@dataclass(frozen=True)
class _Chosen:
    """A message recall chose, with its line as the prompt shows it."""

    message: MainMessage
    line: str
    score: float | None
    method: str
    why: str


class RecallFiller:
    """Hits in rank order while they fit the allowance, the best followed by the reply after
    it, then the other hits' replies; with room left once every hit was tried, the turns
    around the best hits. What the person said comes first: a long reply (a hit, or the reply
    after one: `is_support`) waits until every other hit and reply was tried, unless the query
    asks what the agent said; each line is rendered for the query's `terms`
    (memory.recall_render).

    `fill` may be called again with a larger allowance: what was chosen stays, and the hits
    and replies that did not fit are tried again. `skip` maps message ids that must not
    appear to the reason (in working memory, in a summarised turn).
    """

    def __init__(
        self,
        hits: list[SearchHit],
        skip: dict[int, str],
        method: str,
        verdicts: dict[int, Verdict],
        terms: list[Term],
        *,
        replies_last: bool,
    ) -> None:
        self.hits = hits
        self.skip = skip
        self.method = method
        self.verdicts = verdicts
        self.terms = terms
        self.replies_last = replies_last
        self.items: dict[int, _Chosen] = {}
        self.sessions: set[str] = set()
        self.used = header_tokens(RECALL_HEADER)
        self.around: dict[int, index.Around] = {}
        # The neighbours read so far; a hit next to another hit is read with the hits already.
        self.rows: dict[int, MainMessage] = {hit.message.pk: hit.message for hit in hits}
        self.lines: dict[tuple[int, int], str] = {}
        # The hits whose short reply comes after every hit, kept for a later call.
        self.later: list[int] = []

    def fill(self, allowance: int) -> tuple[list[RecalledItem], list[LeftOut]]:
        left_out: list[LeftOut] = []
        waiting: list[int] = []  # the hits whose long reply waits (the hit or the one after)
        for number, hit in enumerate(self.hits):
            if hit.message.pk in self.items:  # chosen already, as a hit or a neighbour
                continue
            if self.replies_last and is_support(hit.message):
                waiting.append(number)
            else:
                self._add_hit(number, allowance, left_out, waiting)
        for number in self.later:
            self._add_neighbour(self._around(number).after, self.hits[number].message.pk, allowance)
        for number in waiting:
            self._add_hit(number, allowance, left_out, None)
        if self._room(allowance):
            self._widen(allowance)
        if self._room(allowance) and all(left.id in self.skip for left in left_out):
            self._expand(allowance)
        return _in_time_order(self.items.values()), left_out

    def _expand(self, allowance: int) -> None:
        """With room left once every hit and the turns around them were taken, the trimmed
        replies at more length (up to MESSAGE_TOKENS), in the order they were chosen."""
        for chosen in list(self.items.values()):
            if not self._room(allowance):
                break
            line = self._line(chosen.message, MESSAGE_TOKENS)
            more = Item.tokens_of((as_line(line),)) - Item.tokens_of((as_line(chosen.line),))
            if more > 0 and self.used + more <= allowance:
                self.used += more
                self.items[chosen.message.pk] = replace(chosen, line=line)

    def _add_hit(
        self,
        number: int,
        allowance: int,
        left_out: list[LeftOut],
        waiting: list[int] | None,
    ) -> None:
        """Hit `number` and the reply after it; the reply joins `waiting` when it is long
        (None: no more waiting), `later` when the hit is not among the best
        REPLIES_WITH_HIT."""
        hit = self.hits[number]
        message = hit.message
        if message.pk in self.skip:
            left_out.append(LeftOut(message.pk, self.skip[message.pk], hit.score))
        elif message.pk not in self.items and not self._add(
            message, hit.score, self.method, self.verdicts[message.pk].why, allowance
        ):
            left_out.append(LeftOut(message.pk, gettext_noop("over budget"), hit.score))
        if message.pk not in self.items:
            return
        after = self._around(number).after
        reply = self.rows.get(after) if after is not None else None
        if waiting is not None and self.replies_last and reply is not None and is_support(reply):
            waiting.append(number)
        elif waiting is not None and number >= REPLIES_WITH_HIT:
            self.later.append(number)
        else:
            self._add_neighbour(after, message.pk, allowance)

    def _widen(self, allowance: int) -> None:
        """The message before each recalled hit and the one after its reply, best hits first:
        an answer can take more than one turn, and a question can come before the hit."""
        recalled = [n for n, hit in enumerate(self.hits) if hit.message.pk in self.items]
        self._load([self._around(n) for n in recalled], "before", "after_next")
        # A hit this widening adds as a neighbour is widened in its turn: its rows are read
        # when it is reached (none are read again).
        for number, hit in enumerate(self.hits):
            if hit.message.pk in self.items and self._room(allowance):
                around = self._around(number)
                self._load([around], "before", "after_next")
                self._add_neighbour(around.before, hit.message.pk, allowance)
                self._add_neighbour(around.after_next, hit.message.pk, allowance)

    def _line(self, message: MainMessage, reply_tokens: int) -> str:
        """The message's line, made once: a hit that did not fit is tried again."""
        key = (message.pk, reply_tokens)
        if key not in self.lines:
            self.lines[key] = recalled_line(message, self.terms, reply_tokens)
        return self.lines[key]

    def _room(self, allowance: int) -> bool:
        # Less than a short line left is no room.
        return allowance - self.used > RECALL_MIN_ROOM

    def _around(self, number: int) -> index.Around:
        """The neighbours of hit `number`: read with those of the other hits of its chunk,
        and the replies' rows with them, the first time a hit of the chunk is needed."""
        message_id = self.hits[number].message.pk
        if message_id not in self.around:
            start = number - number % RECALL_CHUNK
            chunk = index.messages_around(
                hit.message.pk for hit in self.hits[start : start + RECALL_CHUNK]
            )
            self.around |= chunk
            self._load(chunk.values(), "after")
        return self.around[message_id]

    def _load(self, around: Iterable[index.Around], *fields: str) -> None:
        wanted = {getattr(a, f) for a in around for f in fields} - {None}
        self.rows |= MainMessage.objects.in_bulk(wanted - set(self.rows))

    def _add_neighbour(self, message_id: int | None, hit_id: int, allowance: int) -> None:
        message = self.rows.get(message_id) if message_id is not None else None
        if message is not None and message.pk not in self.items and message.pk not in self.skip:
            next_to = Phrase(gettext_noop("next to recalled message %(id)s"), id=hit_id)
            self._add(message, None, "neighbour", next_to, allowance)

    def _add(
        self, message: MainMessage, score: float | None, how: str, why: str, allowance: int
    ) -> bool:
        # A line that shows its whole text costs at least the text's tokens (the estimate never
        # falls as characters are added): a text over the room left is not rendered. Most
        # hits tried once the allowance is nearly used are such.
        if (
            shown_whole(message, REPLY_TOKENS)
            and estimate_tokens(message.content) > allowance - self.used
        ):
            return False
        line = self._line(message, REPLY_TOKENS)
        opens = message.session_id not in self.sessions
        cost = Item.tokens_of(RecalledItem.pieces(message.session_id, line, opens=opens))
        if self.used + cost > allowance:
            return False
        self.used += cost
        self.sessions.add(message.session_id)
        self.items[message.pk] = _Chosen(message, line, score, how, why)
        return True


def _in_time_order(chosen: Iterable[_Chosen]) -> list[RecalledItem]:
    """Grouped by session (sessions in order of their first recalled message), oldest first;
    the first of each session opens it with its "Session ...:" line.

    Which session a message opens may differ from when it was chosen: the session's lines
    cost the same whichever item carries them."""
    by_session: dict[str, list[_Chosen]] = {}
    for one in sorted(chosen, key=lambda c: (c.message.timestamp, c.message.pk)):
        by_session.setdefault(one.message.session_id, []).append(one)
    return [
        RecalledItem.made(
            one.message.pk,
            one.message.content,
            session_id=one.message.session_id,
            line=one.line,
            opens=position == 0,
            timestamp=one.message.timestamp,
            role=one.message.role,
            score=one.score,
            method=one.method,
            why=one.why,
        )
        for group in by_session.values()
        for position, one in enumerate(group)
    ]
