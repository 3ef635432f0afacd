"""A person's single-valued attributes: where they live, whom they work for, their partner…

Most of what a person says about themselves adds up ("I like tea", then "I like coffee":
both hold). A few things have one value at a time, and a newer statement of one replaces
the older: a person lives in one city, works for one company, drives one car. For those,
"I live in Paris" (March) and "we finally moved to Berlin" (June) are the same subject even
though the two texts share no word and their vectors are far apart (0.47 with the default
model), which is all the supersession rule could see before (memory.supersession).

This module names the attribute a statement gives a value to, and the one a question asks
for, in English and Chinese, from a short table. Each row is written to need a value in the
statement (a name, a place, a model, an amount), so that "my partner thinks I overplan"
(who?) or "my phone is slow" does not count as a new value. Extraction keeps such a
statement as a fact even without another cue (memory.extraction), the supersession rule
lets a newer statement of an attribute replace the older ones (memory.supersession), and the
context answers a question about an attribute with its current value (memory.context).

Only attributes with one value at a time belong here: a second drink, pet, sibling or
allergy is one more, not a replacement. The table is for things people commonly state in
passing to an assistant; anything else keeps the similarity rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.translation import gettext_noop

from memory.text import CJK_RUN, MONEY, statement_of

_CAP = r"(?-i:[A-Z])"  # a capital letter starts a name: Berlin, Shopify, Elliot
_CJK = r"[\u4e00-\u9fff]"
_WEEKDAY_EN = r"(mon|tues|wednes|thurs|fri|satur|sun)day"
_PART_OF_DAY = r"(evening|night|morning|afternoon)"
# A Chinese name starts with a surname: "我对象高远" names the partner, "我对象总说" does not.
_SURNAME = (
    "[李王张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕苏卢蒋蔡贾丁魏"
    "薛叶阎余潘杜戴夏钟汪田任姜范方石姚谭廖邹熊金陆郝孔白崔康毛邱秦江史顾侯邵孟龙万段雷钱汤尹黎易常"
    "武乔贺赖龚文]"
)
_LANGUAGES = (
    r"english|french|german|spanish|italian|portuguese|dutch|swedish|norwegian|danish"
    r"|finnish|polish|czech|russian|ukrainian|greek|turkish|arabic|hebrew|persian|hindi"
    r"|urdu|bengali|mandarin|cantonese|chinese|japanese|korean|thai|vietnamese|indonesian"
    r"|malay|tagalog|swahili|latin|welsh|irish|icelandic|hungarian|romanian"
)
_CAR_BRANDS = (
    r"honda|toyota|tesla|ford|vw|volkswagen|skoda|mazda|subaru|kia|hyundai|bmw|audi"
    r"|mercedes|nissan|volvo|peugeot|renault|fiat|byd|jeep|porsche|lexus|polestar"
    r"|citroen|opel|vauxhall|suzuki|mitsubishi|chevrolet|chevy|dodge|rivian"
)
_CAR_BRANDS_ZH = (
    r"丰田|大众|本田|比亚迪|蔚来|小鹏|理想|特斯拉|宝马|奔驰|奥迪|吉利|长安|五菱|问界|捷达|日产|别克"
    r"|雪佛兰|福特|现代|起亚|马自达|沃尔沃|极氪|零跑|红旗|领克|哈弗|坦克"
)
# A day or a month names when, not where ("our trip is in August").
_WHEN = (
    rf"({_WEEKDAY_EN}|january|february|march|april|may|june|july|august|september|october"
    r"|november|december|easter|christmas)\b"
)
_TRIP_WORDS = r"(big|next|summer|winter|family|annual|spring|autumn|fall|christmas|easter)"
_WEIGHT = r"(kg|kgs|kilos?|kilograms?|lbs?|pounds|stone)"
# Jobs named by what a person says they are ("I'm a nurse", 我是设计师): a noun from the
# list, so that "I'm a morning person" or 我是个夜猫子 names no job.
_JOBS = (
    r"(engineer|developer|programmer|designer|nurse|doctor|physician|surgeon|dentist|teacher"
    r"|lecturer|professor|researcher|scientist|analyst|accountant|lawyer|solicitor|architect"
    r"|manager|consultant|journalist|writer|editor|translator|chef|baker|barista"
    r"|electrician|plumber|carpenter|mechanic|pharmacist|therapist|paramedic|firefighter"
    r"|police officer|officer|pilot|(bus|taxi|truck|lorry|delivery) driver|student|librarian"
    r"|photographer|artist|musician"
    r"|actor|salesperson|recruiter|marketer|product owner|data scientist|freelancer"
    r"|vet|veterinarian|social worker|carer|caregiver|cashier|receptionist|clerk)s?"
)
_JOBS_ZH = (
    r"(工程师|设计师|程序员|护士|医生|大夫|老师|教师|律师|会计|经理|主管|记者|编辑|翻译|厨师"
    r"|司机|警察|研究员|分析师|产品经理|运营|销售|咨询师|建筑师|药剂师|摄影师|学生|研究生"
    r"|博士生|公务员|客服|店长|教授|讲师|架构师|数据科学家|自由职业者)"
)
# "I'm a terrible writer", "a careful driver": how one does a thing, not one's job.
_NOT_A_JOB = (
    r"(?!(good|bad|great|terrible|awful|careful|decent|big|huge|total|slow|fast|picky|nervous"
    r"|lazy|messy|better|worse|keen|amateur|aspiring|wannabe|hobby|weekend)\b)"
)
_PHONE_BRANDS = (
    r"iphone|pixel|galaxy|oneplus|xperia|redmi|xiaomi|huawei|motorola|moto|oppo|vivo|honor"
)


# The people close to a speaker. A fact about one of them is another subject (the
# supersession rule); a statement about "my sister" gives no attribute of the speaker's.
_PEOPLE_EN = (
    r"(sister|brother|sibling|mother|mom|mum|father|dad|parent|wife|husband|spouse|partner"
    r"|son|daughter|kid|child|children|baby|girlfriend|boyfriend|friend|roommate|neighbou?r"
    r"|grandmother|grandma|grandfather|grandpa|aunt|uncle|cousin|niece|nephew|colleague"
    r"|coworker|boss|wife's|husband's)s?"
)
_PEOPLE_ZH = (
    r"(姐姐|妹妹|哥哥|弟弟|姐妹|兄弟|妈妈|母亲|爸爸|父亲|父母|老婆|妻子|太太|老公|丈夫|爱人"
    r"|儿子|女儿|孩子|女朋友|男朋友|女友|男友|朋友|室友|邻居|奶奶|爷爷|外婆|外公|姥姥|姥爷"
    r"|阿姨|叔叔|舅舅|表哥|表姐|表弟|表妹|堂哥|堂姐|同事|老板|领导)"
)
PEOPLE = re.compile(rf"\b{_PEOPLE_EN}\b|{_PEOPLE_ZH}", re.IGNORECASE)
# One of them as the subject of a statement, which opens on whom it is about: "my sister
# lives in Leeds", "since my brother moved", 我姐上个月搬到了成都, 室友在学法语 (not "with my
# coworkers" or "a gift for my mum": that Thursday and that budget are the speaker's own).
_SOMEONE_ELSES = re.compile(
    rf"^\W*(\w+,?\s+){{0,2}}?(my|our)( \w+)? {_PEOPLE_EN}\b"
    rf"|^[^，。,]{{0,4}}?我们?的?({_PEOPLE_ZH}|姐|妹|哥|弟|爸|妈)|^\W*{_PEOPLE_ZH}",
    re.IGNORECASE,
)
# A statement in English gives the speaker's own value only if it says I, my, we or our,
# or "the new car" ("The Kia EV6 is out" might be anyone's; "the new car is a Kia EV6", told
# to one's assistant, is one's own); Chinese drops the subject (新车是理想L6).
# Chat also drops the subject before a verb of change: "Just started at Stripe", "Moved
# from Chicago to Denver", "Got engaged to Priya".
_FIRST_PERSON = re.compile(
    r"\b(i|i'm|i've|i'd|me|my|mine|we|we're|we've|us|our)\b"
    r"|^\W*the new (car|phone|job|flat|apartment|house|place)\b"
    r"|^\W*(just |finally |recently |also )?(started|joined|moved|relocated|switched|upgraded"
    r"|transferred|left|quit|got|picked up|signed up|been at)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Attribute:
    name: str
    said: re.Pattern[str]  # a statement that gives it a value
    asked: re.Pattern[str]  # a question that asks for its value
    value: re.Pattern[str] | None  # what the statement must also hold, where `said` cannot

    def gets_a_value(self, text: str) -> bool:
        return bool(self.said.search(text)) and (
            self.value is None or bool(self.value.search(text))
        )


def _attribute(
    name: str, said: tuple[str, ...], asked: tuple[str, ...], value: str | None = None
) -> Attribute:
    return Attribute(
        name,
        re.compile("|".join(said), re.IGNORECASE),
        re.compile("|".join(asked), re.IGNORECASE),
        re.compile(value, re.IGNORECASE) if value else None,
    )


# In order: the first row a statement matches is its attribute (an employer before a phone:
# 小米 is both; a commute before an employer: "现在骑车上班" says how, not where).
ATTRIBUTES = (
    _attribute(
        gettext_noop("home"),
        said=(
            rf"\b(i|we) (now |currently |still |also )?live in {_CAP}",
            rf"\b(i'm|i am|we're|we are) (now |currently |still )?(living|based|settled) in {_CAP}",
            rf"\b(i|we|i've|we've|i have|we have) (just |finally |recently |now )?(moved|relocated)"
            rf" (back |over )?(here )?(from {_CAP}\w*( {_CAP}\w*)? )?to {_CAP}",
            rf"^\W*(just |finally |recently )?(moved|relocated) (back |over )?(from {_CAP}\w*"
            rf"( {_CAP}\w*)? )?to {_CAP}",
            rf"\b(i|we)('ve| have) lived in {_CAP}|\b{_CAP}\w*('s| has) been (my|our) home\b",
            rf"\bhome is (now )?(in )?{_CAP}",
            # not a wish (想住在), nor a kind of place (住在离地铁近的地方, 住在酒店)
            rf"(?<![想要])(住在|搬到|搬去|搬来|定居在?|落户在?)(?!一起|离|靠近|酒店|宾馆|民宿|朋友家|附近)"
            rf"{_CAP}?{_CJK}{{2}}",
            rf"我们?(现在|目前|一直)?在{_CJK}{{2,4}}(生活|定居|安家)",
            rf"(现在|目前|一直)住(?!在|宿舍|酒店|院){_CJK}{{2}}|在{_CJK}{{2,4}}住了|^\W*(人在|坐标){_CJK}{{2}}",
        ),
        asked=(
            r"\bwhere do (i|we) live\b|\b(which|what) (city|town|country)\b"
            r"|\bwhere('s| is) (my|our) home\b|\bwhere am i based\b",
            r"住(在)?哪|(哪个|什么)(城市|地方)",
        ),
    ),
    _attribute(
        gettext_noop("hometown"),
        said=(
            rf"\b(i|we) grew up (in|on|near|outside|around) {_CAP}"
            rf"|\b(i'm|i am) originally from {_CAP}|\bmy home ?town is {_CAP}",
            rf"我(是|也是)?(从小|小时候)?在{_CJK}{{2,6}}?长大|我(的)?老家(是|在){_CJK}{{2}}",
        ),
        asked=(
            r"\bwhere did (i|we) grow up\b|\bwhere am i (originally )?from\b|\bmy home ?town\b",
            r"我[^，。,？?]{0,3}在哪(里|儿)?长大|我的?老家(在|是)?哪|我是哪(里)?人",
        ),
    ),
    _attribute(
        # The holiday being planned: "our summer trip is Portugal", then "we're doing Iceland
        # instead" (a second trip is rarely planned beside it; a wish is no plan).
        gettext_noop("holiday destination"),
        said=(
            rf"\b(our|my|the) ({_TRIP_WORDS} )*(trip|holiday|vacation|getaway)\b[^.;]{{0,25}}"
            rf"\b(is|will be|is going to be|is now)( going to be)? (to |in )?(?!{_WHEN}){_CAP}",
            rf"\b(we're|we are|i'm|i am) (now )?(doing|going to|heading to|flying to|off to)"
            rf" {_CAP}\w*( {_CAP}\w*)? (instead\b|this (summer|winter|year)\b|for (the|our|my)"
            rf" ({_TRIP_WORDS} )*(trip|holiday|holidays|vacation)\b)",
            rf"(暑假|寒假|假期|年假|今年夏天|国庆|五一|春节)[^，。！？,.!?]{{0,8}}?(打算|准备|计划|要|决定)"
            rf"去(?!玩|旅|度|走|逛|哪|看看){_CJK}{{2}}",
            rf"不去{_CJK}{{2,4}}了?[，,]?(我们)?(改去|改成去|换成去|改到){_CJK}{{2}}",
        ),
        asked=(
            r"\bwhere (are|am|were|will) (we|i) (be )?(going|heading|off|travell?ing|flying)\b"
            rf"[^?]{{0,30}}\b({_TRIP_WORDS}|trip|holiday|holidays|vacation)\b"
            r"|\bwhere('s| is) (our|my) (\w+ )?(trip|holiday|vacation)\b",
            r"(暑假|寒假|假期|年假|今年夏天|国庆|五一|春节|旅行|旅游|度假)[^？?，,]{0,8}去哪",
        ),
    ),
    _attribute(
        gettext_noop("commute"),
        said=(
            r"\b(take|ride|catch|get) the (subway|metro|tube|underground|bus|train|tram|ferry)"
            r" (in )?to work\b",
            r"\b(i|we) (now |usually |still |always )?(bike|cycle|walk|drive|scooter) (in )?to"
            r" work\b",
            r"\b(my )?commute[^.;]{0,40}\b(by|on) (bike|bicycle|train|bus|car|carpool|subway"
            r"|metro|tube|tram|ferry|foot|scooter)\b",
            r"\bgo (to work )?(by|on) (bike|bicycle|train|bus|car|carpool|subway|metro|tube|tram"
            r"|ferry|foot|scooter)\b[^.;]{0,30}\b(work|commute)\b|\b(work|commute)\b[^.;]{0,40}"
            r"\bgo (to work )?(by|on) (bike|bicycle|train|bus|car|carpool|subway|metro|tube|tram"
            r"|ferry|foot|scooter)\b",
            rf"(坐|乘|搭|骑|开)着?{_CJK}{{0,4}}?(上班|通勤|去公司)|(走路|步行)(上班|去公司)",
        ),
        asked=(
            r"\bhow do (i|we) (get|go|commute) to work\b|\bmy commute\b",
            r"怎么(去|来)?(上班|通勤)|(上班|通勤)(怎么|的方式)",
        ),
    ),
    _attribute(
        gettext_noop("employer"),
        said=(
            rf"\b(i|we) (now |currently |still )?work (at|for) {_CAP}",
            rf"\bmy (new |current )?(employer|company),? {_CAP}"
            rf"|\b{_CAP}\w*, my (employer|company)\b",
            rf"\b(i|we) (just |recently |finally )?(started (work |a new job )?(at|with) |joined )"
            rf"{_CAP}",
            rf"\bfirst (day|week|month) at {_CAP}",
            rf"\b(i'm|i am) an? [\w-]+( [\w-]+)? (at|for) {_CAP}|\b(hired|employed) by {_CAP}",
            rf"\bmy (employer|company) is {_CAP}|^\W*(just )?(started|joined|been) (at )?{_CAP}",
            r"\b(i|i've|i have) (just )?(got|started|landed) a new job\b|\bmy new job\b"
            r"|^\W*new job\b|\baccepted (an|a|the|their) (job )?offer\b",
            rf"\bi (just )?(quit|left) (my job at )?{_CAP}",
            rf"^\W*at {_CAP}\w*( {_CAP}\w*)? we\b",
            rf"在(?!家){_CAP}?{_CJK}{{1,6}}?(上班|工作|任职)",
            rf"(跳槽到|跳槽去|入职|加入了?|离开了?){_CAP}?{_CJK}{{2,6}}(公司|了|[，,。！!]|$)",
            rf"换(了)?工作了?[，,]\s*(现在)?在{_CJK}{{2,6}}",
            rf"在(?!家){_CAP}?{_CJK}{{1,6}}?(干了|当|做[^，。,]{{0,4}}(师|员|经理|主管|总监))|我是{_CAP}?{_CJK}{{2,6}}的员工|我们公司是"
            rf"|离职[，,]?\s*去了?{_CAP}?{_CJK}{{2,6}}",
        ),
        asked=(
            r"\b(which|what) company\b|\bwhere do i work\b|\bwho do i work for\b"
            r"|\bmy (employer|company)\b",
            r"(哪|哪个|什么)(家)?公司|在哪(儿|里)?(上班|工作)",
        ),
    ),
    _attribute(
        gettext_noop("occupation"),
        said=(
            rf"\b(i|i now|i still) work as an? ([\w-]+ ){{0,3}}{_JOBS}\b",
            rf"\b(i'm|i am) (now |still )?an? {_NOT_A_JOB}([\w-]+ ){{0,3}}{_JOBS}\b",
            rf"\bmy (job|role|position) is (an? )?([\w-]+ ){{0,3}}{_JOBS}\b",
            # not 我是设计师的朋友; 我是做产品经理的 is one's own job
            rf"我(现在)?是(一名|一个|个)?[^，。,！!？?]{{0,12}}?{_JOBS_ZH}(?!的(?![，。,！!？?]|$))",
            rf"我(现在)?(在|于)[^，。,]{{1,12}}(当|做){_CJK}{{0,6}}?{_JOBS_ZH}",
        ),
        asked=(
            r"\bwhat do i do for (a living|work)\b|\bwhat('s| is) my (job|occupation|profession)\b"
            r"|\bwhat (job|work) do i do\b",
            r"我是(做|干)(什么|啥)|我的(工作|职业)是什么|我(做|干)(什么|啥)工作",
        ),
    ),
    _attribute(
        gettext_noop("team"),
        said=(
            r"\b(on|joined|joining|to|into|in) the [\w-]+( [\w-]+)? team\b",
            rf"\bmy team is {_CAP}",
            r"\bour [\w-]+( [\w-]+)? team\b",
            rf"(调到|转到了?|调去|分到了?|加入了?|我们|在){_CJK}{{1,8}}?(组(?!件|合|织)|团队)",
            rf"我是{_CJK}{{1,6}}(组|团队)的",
        ),
        asked=(r"\b(which|what) team\b", r"(哪个|什么)(组(?!件|合|织)|团队)"),
    ),
    _attribute(
        gettext_noop("manager"),
        said=(
            rf"\bmy (new |current )?(manager|boss|line manager|supervisor),?( is)?( now)? {_CAP}",
            rf"\b{_CAP}[\w.]*( {_CAP}\w*)? is (now )?my (new )?(manager|boss|line manager"
            r"|supervisor)\b",
            rf"\bi (now )?report to {_CAP}",
            rf"(领导|上司|老板|主管|经理)(是|换成了?|变成了?)?({_SURNAME}{_CJK}{{1,2}}|老{_SURNAME}"
            rf"|小{_SURNAME})",
        ),
        asked=(
            r"\bwho('s| is) (my|our) (new )?(manager|boss|line manager|supervisor)\b"
            r"|\bwho do i report to\b",
            r"我的?(现在的)?(领导|上司|老板|主管)(是谁|叫什么)|(领导|上司|主管)是谁",
        ),
    ),
    _attribute(
        gettext_noop("partner"),
        said=(
            rf"\bmy (new |current )?(partner|boyfriend|girlfriend|wife|husband|fianc[eé]e?|spouse)"
            rf",?( is)? {_CAP}[a-z]+",
            rf"\b{_CAP}[a-z]+, my (new |current )?(partner|boyfriend|girlfriend|wife|husband)\b",
            rf"\b(seeing|dating|married to|engaged to|moved in with|living with) {_CAP}[a-z]+",
            rf"\b{_CAP}[a-z]+ and i (have been|'ve been|are|got|just got)"
            r" (together|engaged|married)\b",
            rf"\b(split up|broke up|separated) with {_CAP}[a-z]+|\b{_CAP}[a-z]+ and i"
            r" (split up|broke up|separated)\b",
            # a couple's next steps name the partner: "things with Sam are getting serious,
            # we're moving in together"
            rf"(\b(with|and) {_CAP}[a-z]+|\b{_CAP}[a-z]+ and i)\b[^.;]*\b(mov(e|ing) in together"
            r"|getting married|got engaged|getting engaged)\b",
            rf"(对象|男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|爱人|媳妇儿?)(是|叫)?{_SURNAME}{_CJK}{{1,2}}",
            rf"(和|跟)({_SURNAME}{_CJK}{{1,2}}|小{_CJK}|{_CAP}[a-z]+)"
            rf"([^。！？]*(住在一起|同居|结婚|订婚|在一起|谈恋爱)|分手)",
            # a relationship that settles is a couple's ("我和吴迪的关系越来越稳定"), before
            # the clause that says what they plan
            rf"(和|跟)({_SURNAME}{_CJK}{{1,2}}|小{_CJK}|{_CAP}[a-z]+)的?(感情|关系)"
            r"(越来越|很|挺|一直)?稳定",
        ),
        asked=(
            r"\bmy (partner|boyfriend|girlfriend|wife|husband|spouse)\b"
            r"|\bwho am i (seeing|dating|with)\b",
            # mine: 对象 alone is also a programmer's "object" (Python对象)
            r"我的?(现在的)?(对象|男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|爱人)",
        ),
    ),
    _attribute(
        gettext_noop("phone"),
        said=(
            rf"\b({_PHONE_BRANDS})\s?(\w+\s)?\w*\d|\bnothing phone\b",
            r"(iPhone|Pixel|华为|Mate|小米|vivo|OPPO|一加|荣耀|红米|三星)\s?(\w+\s)?\w*\d",
        ),
        asked=(r"\b(what|which) (phone|mobile)\b|\bmy phone\b", r"(什么|哪款|哪个)手机"),
    ),
    _attribute(
        gettext_noop("car"),
        said=(
            # Driving names a car by any name; what one bought or got, by a maker's ("I got
            # a Domino's delivered" is dinner).
            rf"\b(drive|driving|drove) (a|an|the|my|our) (new |used |old )?(\d{{4}} )?{_CAP}",
            rf"\bcar is (now )?(a|an|the) {_CAP}"
            rf"|\b(my|our|a|an|the) ({_CAR_BRANDS})\b"
            rf"|\b(my|our|a|an) (new|used|old) (\d{{4}} )?({_CAR_BRANDS})\b",
            r"开的是|新车|新买的|(那|一)辆|换了辆|车是|现在开(?!会|心|始|学|课|门|关|发|放|玩)",
            rf"(开|买了|换了|提了)辆?({_CAR_BRANDS_ZH})",
        ),
        asked=(r"\b(what|which) car\b|\bdo i drive\b", r"(什么|哪款|哪个|哪辆)车"),
    ),
    _attribute(
        gettext_noop("budget"),
        said=(
            r"\bbudget\b|\b(laptop|phone|car|trip|holiday|wedding|house) money\b"
            r"|\bcan (spend|go (up )?to|afford)\b[^.;]{0,20}[$£€¥\d]|\bto spend\b"
            r"|\b(the max|maximum|my limit|the cap|set aside)\b",
            r"预算|(最多|顶多|准备|打算)?能?(花|出)[^，。,]{0,4}[\d一二两三四五六七八九十百千万]",
        ),
        asked=(r"\bbudget\b|\bhow much can i spend\b", r"预算"),
        value=MONEY,
    ),
    _attribute(
        gettext_noop("weight"),
        said=(
            rf"\b(i'm|i am|i weigh|i'm now|i am now)( now| currently)?( at| down to| up to)?"
            rf" (about |around )?\d+(\.\d+)? ?{_WEIGHT}\b",
            rf"\bweigh(ed)? (in at|myself)\b[^.;]*\d+(\.\d+)? ?{_WEIGHT}\b",
            r"(体重|称了一下)[^，。,]{0,8}?[\d一二三四五六七八九十百]+(\.\d+)?\s*(公斤|斤|kg)",
            r"我(现在|目前)?[\d一二三四五六七八九十百]+(\.\d+)?\s*(公斤|斤)"
            r"|(降到|减到|瘦到|涨到|胖到)了?\s*[\d一二三四五六七八九十百]+(\.\d+)?\s*(公斤|斤|kg)",
        ),
        asked=(
            r"\bhow much do i weigh\b|\bwhat do i weigh\b|\bmy weight\b",
            r"我(现在|目前)?的?体重|我(现在|目前)?(有)?多重",
        ),
    ),
    _attribute(
        gettext_noop("learning a language"),
        said=(
            rf"\b(learn|learning|studying|started|dropped|signed up for|taking|picked up) (a |an )?"
            rf"({_LANGUAGES})\b",
            rf"\b({_LANGUAGES}) (lessons|classes|course|class|lesson)\b",
            rf"学{_CJK}{{0,2}}?{_CJK}{{1,3}}语|{_CJK}{{1,3}}语(课|班)",
        ),
        asked=(
            r"\b(which|what) language\b|\blanguage (am i|i'm) learning\b",
            r"(哪门|什么|哪种)(外语|语言)|学(什么|哪)",
        ),
    ),
    _attribute(
        gettext_noop("a weekday's activity"),
        said=(
            # every week: "every Thursday", "on Thursdays", "Thursday nights are"
            rf"\bevery {_WEEKDAY_EN}( {_PART_OF_DAY})?\b|\bon {_WEEKDAY_EN}s\b"
            rf"|\bon {_WEEKDAY_EN} {_PART_OF_DAY}s\b|\b{_WEEKDAY_EN}s? {_PART_OF_DAY}s (are|is)\b"
            rf"|\b{_WEEKDAY_EN}s? (is|are) my \w+ ({_PART_OF_DAY}|day)s?\b"
            rf"|^\W*{_WEEKDAY_EN}s( {_PART_OF_DAY}s?)?\b|\b{_WEEKDAY_EN} {_PART_OF_DAY}s\b",
            r"(周|星期)[一二三四五六日天](晚上|早上|上午|下午)?[^，。,]{0,6}(打|踢|练|游泳|跑步|健身|课"
            r"|俱乐部|活动|的日子|是我|固定|都(要|去|会|有)|去(?=[，。,！!]|$))|每(个|逢)?(周|星期)[一二三四五六日天]",
        ),
        asked=(
            rf"\bon {_WEEKDAY_EN}s?( {_PART_OF_DAY}s?)?\b",
            r"(周|星期)[一二三四五六日天](晚上|早上|上午|下午)?",
        ),
    ),
)

# A favourite thing is one at a time too, keyed by what kind of thing it is.
_FAVOURITE_EN = re.compile(r"\bmy (new |all-time )?favou?rite (\w+)", re.IGNORECASE)
_FAVOURITE_ZH = re.compile(
    r"最(喜欢|爱)的(?!还|就|也)(" + _CJK + r"{1,3}?)(是|换成|变成|也是|一直是)"
)
_MUSIC = re.compile(
    r"\bon repeat\b|\bplay(ing)? all day\b|\blistening to\b(?! (a|the|my|some) podcast)"
    r"|天天(放|听)|一直在听|最近在听|迷上[^。！？]*听|本命是"
    # a favourite, with words of music around it
    r"|(favou?rite|最(喜欢|爱))[^.!?。！？]*(\bsongs?\b|\balbums?\b|\bconcerts?\b|\blisten|歌|听|乐队"
    r"|演唱会|专辑)|(\bsongs?\b|\balbums?\b|\bconcerts?\b|\blisten|歌|听|乐队|演唱会|专辑)[^.!?。！？]*"
    r"(favou?rite|最(喜欢|爱))",
    re.IGNORECASE,
)
_NO_FAVOURITE = re.compile(
    r"\b(don't|do not|never|no longer) (really )?(have|had) (a|any) favou?rite|没有(最喜欢|最爱)",
    re.IGNORECASE,
)
# The kinds of favourite things that are the same kind: a band, a singer, music.
_KINDS = {
    "band": "music",
    "rapper": "music",
    "singer": "music",
    "artist": "music",
    "musician": "music",
    "group": "music",
    "music": "music",
    "歌手": "music",
    "乐队": "music",
    "歌": "music",
}
_ASKED_FAVOURITE_EN = re.compile(r"\bfavou?rite (\w+)", re.IGNORECASE)
_ASKED_FAVOURITE_ZH = re.compile(
    r"最喜欢(听)?(谁|哪)[^？?]*歌|最喜欢的(" + _CJK + r"{1,3}?)(是|叫)"
)


def _kind(noun: str) -> str:
    noun = noun.lower().rstrip("s") if not CJK_RUN.search(noun) else noun
    return f"{FAVOURITE}{_KINDS.get(noun, noun)}"


def _favourite_said(text: str) -> str | None:
    if _NO_FAVOURITE.search(text):
        return None
    english = _FAVOURITE_EN.search(text)
    if english:
        return _kind(english.group(2))
    chinese = _FAVOURITE_ZH.search(text)
    if chinese:
        return _kind(chinese.group(2))
    return "favourite music" if _MUSIC.search(text) else None


def _favourite_asked(query: str) -> str | None:
    english = _ASKED_FAVOURITE_EN.search(query)
    if english:
        return _kind(english.group(1))
    chinese = _ASKED_FAVOURITE_ZH.search(query)
    if chinese:
        return _kind(chinese.group(3)) if chinese.group(3) else "favourite music"
    return None


def _weekday(text: str) -> str:
    """Which day a weekday attribute is about: Thursday's activity is not Monday's."""
    english = re.search(_WEEKDAY_EN, text, re.IGNORECASE)
    if english:
        return english.group(1).lower()
    chinese = re.search(r"(周|星期)([一二三四五六日天])", text)
    return {"天": "日"}.get(chinese.group(2), chinese.group(2)) if chinese else ""


WEEKDAY_ACTIVITY = "a weekday's activity"
FAVOURITE = "favourite "  # before the kind of thing: "favourite film"


def _named(attribute: Attribute, text: str) -> str:
    if attribute.name == WEEKDAY_ACTIVITY:
        return f"{attribute.name}: {_weekday(text)}"
    return attribute.name


# A statement about one's manager opens on them ("我的领导王总要求…", "my boss Dana wants…"):
# it names the speaker's manager; one opening on a sister does not ("我姐的领导是王总").
_MANAGER_WORDS = re.compile(r"boss|manager|supervisor|领导|上司|老板|主管", re.IGNORECASE)


def _opens_on_another(attribute: Attribute, opening: str) -> bool:
    """Whether a statement opening on another person (`opening`) says nothing of the
    speaker's `attribute`. A partner's name is the speaker's partner whoever else the
    statement names first."""
    if attribute.name == "partner":
        return False
    return attribute.name != "manager" or not _MANAGER_WORDS.search(opening)


def said(text: str) -> str | None:
    """The attribute the statement gives the speaker's value to, if any. Not one about
    another person ("my sister lives in Leeds"): only a partner's or a manager's name, said
    of that person, is the speaker's."""
    if not (CJK_RUN.search(text) or _FIRST_PERSON.search(text)):
        return None
    opening = _SOMEONE_ELSES.search(text)
    for attribute in ATTRIBUTES:
        if opening and _opens_on_another(attribute, opening.group(0)):
            continue
        if attribute.gets_a_value(text):
            return _named(attribute, text)
    return None if opening else _favourite_said(text)


# A question about the person's own value says I, my, we or our (我 in Chinese): "Which
# country is Caroline from?" asks about someone else.
_ASKED_OF_ONESELF = re.compile(r"\b(i|i'm|me|my|we|we're|our|us)\b|我", re.IGNORECASE)


def asked(query: str) -> str | None:
    """The attribute the question asks the person for, if any: "Which city do I live in now?"
    asks for "home"."""
    if not _ASKED_OF_ONESELF.search(query):
        return None
    favourite = _favourite_asked(query)
    if favourite:
        return favourite
    for attribute in ATTRIBUTES:
        if attribute.asked.search(query):
            return _named(attribute, query)
    return None


# A chat model writes memories about "the user" ("The user lives in Paris", "The user's
# partner is Theo"): said of the speaker, in the first person the table reads.
_THE_USER = (
    (re.compile(r"\b(the )?user's\b", re.IGNORECASE), "my"),
    (re.compile(r"\b(the )?user is\b", re.IGNORECASE), "I am"),
    (re.compile(r"\b(the )?user has\b", re.IGNORECASE), "I have"),
    (re.compile(r"\b(the )?user (\w+)s\b", re.IGNORECASE), r"I \2"),
    (re.compile(r"\b(the )?user\b", re.IGNORECASE), "I"),
)


def _in_the_first_person(text: str) -> str:
    for said_of_the_user, first_person in _THE_USER:
        text = said_of_the_user.sub(first_person, text)
    return text


def of_memory(content: str) -> str | None:
    """The attribute a memory's text gives a value to, past the day and speaker labels the
    extractor puts before it, and said of "the user" or by them (`LongTermMemory.attribute`
    holds it)."""
    return said(_in_the_first_person(statement_of(content)))
