from __future__ import annotations

from memory.tokens import TRUNCATION_MARK, estimate_tokens, truncate_to_tokens


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
