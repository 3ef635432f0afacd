"""What a question asks for (memory.questions): what the agent said, a recommendation, when
something happened, or every mention of something; in English and Chinese."""

from __future__ import annotations

import pytest

from memory.questions import asks_about_replies, asks_every_mention, asks_when, is_recommendation


@pytest.mark.parametrize(
    ("query", "about_replies"),
    [
        ("What did you tell me to buy at convenience stores?", True),
        ("Which crates did you suggest for testing my CLI?", True),
        ("How far did you say I should charge the car?", True),
        ("You recommended a trail near the new flat, which one?", True),
        ("What was your advice about the ryokan?", True),
        ("你建议豆豆的第一口辅食吃什么？", True),
        ("你之前推荐的那几台相机里哪台最适合我？", True),
        ("你给我推荐的密码管理器是哪个？", True),
        ("你说我躺下多久还睡不着就该起床？", True),
        ("你教我的雅思口语框架是什么？", True),
        ("What did I ask you about the lease last week?", True),  # the exchange
        ("我之前问过你租房合同的什么问题？", True),
        ("我问你个问题，周末去哪玩？", False),  # asking now
        ("Which concert did I go to with my sister?", False),
        ("What did I buy at the convenience store?", False),
        ("Can you recommend a restaurant for tonight?", False),
        ("我上个月去了几次健身房？", False),
        ("我妹妹叫什么名字？", False),
        ("", False),
    ],
)
def test_it_tells_a_question_about_what_the_agent_said(query, about_replies):
    assert asks_about_replies(query) is about_replies


@pytest.mark.parametrize(
    ("query", "recommending"),
    [
        ("Can you recommend somewhere for a weekend away?", True),
        ("What should I cook for a dinner party this weekend?", True),
        ("What time of day should I schedule my workouts?", True),
        ("Any ideas for my sister's birthday?", True),
        ("周末想出去放松一下，你能推荐个地方吗？", True),
        ("你推荐我买什么键盘？", True),
        ("这周末家里请客，我该做什么菜？", True),
        ("我一天中什么时候锻炼比较好？", True),
        # The agent's own advice, asked about afterwards: no request.
        ("Which password manager did you recommend to me?", False),
        ("You suggested a trail near the new flat, which one?", False),
        ("你给我推荐的密码管理器是哪个？", False),
        ("你之前建议我怎么分配存款？", False),
        ("What am I allergic to?", False),
        ("我妹妹叫什么名字？", False),
        # Someone else's recommendation, reported.
        ("What book did Caroline recommend to Melanie?", False),
        ("能推荐一个送给好朋友的生日礼物吗？", True),
        (None, False),
    ],
)
def test_it_tells_a_request_for_a_recommendation(query, recommending):
    assert is_recommendation(query) is recommending


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("On what day did I have my AWS certification exam?", True),
        ("How many days did it take me to finish my Spanish course?", True),
        ("When did we sign the lease?", True),
        ("我是哪天考的驾照科目二？", True),
        ("我崴脚之后过了多少天才又去打羽毛球？", True),
        ("我们是什么时候搬进来的？", True),
        ("What time of day should I schedule my workouts?", False),
        ("我一天中什么时候锻炼比较好？", False),  # a recommendation
        ("这几天我该吃点什么？", False),  # these days
        ("What am I allergic to?", False),
        (None, False),
    ],
)
def test_it_tells_a_question_asking_when_something_happened(query, when):
    assert asks_when(query) is when


@pytest.mark.parametrize(
    ("query", "every"),
    [
        ("How many times did I go swimming in June?", True),
        ("How often did we eat out last month?", True),
        ("Which films have we watched together so far?", True),
        ("What podcasts have I started this year?", True),
        ("我上个月去了几次健身房？", True),
        ("我今年看过哪些电影？", True),
        ("我读了几本书？", True),
        ("How many days did the trip take?", False),  # when (ASKS_WHEN)
        ("What do I do for a living?", False),
        ("What have I got to bring tomorrow?", False),
        ("Which films has Melanie watched?", False),  # someone else's
        ("How many books did Caroline read?", False),
        ("我现在带的组有几个人？", False),
        (None, False),
    ],
)
def test_it_tells_a_question_asking_for_every_mention(query, every):
    assert asks_every_mention(query) is every
