"""Days named in a query, Chinese or English, absolute or relative to a fixed `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory.dates import MONTHS, Day, find_day_mentions, find_days, find_periods
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


# --- periods -------------------------------------------------------------------------------


def periods(text: str, now: datetime = NOW) -> list[tuple[str, str, bool]]:
    return [
        (p.first.isoformat(), p.last.isoformat(), p.every_year) for p in find_periods(text, now=now)
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A month without its year is that month of any year (held in the latest up to now).
        ("How many concerts did I go to in February?", ("2023-02-01", "2023-02-28", True)),
        ("What did I cook during June?", ("2022-06-01", "2022-06-30", True)),
        ("December", ("2022-12-01", "2022-12-31", True)),
        ("what happened in May?", ("2023-05-01", "2023-05-31", True)),
        ("mid-March", ("2023-03-01", "2023-03-31", True)),
        ("in Sept", ("2022-09-01", "2022-09-30", True)),
        ("in July 2022", ("2022-07-01", "2022-07-31", False)),
        ("February, 2024", ("2024-02-01", "2024-02-29", False)),
        ("the last week of August 2022", ("2022-08-01", "2022-08-31", False)),
        ("since March", ("2023-03-01", "2023-05-11", False)),
        ("三月份我去了几次健身房？", ("2023-03-01", "2023-03-31", True)),
        ("3月", ("2023-03-01", "2023-03-31", True)),
        ("十二月", ("2022-12-01", "2022-12-31", True)),
        ("2022年3月", ("2022-03-01", "2022-03-31", False)),
        ("2022 年 12 月份", ("2022-12-01", "2022-12-31", False)),
    ],
)
def test_it_reads_months_with_or_without_a_year(text, expected):
    assert periods(text) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # NOW is Thursday 11 May 2023; weeks run Monday to Sunday.
        ("What did I do last month?", ("2023-04-01", "2023-04-30")),
        ("this month", ("2023-05-01", "2023-05-31")),
        ("last week", ("2023-05-01", "2023-05-07")),
        ("this week", ("2023-05-08", "2023-05-14")),
        ("last year", ("2022-01-01", "2022-12-31")),
        ("this year", ("2023-01-01", "2023-12-31")),
        ("two months ago", ("2023-03-01", "2023-03-31")),
        ("3 weeks ago", ("2023-04-17", "2023-04-23")),
        ("a year ago", ("2022-01-01", "2022-12-31")),
        ("in 2021", ("2021-01-01", "2021-12-31")),
        ("How many times did I run in the past month?", ("2023-04-11", "2023-05-11")),
        ("over the last two weeks", ("2023-04-27", "2023-05-11")),
        ("the past few weeks", ("2023-04-20", "2023-05-11")),
        ("the past year", ("2022-05-11", "2023-05-11")),
        ("上个月我去了几次健身房？", ("2023-04-01", "2023-04-30")),
        ("上月", ("2023-04-01", "2023-04-30")),
        ("上上个月", ("2023-03-01", "2023-03-31")),
        ("这个月", ("2023-05-01", "2023-05-31")),
        ("本月", ("2023-05-01", "2023-05-31")),
        ("上周", ("2023-05-01", "2023-05-07")),
        ("上个星期我做了什么", ("2023-05-01", "2023-05-07")),
        ("这礼拜", ("2023-05-08", "2023-05-14")),
        ("去年", ("2022-01-01", "2022-12-31")),
        ("前年", ("2021-01-01", "2021-12-31")),
        ("今年", ("2023-01-01", "2023-12-31")),
        ("2021年", ("2021-01-01", "2021-12-31")),
        ("两个月前", ("2023-03-01", "2023-03-31")),
        ("最近一个月", ("2023-04-11", "2023-05-11")),
        ("过去两周", ("2023-04-27", "2023-05-11")),
        ("近三个月", ("2023-02-10", "2023-05-11")),
        ("我最近一周跑了几次？", ("2023-05-04", "2023-05-11")),
    ],
)
def test_it_counts_relative_periods_from_now(text, expected):
    assert periods(text) == [(*expected, False)]


@pytest.mark.parametrize(
    "text",
    [
        "you may go",  # "may", "march" and abbreviations need a cue or a year
        "How many pets did Andrew have, as of September 2023?",  # up to then: any time before
        "until May",
        "by March 2024",
        "I march on",
        "Jan said hi",
        "三个月",  # a count of months, not March
        "一月一次",  # once a month
        "每月",
        "上周三",  # a day, not a week (find_days)
        "May 2, 2023",
        "5月2号",
        "last weekend",
        "the day before yesterday",
        "最近",
        "13月",
        "上" * 200_000 + "个月",  # before year 1
        "99999 months ago",
    ],
)
def test_what_is_not_a_period_is_not_read_as_one(text):
    assert find_periods(text, now=NOW) == []


def test_overlapping_periods_keep_the_longest_and_days_stay_days():
    assert periods("the past month") == [("2023-04-11", "2023-05-11", False)]  # not last month
    assert periods("2022年3月") == [("2022-03-01", "2022-03-31", False)]  # not all of 2022
    assert periods("3月5日到4月") == [("2023-04-01", "2023-04-30", True)]  # 3月5日 is a day
    assert periods("in March and last month") == [
        ("2023-03-01", "2023-03-31", True),
        ("2023-04-01", "2023-04-30", False),
    ]


def test_a_period_holds_the_days_of_its_utc_labels():
    (february,) = find_periods("in February", now=NOW)
    assert february.holds(datetime(2019, 2, 28, 23, 0, tzinfo=UTC))  # any year's February
    assert not february.holds(datetime(2023, 3, 1, 0, 30, tzinfo=UTC))
    # 20:30 on 28 February in New York is 1 March in UTC, the day its label says.
    assert not february.holds(datetime(2023, 2, 28, 20, 30, tzinfo=timezone(timedelta(hours=-5))))
    (april,) = find_periods("上个月", now=NOW)
    assert april.holds(datetime(2023, 4, 30, 23, 59, tzinfo=UTC))
    assert not april.holds(datetime(2022, 4, 15, tzinfo=UTC))  # last month is one year's
