"""What a question asks for, as the context reads it: what the agent said before (its replies
are then the answer, not support: memory.recall_fill), or a recommendation (the person's
preferences and facts then qualify more readily: memory.relevance's `memory_verdict`). One
table of patterns per reading, English and Chinese, matched case-insensitively anywhere in
the question. (The period a question names is memory.dates's `find_periods`.)
"""

from __future__ import annotations

import re

# The agent's words in the past: "what did you tell me about ...", "your earlier advice",
# "你之前推荐的...", "你给我推荐的...".
ABOUT_PAST_REPLIES: tuple[str, ...] = (
    r"\b(?:did|had)\s+you\s+(?:say|tell|suggest|recommend|advise|mention|propose|point|teach|"
    r"explain)",
    r"\byou\s+(?:said|told|suggested|recommended|advised|mentioned|proposed|pointed|taught|"
    r"explained|gave|listed)\b",
    r"(?:你|您)(?:之前|上次|刚才|那次|以前)",
    r"(?:你|您)[^，。？！?,]{0,4}?(?:说|讲|提|建议|推荐|教|告诉|提醒)(?:过|的)",
    # what the person asked: the exchange, the question with its reply
    r"\b(?:did|have) (?:i|we) (?:ever )?ask(?:ed)?\b|\b(?:i|we) asked you\b",
    r"我们?(?:之前|上次|以前|那次)?问(?:过|了)(?:你|您)",
)
# Advice asked of the agent now, which its earlier replies may already give: "what's your
# advice on ...", "你建议我跑步前怎么热身？", "你教我白切鸡怎么做？".
ASKED_OF_THE_AGENT: tuple[str, ...] = (
    r"\byour\s+(?:advice|suggestion|recommendation|tip|answer|explanation)s?\b",
    r"(?:你|您)(?:说|讲|提|建议|推荐|教|告诉|提醒)",
)
# "Can you recommend ...", "What should I ...", "你推荐我买什么键盘？", "我该做什么菜？": what they
# must respect is what the person likes and is (a vegetarian asking what to cook, a night
# owl asking when to work out), said sessions earlier in other words.
RECOMMENDATION_PATTERNS: tuple[str, ...] = (
    r"\brecommend",
    r"\bsuggest(?!ed)",
    r"\bany (?:ideas|tips|advice|suggestions)\b",
    r"\bideas? for\b",
    r"\bwhat(?:'s| is| are)? (?:a )?good\b",
    r"\b(?:what|which|where|when|how)\b[^?.!]{0,60}\bshould (?:i|we)\b",
    r"\bshould (?:i|we) (?:get|buy|try|cook|make|eat|wear|read|watch|go|do|pick|choose|book)\b",
    r"推荐",
    r"建议",
    r"(?:我|我们)(?:应该|应当|该)",
    r"什么[^？?。！!]{0,8}(?:比较好|好呢|合适)",
)


# When something happened: "On what day did I ...", "How many days did it take ...", "When
# did we ...", "我是哪天...", "过了多少天", "什么时候": the answer is the message that told of it
# on its day ("I sat the exam this morning", "昨天签了合同").
ASKS_WHEN: tuple[str, ...] = (
    r"\bwhen did\b|\b(?:what|which) day\b|\bhow many days\b|\bhow long (?:ago|did)\b"
    r"|\bwhat date\b",
    # not "什么时候锻炼比较好" (a recommendation) nor 这几天 ("these days")
    r"哪天|哪一天|几号|多少天|(?<![这前])几天|什么时候[^，。？?！!]{0,12}(?:的|了)",
)

# Every mention, not the best ones: "How many times did I ...", "Which books have I read?",
# "What restaurants have we tried?", "我去了几次...", "我读完了哪些书？": each time the person
# told of it may be a message of its own (the issue 33 kind "aggregation").
ASKS_EVERY_MENTION: tuple[str, ...] = (
    # not "how many days" (ASKS_WHEN)
    r"\bhow (?:many(?! (?:days|weeks|months|years|hours))|often)\b"
    r"|\b(?:which|what)\b[^?.!]{0,40}\bhave (?:i|we)\b(?! (?:got|to)\b)|\blist (?:all|every)\b",
    r"几次|多少次|几回|哪些|几(?:本|家|场|部)",
)


def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(patterns), re.IGNORECASE)


_PAST_REPLIES = _compiled(ABOUT_PAST_REPLIES)
_REPLIES = _compiled(ABOUT_PAST_REPLIES + ASKED_OF_THE_AGENT)
_RECOMMENDATION = _compiled(RECOMMENDATION_PATTERNS)
_WHEN = _compiled(ASKS_WHEN)
_EVERY_MENTION = _compiled(ASKS_EVERY_MENTION)


def asks_when(query: str | None) -> bool:
    """Whether the query asks when something happened, or how long between two things."""
    return bool(query and _WHEN.search(query))


def asks_about_replies(query: str | None) -> bool:
    """Whether the agent's replies answer the query: it asks what the agent said, or asks the
    agent's advice ("你建议我..."), which an earlier reply may hold."""
    return bool(query and _REPLIES.search(query))


# A recommendation the person asks of the agent names one of them: "Can you recommend...",
# "What should I cook?". Without, it reports someone else's ("What book did Caroline
# recommend to Melanie?"). Chinese drops both pronouns (能推荐一个礼物吗？): it is taken as asked.
_BETWEEN_US = re.compile(r"\b(?:i|i'm|me|my|we|our|us|you|your)\b|[\u4e00-\u9fff]", re.IGNORECASE)


def is_recommendation(query: str | None) -> bool:
    """Whether the person asks the agent for a recommendation now; "what did you recommend"
    asks about the past, the agent's own words."""
    return bool(
        query
        and _RECOMMENDATION.search(query)
        and _BETWEEN_US.search(query)
        and not _PAST_REPLIES.search(query)
    )


def asks_every_mention(query: str | None) -> bool:
    """Whether the person asks to count or list what they told of ("How many times did I
    ...?", "我读完了哪些书？"), in the first person: "What books has Melanie read?" asks about
    someone else, whose words the person's memories do not hold."""
    return bool(query and _EVERY_MENTION.search(query) and _BETWEEN_US.search(query))
