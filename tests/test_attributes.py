"""A person's single-valued attributes (memory.attributes): what a statement gives a value to
and what a question asks for, in English and Chinese; a newer value supersedes the older
ones however far apart their words; a question about an attribute gets the current value.

The wordings here are this file's own, none of them from the updates evaluation set
(tests/data/updates), whose figures measure the same rule on the set's wordings."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse
from django.utils.html import escape

from memory import attributes
from memory.context import context_build
from memory.memories import derive_attributes, memories_of, memory_create, memory_update
from memory.models import LongTermMemory
from memory.supersession import attribute_verdict
from tests.test_supersession import consolidated

STATED = [
    ("We relocated to Lisbon in the spring.", "home"),
    ("I'm now living in Toronto with a view of the lake.", "home"),
    ("我去年搬到了杭州。", "home"),
    ("我们现在在厦门定居。", "home"),
    ("我跟王磊的感情很稳定。", "partner"),
    ("I work for Siemens as an analyst.", "employer"),
    ("Last month I joined Stripe.", "employer"),
    ("My first day at Canva is on Monday.", "employer"),
    ("我上个月入职了网易。", "employer"),
    ("I'm on the platform team since the reorg.", "team"),
    ("我现在在风控组，事情不多。", "team"),
    ("My girlfriend Priya is a nurse.", "partner"),
    ("I've been dating Sam since June.", "partner"),
    ("我男朋友王浩是医生。", "partner"),
    ("Jo and I are getting married in May.", "partner"),
    ("我跟林然打算明年结婚。", "partner"),
    ("The new car is a Polestar 2, and it's quiet.", "car"),
    ("I upgraded to a Galaxy S23.", "phone"),
    ("我换了一台小米14。", "phone"),
    ("We bought a used Volvo last year.", "car"),
    ("We only have one car, an old Toyota RAV4, and my partner needs it.", "car"),
    ("我们家开的是比亚迪汉。", "car"),
    ("Our budget for the sofa is €900.", "budget"),
    ("装修预算是二十万元。", "budget"),
    ("My favourite singer right now is Adele.", "favourite music"),
    ("我最喜欢的乐队是五月天。", "favourite music"),
    ("My favourite film is Heat.", "favourite film"),
    ("I started Japanese lessons in October.", "learning a language"),
    ("我在学日语。", "learning a language"),
    ("Every Tuesday evening I go climbing.", "a weekday's activity: tues"),
    ("每周三晚上我去游泳。", "a weekday's activity: 三"),
    ("Since the reorg my boss is Helen Cho.", "manager"),
    ("Lena is my new line manager.", "manager"),
    ("我的上司换成了钱经理。", "manager"),
    ("These days I cycle to work along the canal.", "commute"),
    ("I drive to work.", "commute"),
    ("我最近改成坐公交上班了。", "commute"),
    ("I weigh 82 kg after the holidays.", "weight"),
    ("I work as a paramedic in the city.", "occupation"),
    ("I grew up in Winnipeg, so bad weather doesn't scare me.", "hometown"),
    ("我是在青岛长大的，所以这点坏天气不算什么。", "hometown"),
    ("我是做产品经理的。", "occupation"),
    ("体重终于到了65公斤。", "weight"),
    ("Our family vacation this year is Crete, we booked in January.", "holiday destination"),
    ("We're flying to Lisbon for the Easter holidays.", "holiday destination"),
    ("New plan: we're going to Vienna instead.", "holiday destination"),
    ("国庆我们准备去西安看兵马俑。", "holiday destination"),
    ("寒假的计划改了，不去哈尔滨了，改去昆明。", "holiday destination"),
]

NOT_STATED = [
    "My sister lives in Leeds.",  # someone else's
    "我姐姐住在苏州。",
    "我哥在字节上班。",
    "同事在学德语。",
    "My partner thinks I overplan.",  # which partner?
    "My phone is slow today.",  # no value
    "My boss lives in Leeds.",  # the boss's home, not the speaker's
    "我姐的领导是王总。",  # a sister's manager
    "My manager wants the report on Friday.",  # which manager?
    "The box weighs 20 kg.",  # not the speaker
    "我买了5公斤大米。",
    "I take the bus to the beach on weekends.",  # not to work
    "I'm a morning person.",  # no job
    "I'm a terrible writer, so edit this for me.",  # how, not a job
    "我是测试一下这个功能。",
    "我是设计师的朋友。",  # someone else's job
    "My budget is tight this month.",
    "The new Kia EV6 is out.",  # whose?
    "Full honesty: I got a Domino's delivered this morning again.",  # dinner, not a car
    "My partner grew up in Brighton, so the sea is a big deal for us.",  # the partner's
    "我爱人是在厦门长大的，所以我们特别喜欢海边。",
    "I have two cats.",  # one more, not one at a time
    "我对花生过敏。",
    "I'm seeing the dentist on Thursday.",  # once, not every week
    "我在家工作。",
    "我和朋友住在一起。",
    "我和张经理的关系一直不错。",  # a colleague, not a couple
    "我在用一个组件库写页面。",
    "我在准备下个月去成都的旅行，想住在离地铁站近的地方。",
    "Our holiday is in August this year.",  # when, not where
    "My holiday budget is tight.",
    "I'd love a trip like my sister's to Japan.",  # a wish
    "寒假想出去玩。",
    "年假的事还没跟领导说。",
]


@pytest.mark.parametrize(("text", "attribute"), STATED)
def test_a_statement_gives_its_attribute_a_value(text, attribute):
    assert attributes.said(text) == attribute


@pytest.mark.parametrize("text", NOT_STATED)
def test_a_statement_of_someone_else_or_without_a_value_gives_none(text):
    assert attributes.said(text) is None


@pytest.mark.parametrize(
    ("question", "attribute"),
    [
        ("Where do I live these days?", "home"),
        ("我现在住哪？", "home"),
        ("Who do I work for?", "employer"),
        ("我在哪上班？", "employer"),
        ("What team am I in?", "team"),
        ("Remind me of my girlfriend's name", "partner"),
        ("我老公叫什么？", "partner"),
        ("Which phone should I buy a case for?", "phone"),
        ("我开的是什么车？", "car"),
        ("How much can I spend on the sofa?", "budget"),
        ("What's my favourite film?", "favourite film"),
        ("我最喜欢听谁的歌？", "favourite music"),
        ("What language am I learning?", "learning a language"),
        ("What do I do on Tuesday evenings?", "a weekday's activity: tues"),
        ("Who is my manager these days?", "manager"),
        ("我现在的领导是谁？", "manager"),
        ("How do I get to work now?", "commute"),
        ("我每天怎么去上班？", "commute"),
        ("How much do I weigh now?", "weight"),
        ("What do I do for a living?", "occupation"),
        ("我是做什么工作的？", "occupation"),
        ("我现在体重多少？", "weight"),
        ("Where did I grow up?", "hometown"),
        ("我是在哪里长大的？", "hometown"),
        ("Where are we heading for the winter holidays?", "holiday destination"),
        ("国庆我们去哪？", "holiday destination"),
        ("Where is Caroline going on vacation?", None),
        ("国庆去哪玩比较好？", None),  # a recommendation, not a plan
        ("What did I eat yesterday?", None),
        ("Which country is Caroline from?", None),  # someone else's
        ("What company does Jon work for?", None),
        ("Python对象怎么序列化成JSON？", None),
        ("这个页面用什么组件库比较好？", None),
        ("帮我写一封邮件", None),
    ],
)
def test_a_question_asks_for_an_attribute(question, attribute):
    assert attributes.asked(question) == attribute


def test_a_memorys_labels_are_not_its_statement():
    assert attributes.of_memory("[2 May 2026] Ana: Last month I joined Stripe.") == "employer"


@pytest.mark.parametrize(
    ("memory", "attribute"),
    [
        ("The user lives in Paris.", "home"),
        ("The user works at Spotify as a data analyst.", "employer"),
        ("The user's partner is Theo.", "partner"),
        ("User drives a Volvo XC60.", "car"),
        ("用户在腾讯上班。", "employer"),
        ("The user's sister lives in Leeds.", None),
    ],
)
def test_a_chat_models_memory_about_the_user_is_the_users(memory, attribute):
    assert attributes.of_memory(memory) == attribute


@pytest.mark.parametrize(
    ("old", "new", "supersedes"),
    [
        ("I work for Siemens as an analyst.", "Last month I joined Stripe.", True),
        ("Ana: We relocated to Lisbon in the spring.", "我去年搬到了杭州。", True),
        ("我男朋友王浩是医生。", "我男朋友李然下周来看我。", True),
        ("I live in Osaka.", "I also live in Kyoto part of the year.", False),  # one more
        ("I live in Osaka.", "[3 May 2026] I live in Osaka.", False),  # the same value
        ("Every Tuesday evening I go climbing.", "I play chess every Friday evening.", False),
        ("I work for Siemens as an analyst.", "We relocated to Lisbon in the spring.", False),
        ("My budget for the sofa is €900.", "I have two cats.", False),
        ("Our family vacation this year is Crete.", "We're going to Vienna instead.", True),
    ],
)
def test_a_newer_value_of_the_same_attribute_supersedes(old, new, supersedes):
    assert attribute_verdict(old, new).supersedes is supersedes


# --- in the database --------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_extractor_and_consolidation_replace_an_employer_said_in_other_words(clock):
    consolidated("s1", "Can you help with a cover letter? I work for Siemens as an analyst.")
    clock()
    consolidated("s2", "Quick one about trains. Last month I joined Stripe, so my commute changed.")

    (current,) = [m for m in memories_of("agent-a") if m.attribute == "employer"]
    assert "Stripe" in current.content
    old = LongTermMemory.objects.get(content__contains="Siemens")
    assert old.superseded_by_id == current.pk


@pytest.mark.django_db
def test_a_question_about_an_attribute_gets_its_current_value(clock):
    consolidated("s1", "我住在苏州，平时喜欢骑车。")
    clock()
    consolidated("s2", "我去年搬到了杭州，离公司近多了。")

    context = context_build(
        agent_id="agent-a", session_id="s3", query="我现在住在哪个城市？", model_window=8192
    )

    (item,) = [i for i in context.layers["long_term"].items if i.method == "attribute"]
    assert "杭州" in item.content
    assert item.why == "asks for an attribute (home): its current value"
    assert not any("苏州" in i.content for i in context.layers["long_term"].items)


@pytest.mark.django_db
def test_a_question_about_an_attribute_nobody_gave_adds_nothing():
    memory_create(
        agent_id="agent-a", content="I like green tea.", memory_type="preference", actor="dana"
    )

    context = context_build(
        agent_id="agent-a", session_id="s1", query="Which city do I live in?", model_window=8192
    )

    assert [i.method for i in context.layers["long_term"].items if i.method == "attribute"] == []


@pytest.mark.django_db
def test_the_column_follows_the_text_and_is_derived_for_rows_written_without_it():
    memory = memory_create(
        agent_id="agent-a", content="I live in Osaka.", memory_type="fact", actor="dana"
    )
    assert memory.attribute == "home"
    memory_update(memory, content="I work for Siemens.", actor="dana")
    memory.refresh_from_db()
    assert memory.attribute == "employer"
    with connection.cursor() as cursor:  # as the README's plain SQL writes a memory
        cursor.execute(
            "INSERT INTO long_term_memories (agent_id, content, memory_type) VALUES (%s, %s, %s)",
            ["agent-a", "我在学日语。", "fact"],
        )
    written = LongTermMemory.objects.get(content="我在学日语。")
    assert written.attribute is None

    derive_attributes(using="default")

    written.refresh_from_db()
    assert written.attribute == "learning a language"
    assert LongTermMemory.objects.get(pk=memory.pk).attribute == "employer"


@pytest.mark.django_db
def test_migrate_reads_the_memories_already_there_by_the_rule_of_this_release():
    # Read by an older rule: no attribute for a hometown, a takeaway read as a car.
    grew_up = memory_create(
        agent_id="agent-a", content="I grew up in Winnipeg.", memory_type="fact", actor="api"
    )
    takeaway = memory_create(
        agent_id="agent-a",
        content="I got a Domino's delivered again.",
        memory_type="fact",
        actor="api",
    )
    LongTermMemory.objects.filter(pk=grew_up.pk).update(attribute="")
    LongTermMemory.objects.filter(pk=takeaway.pk).update(attribute="car")

    derive_attributes(using="default")

    assert LongTermMemory.objects.get(pk=grew_up.pk).attribute == "hometown"
    assert LongTermMemory.objects.get(pk=takeaway.pk).attribute == ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "english_name", "chinese_name"),
    [
        ("我去年搬到了杭州。", "home", "住处"),
        (
            "Every Thursday evening I go climbing.",
            "a weekday's activity: Thursday",
            "每周某天的活动：星期四",
        ),
        ("每周三晚上我去游泳。", "a weekday's activity: Wednesday", "每周某天的活动：星期三"),
        ("My favourite band is Wilco.", "favourite music", "最喜欢的音乐"),
        ("I cycle to work.", "commute", "通勤方式"),
    ],
)
def test_the_memory_page_names_its_attribute_in_the_readers_language(
    admin_client, content, english_name, chinese_name
):
    memory = memory_create(agent_id="agent-a", content=content, memory_type="fact", actor="dana")
    page = reverse("memory", args=[memory.pk])

    english = admin_client.get(page, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    chinese = admin_client.get(page, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert f"attribute: {escape(english_name)}" in english
    assert f"属性：{chinese_name}" in chinese
