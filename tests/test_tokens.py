from __future__ import annotations

import pytest

from memory.tokens import (
    CUT_MARK,
    CUT_MARK_CHINESE,
    TRUNCATION_MARK,
    cut_mark,
    estimate_tokens,
    truncate_to_tokens,
)


def test_it_counts_chinese_at_one_and_a_half_tokens_per_character():
    assert estimate_tokens("我喜欢喝茶") == 8  # 5 x 1.5 = 7.5, rounded up
    assert estimate_tokens("偏好") == 3


def test_it_counts_other_text_at_four_characters_per_token():
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("hello world!") == 3
    assert estimate_tokens("我喜欢 tea") == 6  # 3 x 1.5 + 4 / 4 = 5.5
    assert estimate_tokens("") == 0


def test_it_leaves_text_within_the_limit_alone():
    assert truncate_to_tokens("short text", 100) == ("short text", False)


def test_it_cuts_long_text_and_marks_the_cut():
    text = "结果" * 10_000  # 30,000 tokens
    cut, truncated = truncate_to_tokens(text, 10_000)
    assert truncated
    assert cut.endswith(TRUNCATION_MARK)
    assert estimate_tokens(cut) <= 10_000
    assert estimate_tokens(cut) > 9_990
    assert text.startswith(cut.removesuffix(TRUNCATION_MARK))


@pytest.mark.parametrize(
    ("text", "mark"),
    [
        ("We camped at the lake and the kids loved the kayaks. " * 40, CUT_MARK),
        ("我们在湖边露营，孩子们很喜欢皮划艇。" * 40, CUT_MARK_CHINESE),
        # Mostly Chinese with English words in it, and mostly English with a Chinese word.
        ("我用 Django 写了一个记忆服务，部署在 Linux 上。" * 40, CUT_MARK_CHINESE),
        ("The user likes 绿茶 and long walks by the river. " * 40, CUT_MARK),
        ("1234567890 " * 200, CUT_MARK),  # no letters at all
    ],
    ids=[
        "english",
        "chinese",
        "chinese with english words",
        "english with a chinese word",
        "digits",
    ],
)
def test_a_text_shown_cut_ends_with_a_mark_in_its_own_language(text, mark):
    assert cut_mark(text) == mark

    cut, truncated = truncate_to_tokens(text, 300, mark=cut_mark(text))

    assert truncated and cut.endswith(mark)
    assert 290 < estimate_tokens(cut) <= 300
    assert text.startswith(cut.removesuffix(mark))
    assert TRUNCATION_MARK not in cut  # the sub-agent's mark is its results' only
