"""Days named in a query, Chinese or English, absolute or relative to a fixed `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory.dates import MONTHS, Day, find_day_mentions, find_days
from memory.text import message_label

# A Thursday.
NOW = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)


def phrases(text: str, now: datetime = NOW) -> list[str]:
    return [day.phrase for day in find_days(text, now=now)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5月2号那天我做了什么？", ["2 May"]),
        ("5月2日", ["2 May"]),
        ("5 月 2 号", ["2 May"]),
        ("５月２日", ["2 May"]),
        ("五月二号", ["2 May"]),
        ("十二月三十一日", ["31 December"]),
        ("2023年5月2日", ["2 May 2023"]),
        ("2023-05-02", ["2 May 2023"]),
        ("2023/5/2", ["2 May 2023"]),
        ("May 2", ["2 May"]),
        ("may 2nd", ["2 May"]),
        ("2 May", ["2 May"]),
        ("the 2nd of May", ["2 May"]),
        ("2 May 2023", ["2 May 2023"]),
        ("on May 2, 2023?", ["2 May 2023"]),
        ("on 3 June, 2023", ["3 June 2023"]),
        ("Sept 3rd", ["3 September"]),
        ("Feb 29", ["29 February"]),  # a year-less day may be a leap year's
        ("5月2号和5月3号", ["2 May", "3 May"]),
        ("May 2 or 2 May", ["2 May"]),  # distinct days
    ],
)
def test_it_reads_absolute_days_with_or_without_a_year(text, expected):
    assert phrases(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("今天", "11 May 2023"),
        ("昨天说了什么", "10 May 2023"),
        ("前天", "9 May 2023"),
        ("大前天", "8 May 2023"),
        ("三天前", "8 May 2023"),
        ("3天前", "8 May 2023"),
        ("两天以前", "9 May 2023"),
        ("上周三", "3 May 2023"),
        ("上星期三", "3 May 2023"),
        ("上礼拜三", "3 May 2023"),
        ("上个星期天", "7 May 2023"),  # Chinese weeks run Monday to Sunday
        ("上上周三", "26 April 2023"),
        ("这周三", "10 May 2023"),
        ("本周一", "8 May 2023"),
        ("这个周三", "10 May 2023"),
        ("周三", "10 May 2023"),
        ("星期五", "5 May 2023"),  # alone: the latest Friday up to today
        ("today", "11 May 2023"),
        ("Yesterday", "10 May 2023"),
        ("the day before yesterday", "9 May 2023"),
        ("3 days ago", "8 May 2023"),
        ("two days ago", "9 May 2023"),
        ("last Wednesday", "10 May 2023"),
        ("last Thursday", "4 May 2023"),  # before today, never today
        ("last friday", "5 May 2023"),
    ],
)
def test_it_counts_relative_days_from_now(text, expected):
    assert phrases(text) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "5月",  # a month is not a day
        "May 2023",
        "in may",
        "123456",
        "5.2",
        "I ran 2 miles",
        "you may 2x it",
        "2 marathons",
        "明天",  # the future holds no messages
        "下周三",
        "每周三开会",  # every Wednesday
        "一周一次",  # once a week
        "一周三天",  # three days a week
        "四周一片安静",  # all around
        "以前天天喝茶",  # every day, before
        "几天前",  # some days ago: which?
    ],
)
def test_what_is_not_a_day_is_not_read_as_one(text):
    assert find_days(text, now=NOW) == []


@pytest.mark.parametrize(
    "text",
    [
        "99月99号",
        "0月0号",
        "十十月十十号",
        "2023-13-45",
        "2023年2月29日",
        "31 February",
        "May 0",
        "上周八",
        "周八",
        "99999天前",
        "999999999天前",
        "99999 days ago",
        "上" * 200_000 + "周三",  # before year 1
    ],
)
def test_impossible_days_are_ignored_without_raising(text):
    assert find_days(text, now=NOW) == []


def test_overlapping_readings_keep_the_longest():
    (mention,) = find_day_mentions("what did we do the day before yesterday?", now=NOW)
    assert mention.day == Day(2023, 5, 9)
    assert (mention.start, mention.end) == (15, 39)
    assert phrases("2 May 2023 and May 2, 2023") == ["2 May 2023"]
    assert phrases("大前天") == ["8 May 2023"]  # not also 前天
    assert phrases("周一周二") == ["8 May 2023", "9 May 2023"]
    assert phrases("the day  before\nyesterday") == ["9 May 2023"]


def test_relative_days_are_counted_in_utc_as_the_labels_are():
    # 23:30 in New York on 10 May is 03:30 UTC on 11 May.
    new_york = datetime(2023, 5, 10, 23, 30, tzinfo=timezone(timedelta(hours=-4)))
    assert phrases("today", new_york) == ["11 May 2023"]
    assert phrases("today", datetime(2023, 5, 10, 23, 30)) == ["10 May 2023"]  # naive: UTC


def test_a_days_phrase_is_the_date_of_a_message_label():
    for month in range(1, 13):
        label = message_label(datetime(2023, month, 2, 13, 56, tzinfo=UTC), "user", None)
        assert label.startswith(Day(2023, month, 2).phrase + " ")
        assert label.startswith(Day(None, month, 2).phrase + " ")
    assert MONTHS[4] == "May"
    assert Day(2023, 5, 2).date.isoformat() == "2023-05-02" and Day(None, 5, 2).date is None
