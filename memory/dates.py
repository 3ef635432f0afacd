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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
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
    return f"{day_label(when)} {when:%H:%M}"


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
_CHINESE_WEEKDAY = re.compile(
    r"(?:(?<![四圆圓一每两兩几幾半个個])|(?<=[周週期拜]一))(?P<which>上+|这|這|本|下)?(?:个|個)?"
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
