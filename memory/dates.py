"""The days a search query names, in Chinese or English, absolute or relative to `now`.

A message is indexed with a label such as "2 May 2023 Caroline: " (memory.text.
message_label), its date in English whatever the language of the message (`day_label`). A
query that says "5月2号", "2023-05-02", "上周三" or "yesterday" shares no word with that
label; `find_days` turns what it names into `Day`s, and `Day.phrase` into the label's words
("2 May 2023").

What counts as a day, and why:
- Absolute dates need a month and a day, with or without a year: "5月2号", "5月2日",
  "2023年5月2日", "五月二号", "2023-05-02", "2023/5/2", "May 2", "May 2nd", "2 May",
  "the 2nd of May", "May 2, 2023". Without a year any year matches ("2 May").
- A month alone is not a day ("5月", "May 2023"): the label's phrase "May" is also the English
  verb, and with its year a month ranks as well by its words as by a phrase (LoCoMo's 50
  questions naming one, "in July 2023": the same recall either way).
- A bare number is never a date, and an impossible date ("99月99号", "31 February") is ignored.
- Relative days count from `now`'s date in UTC, the time zone of the labels (timestamps are
  stored in UTC): 今天, 昨天, 前天, 大前天, "N天前", 上周三 / 上星期三 / 上礼拜三 (Wednesday of
  the previous Monday-to-Sunday week; 上上周三 the week before), 这周三 / 本周三 (this week's),
  周三 / 星期三 alone (the latest Wednesday up to today: asked about the past on a Monday, "周三"
  means the one just gone), "today", "yesterday", "the day before yesterday", "N days ago",
  "last Wednesday" (the latest Wednesday before today). Future days (明天, 下周三) are not
  looked for: messages are in the past.

Periods (`find_periods`): the stretch of days a question names, which the context's recall
favours (memory.recall_rank) and never requires:
- a month: "in February", "February 2026", "mid-March", "三月份", "3月", "2026年3月". A month
  without its year is that month of any year, as a day without its year is: conversations are
  imported from the past and asked about long after. "May", "March" and "August" (words of
  their own) and abbreviations ("Jan", a name too) are months only after "in", "during",
  "since" ... or before a year; "三个月" is a count, not March. "As of", "until", "before"
  or "by" before a month makes no period: what it asks about may be told any time before.
- relative weeks, months and years, counted from `now`'s date in UTC: "last month", "this
  month", "last week", "this week", "last year", "this year", "two months ago", 上个月,
  上上个月, 这个月 / 本月, 上周 / 上星期 / 上礼拜 (not 上周三, a day), 这周 / 本周, 去年, 前年,
  今年, 两个月前. Weeks run Monday to Sunday, months and years are the calendar's. "The last
  week of August" is August's.
- the days up to today: "the past month", "in the last two weeks", "over the past year",
  最近一个月, 过去两周, 近三个月, 最近一周: 30 days a month, 7 a week, 365 a year.
- a year: "in 2026", "2026年".
What a day mention covers ("May 2, 2023", "上周三") is not read again as a period.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

# Written out rather than strftime's %B, which follows the locale.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# "N天前" / "N days ago" beyond this is not a day anyone asks about, and stays far from
# date's range limits.
MAX_DAYS_AGO = 36_600


@dataclass(frozen=True, order=True)
class Day:
    """A day a query names; `year` is None when the query did not say (any year matches).

    Not a `datetime.date`, which cannot stand for "2 May of any year".
    """

    year: int | None
    month: int
    day: int

    @property
    def date(self) -> date | None:
        return date(self.year, self.month, self.day) if self.year is not None else None

    @property
    def phrase(self) -> str:
        """The words of the day in a message label: "2 May 2023", or "2 May" without a year."""
        text = f"{self.day} {MONTHS[self.month - 1]}"
        return f"{text} {self.year}" if self.year is not None else text


def day_label(when: date) -> str:
    """ "8 May 2023": how a message's day is written wherever it is dated (its label in the
    lexical index, its embedded text, the context's lines, a dated memory), and so the words
    a query's day is matched as (`Day.phrase`). PostgreSQL's trigger writes the same in SQL
    (migration 0013's orca_message_label, to_char 'FMDD FMMonth YYYY')."""
    return Day(when.year, when.month, when.day).phrase


def minute_label(when: datetime) -> str:
    """ "8 May 2023 13:56": a message's day and time, as the context and its embedded text
    show it."""
    # The hour and minute as numbers: strftime took half the label's time, and a context
    # labels each recalled message it tries (100 or more).
    return f"{day_label(when)} {when.hour:02d}:{when.minute:02d}"


@dataclass(frozen=True)
class DayMention:
    """Where a query names a day: the day and the span of its text in the query."""

    day: Day
    start: int
    end: int


def _valid(year: int | None, month: int, day: int) -> Day | None:
    """The day if it exists; without a year, 29 February is allowed (a leap year's)."""
    try:
        date(2000 if year is None else year, month, day)
    except ValueError:
        return None
    return Day(year, month, day)


def _from(today: date, days: int) -> Day | None:
    try:
        when = today + timedelta(days=days)
    except OverflowError:
        return None
    return Day(when.year, when.month, when.day)


# --- numbers -------------------------------------------------------------------------------

_CHINESE_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4}
_CHINESE_DIGITS |= {"五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ENGLISH_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_ENGLISH_NUMBERS |= {"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# Digits (ASCII or full-width) or a Chinese numeral up to 九十九: a month or a day ...
_NUMBER = "[0-9０-９]{1,2}|[〇零一二两兩三四五六七八九十]{1,3}"
# ... or how many days ago.
_COUNT = "[0-9０-９]{1,5}|[〇零一二两兩三四五六七八九十]{1,3}"


def _number(text: str) -> int | None:
    """ "12", "１２", "十二", "二十一", "两" -> the number; None for what is not one ("十十")."""
    if text.isdecimal():
        return int(text)
    if text.lower() in _ENGLISH_NUMBERS:
        return _ENGLISH_NUMBERS[text.lower()]
    tens, ten, units = text.partition("十")
    if not ten:  # one digit
        return _CHINESE_DIGITS.get(text) if len(text) == 1 else None
    if len(tens) > 1 or len(units) > 1 or (tens and tens not in _CHINESE_DIGITS):
        return None
    if units and units not in _CHINESE_DIGITS:
        return None
    return _CHINESE_DIGITS.get(tens, 1) * 10 + _CHINESE_DIGITS.get(units, 0)


# --- patterns ------------------------------------------------------------------------------

_NOT_DIGIT_BEFORE = "(?<![0-9０-９])"
_NOT_DIGIT_AFTER = "(?![0-9０-９])"
_MONTH_ABBREVIATIONS = [name[:3].lower() for name in MONTHS]
_MONTH_NAMES = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY_NUMBER = r"(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?(?![0-9a-z])"
_YEAR = r"(?:,?\s*(?P<year>[0-9]{4})(?![0-9]))?"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CHINESE_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

_CHINESE_DATE = re.compile(
    rf"{_NOT_DIGIT_BEFORE}(?:(?P<year>[0-9０-９]{{4}})\s*年\s*)?"
    rf"(?P<month>{_NUMBER})\s*月\s*(?P<day>{_NUMBER})\s*[日号號]"
)
_NUMERIC_DATE = re.compile(
    rf"{_NOT_DIGIT_BEFORE}(?P<year>[0-9]{{4}})(?P<sep>[-/])(?P<month>[0-9]{{1,2}})"
    rf"(?P=sep)(?P<day>[0-9]{{1,2}}){_NOT_DIGIT_AFTER}"
)
_ENGLISH_MONTH_FIRST = re.compile(
    rf"\b{_MONTH_NAMES}\s+(?:the\s+)?{_DAY_NUMBER}{_YEAR}", re.IGNORECASE
)
_ENGLISH_DAY_FIRST = re.compile(
    rf"\b(?:the\s+)?{_DAY_NUMBER}\s+(?:of\s+)?{_MONTH_NAMES}\b{_YEAR}", re.IGNORECASE
)
# 以前天天 ("every day, before"), 之前天气 ("the weather before"): 前天 inside other words.
_CHINESE_DAYS_BACK = re.compile(
    r"(?P<word>大前天|(?<![以之从從提目此眼当當])前天|昨天|昨日|今天|今日)"
    rf"|{_NOT_DIGIT_BEFORE}(?P<count>{_COUNT})\s*天(?:以|之)?前"
)
_CHINESE_DAYS_BACK_WORDS = {"今天": 0, "今日": 0, "昨天": 1, "昨日": 1, "前天": 2, "大前天": 3}
# Not 每周三 / 每个星期三 (every Wednesday), 四周 (around), 一周一次 / 一周三天 (a week), nor
# 周天 (一周天气); but 周一周二 is two days.
# A match starts at the first 上 of a run (`(?<!上)`): tried from each of them, a long run that
# ends in no weekday took time quadratic in its length.
_CHINESE_WEEKDAY = re.compile(
    r"(?<!上)(?:(?<![四圆圓一每两兩几幾半个個])|(?<=[周週期拜]一))(?P<which>上+|这|這|本|下)?"
    r"(?:个|個)?"
    r"(?:(?:周|週)(?P<short>[一二三四五六日])|(?:星期|礼拜|禮拜)(?P<long>[一二三四五六日天]))"
    r"(?![次个個])"
)
_ENGLISH_DAYS_BACK = re.compile(
    r"\b(?:(?P<word>the\s+day\s+before\s+yesterday|yesterday|today)"
    r"|(?P<count>[0-9]{1,5}|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
    r"\s+days?\s+ago)\b",
    re.IGNORECASE,
)
_ENGLISH_DAYS_BACK_WORDS = {"today": 0, "yesterday": 1, "the day before yesterday": 2}
_ENGLISH_LAST_WEEKDAY = re.compile(rf"\blast\s+(?P<weekday>{'|'.join(_WEEKDAYS)})\b", re.I)


def _numbered(match: re.Match[str], today: date) -> Day | None:
    """ "2023年5月2日", "五月二号", "2023-05-02": the month as a number."""
    month, day = _number(match["month"]), _number(match["day"])
    if month is None or day is None:
        return None
    return _valid(int(match["year"]) if match["year"] else None, month, day)


def _named(match: re.Match[str], today: date) -> Day | None:
    """ "May 2nd, 2023", "2 May": the month by its English name or abbreviation."""
    month = _MONTH_ABBREVIATIONS.index(match["month"][:3].lower()) + 1
    return _valid(int(match["year"]) if match["year"] else None, month, int(match["day"]))


def _chinese_days_back(match: re.Match[str], today: date) -> Day | None:
    if match["word"]:
        return _from(today, -_CHINESE_DAYS_BACK_WORDS[match["word"]])
    return _days_ago(_number(match["count"]), today)


def _english_days_back(match: re.Match[str], today: date) -> Day | None:
    if match["word"]:
        words = " ".join(match["word"].lower().split())
        return _from(today, -_ENGLISH_DAYS_BACK_WORDS[words])
    return _days_ago(_number(match["count"]), today)


def _days_ago(count: int | None, today: date) -> Day | None:
    if count is None or count > MAX_DAYS_AGO:
        return None
    return _from(today, -count)


def _chinese_weekday(match: re.Match[str], today: date) -> Day | None:
    weekday = _CHINESE_WEEKDAYS[match["short"] or match["long"]]
    which = match["which"] or ""
    monday = today - timedelta(days=today.weekday())
    if which.startswith("上"):
        return _from(monday, weekday - 7 * len(which))
    if which in ("这", "這", "本"):
        return _from(monday, weekday)
    if which == "下":
        return None  # the future holds no messages
    # Alone, the latest such day up to today.
    return _from(today, -((today.weekday() - weekday) % 7))


def _english_last_weekday(match: re.Match[str], today: date) -> Day | None:
    weekday = _WEEKDAYS.index(match["weekday"].lower())
    return _from(today, -((today.weekday() - weekday - 1) % 7 + 1))


_PATTERNS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], date], Day | None]], ...] = (
    (_CHINESE_DATE, _numbered),
    (_NUMERIC_DATE, _numbered),
    (_ENGLISH_MONTH_FIRST, _named),
    (_ENGLISH_DAY_FIRST, _named),
    (_CHINESE_DAYS_BACK, _chinese_days_back),
    (_CHINESE_WEEKDAY, _chinese_weekday),
    (_ENGLISH_DAYS_BACK, _english_days_back),
    (_ENGLISH_LAST_WEEKDAY, _english_last_weekday),
)


def utc_date(now: datetime) -> date:
    """`now`'s date in UTC, as the labels write dates; a naive `now` is taken as UTC."""
    return now.astimezone(UTC).date() if now.tzinfo is not None else now.date()


def find_day_mentions(text: str, *, now: datetime) -> list[DayMention]:
    """Every day `text` names, in order. Of overlapping readings the first wins, and of two
    starting at one place the longer ("the day before yesterday", not "yesterday")."""
    today = utc_date(now)
    candidates: list[tuple[int, int, Day | None]] = []
    for pattern, read in _PATTERNS:
        for match in pattern.finditer(text):
            candidates.append((match.start(), match.end(), read(match, today)))
    mentions: list[DayMention] = []
    taken_until = 0
    for start, end, day in sorted(candidates, key=lambda c: (c[0], -c[1])):
        if start < taken_until:
            continue
        taken_until = end
        if day is not None:  # an impossible date still hides the shorter readings inside it
            mentions.append(DayMention(day, start, end))
    return mentions


def find_days(text: str, *, now: datetime) -> list[Day]:
    """The distinct days `text` names, in order of first mention."""
    return list(dict.fromkeys(m.day for m in find_day_mentions(text, now=now)))


# A message that tells of its own day: "I sat the exam this morning", "昨天签了合同".
_ITS_DAY = re.compile(
    r"\b(?:today|yesterday|tonight|this (?:morning|afternoon|evening)|last night)\b"
    r"|今天|今日|昨天|昨日|前天|今早|今晚|昨晚",
    re.IGNORECASE,
)


def tells_of_its_day(text: str) -> bool:
    """Whether a message tells of the day it was said or the one before (today, this morning,
    yesterday, last night, 今天, 昨晚...): what happened then, which its date dates."""
    return bool(_ITS_DAY.search(text))


# --- periods -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    """Days a query names, `first` to `last` included. `every_year`: a month named without
    its year, that month of any year (`first` and `last` hold it in the latest year up to
    today)."""

    first: date
    last: date
    every_year: bool = False

    def holds(self, when: datetime) -> bool:
        """Whether the moment's day in UTC (the day its label says) is in the period."""
        day = utc_date(when)
        if self.every_year:
            return day.month == self.first.month
        return self.first <= day <= self.last


@dataclass(frozen=True)
class _Span:
    """A period a query names and where: the span of its text."""

    period: Period
    start: int
    end: int


# The days of a unit in "the past month" (the 30 days up to today).
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_UNITS = {"天": "day", "日": "day", "周": "week", "週": "week", "星期": "week", "礼拜": "week"}
_UNITS |= {"禮拜": "week", "月": "month", "年": "year"}
_UNITS |= {unit: unit for unit in _UNIT_DAYS}
# What makes "may" the month: "in May", "since March", "mid-August", "the end of May".
_MONTH_CUE = (
    r"(?:as\s+of|in|during|throughout|through|since|until|till|before|from|of|for|by|over|"
    r"last|this|early|mid|late|the\s+(?:start|beginning|end|middle)\s+of)"
)
# "As of September", "until May", "by March": where a state stands at a time, which any
# earlier message may hold; no period of its own.
_UP_TO = {"as of", "until", "till", "before", "by"}
# Full names that are no other word: months wherever they stand.
_PLAIN_MONTHS = r"january|february|april|june|july|september|october|november|december"
_ENGLISH_MONTH = re.compile(
    rf"\b(?:(?P<cue>{_MONTH_CUE})[\s-]+(?:the\s+month\s+of\s+)?)?"
    rf"(?:(?P<plain>{_PLAIN_MONTHS})|{_MONTH_NAMES})"
    r"(?:,?\s*(?P<year>[0-9]{4})(?![0-9]))?(?![a-z])",
    re.IGNORECASE,
)
_CHINESE_MONTH = re.compile(
    rf"{_NOT_DIGIT_BEFORE}(?:(?P<year>[0-9０-９]{{4}})\s*年\s*)?(?<![个個每])"
    rf"(?P<month>{_NUMBER})\s*月份?(?![一两兩二三四五六七八九十几幾]次)"  # 一月一次: once a month
)
_ENGLISH_RELATIVE = re.compile(
    r"\b(?P<which>last|this|previous|current)\s+(?P<unit>week|month|year)\b(?!\s+of\b)",
    re.IGNORECASE,
)
_ENGLISH_AGO = re.compile(
    r"\b(?P<count>[0-9]{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(?P<unit>week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_ENGLISH_WINDOW = re.compile(
    r"\b(?:the|these)\s+(?:past|last|previous)\s+(?:(?P<count>[0-9]{1,3}|a|one|two|three|four"
    r"|five|six|seven|eight|nine|ten|few|couple\s+of)\s+)?(?P<unit>day|week|month|year)s?\b"
    r"(?!\s+of\b)",
    re.IGNORECASE,
)
_ENGLISH_YEAR = re.compile(
    r"\b(?:in|during|throughout|since|for)\s+(?:the\s+year\s+)?(?P<year>[0-9]{4})(?![0-9])",
    re.IGNORECASE,
)
# 上个月, 上上个月, 这个月, 本月, 上周, 上个星期, 这礼拜; not 上周三, a day (find_day_mentions).
_CHINESE_RELATIVE = re.compile(
    r"(?<!上)(?P<which>上+|这|這|本|当|當)(?:个|個)?(?P<unit>月|周|週|星期|礼拜|禮拜)"
    r"(?![一二三四五六日天])"
)
_CHINESE_YEAR_WORDS = {"今年": 0, "去年": 1, "前年": 2, "大前年": 3}
_CHINESE_YEAR = re.compile(
    rf"(?P<word>大前年|前年|去年|今年)|{_NOT_DIGIT_BEFORE}(?P<year>[0-9０-９]{{4}})\s*年"
)
# 最近一个月, 过去两周, 近三个月, 最近一周: the days up to today.
_CHINESE_WINDOW = re.compile(
    rf"(?:最近|过去|過去|近)(?P<count>{_COUNT}|几|幾)?\s*(?:个|個)?"
    r"(?P<unit>月|周|週|星期|礼拜|禮拜|年|天)"
)
_CHINESE_AGO = re.compile(
    rf"{_NOT_DIGIT_BEFORE}(?P<count>{_COUNT})\s*(?:个|個)?"
    r"(?P<unit>月|周|週|星期|礼拜|禮拜|年)(?:以|之)?前"
)


# "The past few weeks", 最近几个月: a few is three.
_SOME = {"few": 3, "couple of": 2, "几": 3, "幾": 3}


def _count(text: str | None) -> int | None:
    """How many units a window or "ago" says: one when it says no number."""
    if text is None:
        return 1
    words = " ".join(text.lower().split())
    return _SOME[words] if words in _SOME else _number(words)


def _month(year: int, month: int) -> Period:
    following = date(year + month // 12, month % 12 + 1, 1)
    return Period(date(year, month, 1), following - timedelta(days=1))


def _months_back(today: date, count: int) -> Period | None:
    """The calendar month `count` months before today's (0: this month)."""
    index = today.year * 12 + today.month - 1 - count
    return _month(index // 12, index % 12 + 1) if index >= 12 else None


def _weeks_back(today: date, count: int) -> Period | None:
    monday = _from(today, -today.weekday() - 7 * count)
    if monday is None:
        return None
    first = date(monday.year, monday.month, monday.day)
    return Period(first, first + timedelta(days=6))


def _years_back(today: date, count: int) -> Period | None:
    year = today.year - count
    return Period(date(year, 1, 1), date(year, 12, 31)) if year >= 1 else None


def _back(today: date, unit: str, count: int | None) -> Period | None:
    """The calendar week, month or year `count` units before today's."""
    if count is None or count > MAX_DAYS_AGO // 365:
        return None
    if unit == "week":
        return _weeks_back(today, count)
    return _months_back(today, count) if unit == "month" else _years_back(today, count)


def _window(today: date, unit: str, count: int | None) -> Period | None:
    """The days up to today that `count` units cover ("the past two weeks": 14 days)."""
    if count is None or count * _UNIT_DAYS[unit] > MAX_DAYS_AGO:
        return None
    start = _from(today, -count * _UNIT_DAYS[unit])
    if start is None:
        return None
    return Period(date(start.year, start.month, start.day), today)


def _in_latest_year(today: date, month: int) -> Period:
    """A month without its year: any year's, held in the latest up to today's month."""
    year = today.year if month <= today.month else today.year - 1
    return replace(_month(year, month), every_year=True)


def _english_month(match: re.Match[str], today: date) -> Period | None:
    if not (match["plain"] or match["cue"] or match["year"]):
        return None  # "may", "march", "jan" alone: likely another word
    cue = " ".join((match["cue"] or "").lower().split())
    if cue in _UP_TO:
        return None
    month = _MONTH_ABBREVIATIONS.index((match["plain"] or match["month"])[:3].lower()) + 1
    year = int(match["year"]) if match["year"] else None
    named = _month(year, month) if year else _in_latest_year(today, month)
    if cue == "since":  # that month's first day up to today
        return Period(named.first, max(today, named.last))
    return named


def _chinese_month(match: re.Match[str], today: date) -> Period | None:
    month = _number(match["month"])
    if month is None or not 1 <= month <= 12:
        return None
    year = _number(match["year"]) if match["year"] else None
    return _month(year, month) if year else _in_latest_year(today, month)


def _english_relative(match: re.Match[str], today: date) -> Period | None:
    back = 0 if match["which"].lower() in ("this", "current") else 1
    return _back(today, match["unit"].lower(), back)


def _english_ago(match: re.Match[str], today: date) -> Period | None:
    return _back(today, match["unit"].lower(), _number(match["count"]))


def _english_window(match: re.Match[str], today: date) -> Period | None:
    return _window(today, match["unit"].lower(), _count(match["count"]))


def _english_year(match: re.Match[str], today: date) -> Period | None:
    return _years_back(today, today.year - int(match["year"]))


def _chinese_relative(match: re.Match[str], today: date) -> Period | None:
    which = match["which"]
    return _back(today, _UNITS[match["unit"]], len(which) if which.startswith("上") else 0)


def _chinese_year(match: re.Match[str], today: date) -> Period | None:
    if match["word"]:
        return _years_back(today, _CHINESE_YEAR_WORDS[match["word"]])
    return _years_back(today, today.year - int(_number(match["year"]) or 0))


def _chinese_window(match: re.Match[str], today: date) -> Period | None:
    return _window(today, _UNITS[match["unit"]], _count(match["count"]))


def _chinese_ago(match: re.Match[str], today: date) -> Period | None:
    return _back(today, _UNITS[match["unit"]], _number(match["count"]))


_PERIOD_PATTERNS: tuple[
    tuple[re.Pattern[str], Callable[[re.Match[str], date], Period | None]], ...
] = (
    (_ENGLISH_WINDOW, _english_window),
    (_ENGLISH_MONTH, _english_month),
    (_ENGLISH_RELATIVE, _english_relative),
    (_ENGLISH_AGO, _english_ago),
    (_ENGLISH_YEAR, _english_year),
    (_CHINESE_WINDOW, _chinese_window),
    (_CHINESE_AGO, _chinese_ago),
    (_CHINESE_MONTH, _chinese_month),
    (_CHINESE_RELATIVE, _chinese_relative),
    (_CHINESE_YEAR, _chinese_year),
)


def find_periods(text: str, *, now: datetime) -> list[Period]:
    """The distinct periods `text` names, in order. Of overlapping readings the longer wins
    (at one place, the first pattern): "the past month" is not also "last month", "2026年3月"
    not also 2026; and what a day covers ("May 2, 2023", "上周三") is no period."""
    today = utc_date(now)
    days = find_day_mentions(text, now=now)
    spans: list[_Span] = []
    for pattern, read in _PERIOD_PATTERNS:
        for match in pattern.finditer(text):
            if any(d.start < match.end() and match.start() < d.end for d in days):
                continue
            period = read(match, today)
            if period is not None:
                spans.append(_Span(period, match.start(), match.end()))
    chosen: list[_Span] = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), s.start)):
        if all(span.end <= c.start or c.end <= span.start for c in chosen):
            chosen.append(span)
    return list(dict.fromkeys(s.period for s in sorted(chosen, key=lambda s: s.start)))
