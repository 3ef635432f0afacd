"""The offline extractor: what a person says about themselves becomes typed long-term memories.

Consolidation uses it when no chat model is configured (the default install). It reads a
message sentence by sentence, and each sentence clause by clause ("我叫小王，我是后端工程师" is
two statements), and keeps the clauses where the speaker states something that stays true:

- fact: names and roles, home and work, family, pets and what they own ("my cat Biscuit",
  "we only have one car", 我们家只有一辆车), health and diets ("I've been vegetarian for six
  years", 我吃素), plans ("I'm planning a trip"), dates ("部署日期是下周五", "our launch is on
  June 3");
- preference: likes and dislikes ("I can't stand crowded tourist spots", 我特别受不了人挤人的景点),
  tools and habits ("I use Neovim", "我每天早上跑步"), times of day ("I'm useless before
  10 am", 我早上十点之前基本是废的), limits to what they eat or spend ("I don't eat pork",
  "keep any extra spending under $50", 把开销控制在三百块以内), standing requests ("请用中文回答",
  "from now on answer in English");
- decision: what was settled ("we decided", "let's go with", "定在", "就用 Postgres 吧");
  a plan is not a decision, so "I'm planning" and "我打算" are facts;
- project: what the person is building ("I'm building a CLI tool", "我在做一个小程序").

Precision over recall: a wrong memory is shown to the agent in every later session, a missed
one only costs recall, and search (over messages) never depends on these memories. So
questions, statements about the other person ("you", 你), conditionals, wishes and
sentences that lean on what the listener sees are dropped, even when they hold a cue.

People state such things in passing while asking for something else ("Can you help me plan a
week in Lisbon? I've been vegetarian for about six years now"): the question is dropped, the
statement kept.

Whose words count: a user's, and an assistant's only when the message names a person speaking
(`metadata.speaker`: both sides of a conversation between people, as in LoCoMo; a speaker
named for the role, "Assistant" or 助手, is the AI). An AI assistant's words are never
memories: "I'll remember that you prefer tabs" restates what the user said, which already
made its own memory, and its "I'm an AI model" is not about the user. Fenced code and quoted
lines ("> ...") are pasted material, not the person's words.

A memory keeps the speaker's words, one statement a memory, so that a later "I prefer tabs"
merges into it (dedup compares texts). The context builder shows it without the message it
came from, so it is made to stand alone: prefixed with the speaker's name when the message
has one ("Caroline: I'm a single parent."), and with the message's date when the statement
leans on a relative time word ("[8 May 2023] 部署日期定在下周五晚上十点。"), which would
otherwise turn false as time passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from memory import attributes
from memory.dates import day_label
from memory.models import MainMessage, MemoryType, Role
from memory.text import MONEY

MEMORY_CHARS = 300
# Shorter statements are reactions ("Love it!", "好的"); "I'm Dana." is as short as a fact gets.
MIN_WORDS = 2
MIN_CJK_CHARS = 4


@dataclass(frozen=True)
class Extracted:
    memory_type: str
    content: str


# --- the cue tables --------------------------------------------------------------------------
# A clause holding one of these cues becomes a memory of that type; first match wins, so the
# narrower types come first ("I've decided to move" is a decision, not a fact about moving).
# Placeholders, filled in below:
# <I>       the speaker as a subject: "I", "we", "my partner and I", "our team";
# <NAME>    a capitalised name ("Dana", "Lee Chen"), matched case-sensitively;
# <SETTLE>  what a settled choice does ("let's <SETTLE>", "we'll <SETTLE>"): "let's see" or
#           "let's take a look" steer the conversation, they settle nothing;
# <DATE>    a day or a date ("Friday", "June 3", "下周五", "6月1号");
# <TIME>    a time of day ("10 am", "5:30", "noon");
# <MONEY>   an amount ("$50", "300 dollars", "三百块").
PLACEHOLDERS = {
    "<I>": r"(i|we|my (\w+ ){1,2}and i|(my|our|the) team)",
    "<NAME>": r"(?-i:[A-Z][a-z]+( [A-Z][a-z]+)?)(?!\w)",
    "<SETTLE>": r"(use|go with|go for|stick (with|to)|switch (to|over to)|move (to|over to)"
    r"|migrate to|book|drop|ship|launch|release|name|call (it|the \w+)|schedule"
    r"|postpone|delay|meet|deploy|adopt|output|store|host|freeze|rename|target|settle on"
    r"|hold off on|skip)",
    "<DATE>": r"((mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|(next|this) (week"
    r"|month|year|quarter|sprint|weekend)|end of (the )?(week|month|quarter|year|sprint)"
    r"|(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b"
    r"|\d{1,2}(st|nd|rd|th)? (of )?(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}"
    r"|\d{1,2}\s*(月|号|日|点)|[一二三四五六七八九十]{1,3}(月|号|日|点)"
    r"|(周|星期|礼拜)[一二三四五六日天末]|今天|明天|后天|今晚|明晚|下周|下个?月|月底|月初|年底"
    r"|\d{4}\s*年)",
    "<TIME>": r"((about|around|roughly) )?(\d{1,2}(:\d{2})?\s?(am|pm|a\.m\.|p\.m\.|o'clock)\b"
    r"|\d{1,2}:\d{2}\b|noon\b|midnight\b|dawn\b)",
    "<MONEY>": f"({MONEY})",
}

DECISIONS = (
    r"^\W*(decision|decided|final decision|决定|结论)\s*[:：]",
    r"\b<I>('ve| have)? (just |finally |already |now |all )?(decided|agreed|settled on"
    r"|chose|picked|opted|committed to)\b|\bmade up (my|our) minds?\b",
    r"\b<I>('re| are| am|'m) (going with|sticking with)\b|\b<I> (went with|settled on)\b"
    r"|\b<I>(('re| are| am|'m) (switching|migrating)| switched| migrated)"
    r" (over |from [\w.-]+( \d+)? )?to\b",
    r"\blet's (not )?<SETTLE>\b|\blet us <SETTLE>\b|\b<I>('ll| will) <SETTLE>\b",
    r"我们?(已经|最后|最终|还是)?(决定|确定|商定|约定|约好|敲定|说好|定下)",
    r"决定(用|采用|使用|把|了|在|先|不|改)|(?<![固稳锁限鉴规假否一])定(在|为|成)|定了.{2,}",
    r"(就|那就|统一|一律|最终)(用|选|定|订)|(改|换)(用|成)|选(了|定)|(推迟|提前|延期|改)到",
    r"(咱们|我们)[^，。！？,]{1,15}吧[。！!～~]*$",
)

PROJECTS = (
    r"\b(i'm|i am|i've been|we're|we are|we've been) (currently |now |still |also )?"
    r"(building|developing|maintaining|prototyping) (a|an|my|our|the|some)\b",
    r"\b(i'm|i am|i've been|we're|we are|we've been) (currently |now |still |also )?"
    r"(working on|writing|making|creating|designing) (a|an|my|our|the) (\w+ ){0,3}"
    r"(project|book|novel|app|tool|cli|library|plugin|extension|website|site|game|bot"
    r"|service|api|backend|frontend|server|script|framework|package|crate|sdk|dashboard"
    r"|platform|startup|business|thesis|paper|dissertation|course|blog|podcast|album|series"
    r"|newsletter|compiler|engine|pipeline|system)s?\b",
    r"\b<I> (maintain|develop) (a|an|the|my|our)\b",
    r"\b(my|our) (\w+ )?(project|side project|book|novel|thesis|startup|business|app|product"
    r"|codebase|repo|library)\b|\bthe project is (called|named)\b"
    r"|\bour (backend|frontend|api|service|stack|infra|site|website|database|db) (is|runs|uses"
    r"|lives)\b",
    r"项目|我们?(组|团队|公司)?(正在|现在|最近|目前|在)+(做|开发|写|搞|维护|构建|打造)"
    r"(一个|一款|一本|个|的)",
    r"我们?的(产品|应用|app|网站|服务|仓库|小程序|插件)|副业",
)

PREFERENCES = (
    # likes and dislikes; 怕 only of what one fears for good (怕冷, not 我怕这样会出错)
    r"我们?(很|最|比较|更|也|特别|非常|一直|还是|真的|实在|超|挺|一向|向来)*(喜欢|爱吃|爱喝|爱用"
    r"|偏好|偏爱|习惯|讨厌|受不了|反感|怕(冷|热|晒|吵|辣|累|人多|挤|晕车|坐车))"
    r"|我(不太|不大|真不|实在不|再也不|不)(喜欢|吃|喝|用|爱)|我(不太|不大)想|我(不想再|再也不想)",
    # diets in passing ("我一点辣都不能吃", "我最近在控制碳水")
    r"我[^，。,]{0,6}((不能|不敢|没法|不会)(吃|喝)|吃不了|喝不了)"
    r"|我们?(最近|现在|一直|今年|目前|平时)*(在|正在)?(控制|戒|少吃|不碰|忌)了?(碳水|糖|甜食"
    r"|咖啡|酒|烟|肉|油|盐|零食|体重|饮食|热量|主食|辣)"
    r"|我们?(最近|现在|一直|今年|目前)*(在|正在)(减肥|戒烟|戒酒|戒糖)",
    # times of day ("我早上十点之前基本是废的") and budgets ("把开销控制在三百块以内")
    r"我们?(每天|平时|一般|通常|基本上?)?(早上|上午|中午|下午|晚上|夜里|半夜|凌晨)"
    r"[零一二两三四五六七八九十\d:：]+点半?(之前|以前|之后|以后|前|后|就|才|左右|到)"
    r"|我[^，。,]{0,12}(开销|花销|开支|预算|花费|支出|消费|花钱)[^，。,]{0,8}(控制在|不超过|别超过"
    r"|限制在|保持在|在)[^，。,]{0,10}(以内|以下|之内|左右)|我的?预算(是|在|大概|只有|不超过)",
    # standing requests: how the person wants to be answered, from now on
    r"请(用|以)(中文|英文|英语|简体|繁体|日语|日文|markdown|表格|列表|要点)"
    r"|(以后|今后|从现在(开始|起))(都|请|就|一律|统一|别|不要)",
    # tools and habits
    r"我们?(团队|公司|组里)?(平时|一般|通常|主要|日常|现在|目前|都|也|一直|只|还是)*用(的是)?"
    r"\s*([A-Za-z]|飞书|钉钉|企业微信|微信|语雀|腾讯文档|石墨|云效)|我们?.{0,6}用的是"
    r"|我的(编辑器|IDE|系统|电脑|笔记本|手机|终端|技术栈|主力)"
    r"|我们?(每天|每周|每晚|每天早上|每个?月|平时|一般|通常|经常|总是|从不|从来不|很少)"
    r"|我(吃|喝)[^，。,]{1,6}(不|从不|只|总|都)",
    r"\b<I> (really |also |absolutely |totally |just |still |both |all |much |honestly )?"
    r"(like|love|loved|enjoy|adore|prefer|hate|dislike|can't stand|can't bear|cannot stand"
    r"|loathe|detest)\b|\b(i'm|i am) (really |just |honestly )?(not (a (big |huge )?fan of|into"
    r"|keen on|big on)|(terrified|scared|afraid) of)\b",
    r"\bmy (\w+ )?(kids|children|son|daughter|family|fam|husband|wife|partner|dogs?"
    r"|cats?) (really |also |all )?(loves?|likes?|enjoys?|adores?|hates?)\b",
    r"\bi (don't|can't|cannot) (like|eat|drink|use|tolerate|digest)\b"
    r"|\bi'd (\w+ )?(rather|prefer)\b|\bmy favou?rite\b|\bi find \w+ing\b",
    # diets in passing ("I'm trying to stay low-carb"), times of day ("I'm useless before
    # 10 am", "I sleep from about 9 am to 4 pm") and budgets ("keep any extra spending under $50")
    r"\b<I>('m| am|'re| are) (\w+ )?trying to (stay|eat|go|be|keep) (\w+ )?(low-carb|low carb|keto"
    r"|vegan|vegetarian|plant-based|sugar-free|gluten-free|dairy-free|sober|dry)\b"
    r"|\b(i'm|i am) on (a|the) (\w+ )?diet\b",
    r"\b(i'm|i am) (usually |always |never |often |normally |generally |basically |just |pretty )*"
    r"(useless|hopeless|dead|a zombie|up|awake|asleep|in bed|at (my )?(best|worst|sharpest)"
    r"|most productive|productive|at work|free|busy) (before|after|until|from|at|by|around) <TIME>"
    r"|\bi (usually |always |normally |generally |never )?(sleep|wake up|get up|go to bed|work out"
    r"|exercise|train|start work|finish work|get home) (\w+ )?(from|at|until|before|after|by"
    r"|around) <TIME>",
    r"\bmy (\w+ )?(budget|price range|spending limit) (is|'s)\b|\b<I>('m| am|'re| are)? (\w+ ){0,3}"
    r"(keep|keeping|stay|staying|spend|spending|budget|limit|cap)( [\w'-]+){0,4} (under|below"
    r"|within|less than|no more than|at most|to) (a |about |around |roughly )?<MONEY>",
    r"\bplease (always|never)\b|\b(always|never) (answer|reply|respond|write|use|add|put)\b"
    r"|\b(answer|reply|respond|talk|write) (to me )?in (english|chinese|french|german"
    r"|spanish|japanese|markdown|bullet points)\b|\b(from now on|going forward)\b",
    r"\b(i'm|i am|i've been) (really )?(a (big |huge )?fan of|into|passionate about"
    r"|interested in)\b",
    r"\b<I> (mostly |mainly |primarily |only |usually |always |still |now |also |just )*"
    r"(uses?|code in|write|program in)\b|\b(i'm|i am|we're|we are) (now |currently "
    r"|still |mostly )?using\b|\b(i'm|i am) on (a )?(mac|macos|windows|linux|ubuntu|arch"
    r"|debian|fedora|wsl|iphone|android)\b|\bi run (arch|ubuntu|debian|fedora|linux|windows"
    r"|macos|nixos|gentoo|mint)\b|\bi (drink|eat) (\w+ ){0,3}(coffee|tea|meat|fish|sugar|dairy"
    r"|breakfast|alcohol)\b",
    r"\bmy (editor|ide|shell|terminal|os|laptop|setup|stack|font|theme|keyboard|browser)"
    r"( of choice)? (is|'s)\b",
    r"\b<I> (usually|always|often|never|rarely)\b",
    r"\bi've been \w+ing (\w+ ){0,2}for ((\w+ )?(years|ages|decades)|a long time|\d+|a few"
    r"|most of)\b",
    r"\b<I> (\w+ ){1,6}(every (day|morning|evening|night|week|weekend)|once a (week|month)"
    r"|each (day|week))\b",
)

FACTS = (
    # names and roles
    r"我叫|叫我.{1,6}(就行|就好|即可)|我姓|我是(一名|一个|一位|个)?[^说不吗觉得想要会在]"
    r"|我(目前|现在)?在(?!做|写|开发|搞|学|用|想|看|找|考虑|弄|忙|准备|打算|提前|努力|尽量|好好"
    r"|慢慢)[^，。,]{1,12}(做|当|负责|任职|工作|上班|读书|上学|实习)|我负责|我的工作是|我从事",
    r"\bmy name('s| is)\b|^\W*name's\b|\b(i'm|i am) <NAME>(?=\s*([,.!;]|$|and\b|from\b"
    r"|here\b|by\b))|\bcall me <NAME>",
    r"\b(i'm|i am) an? (?!(bit|little|tad|lot|mess|wreck|fan)\b)|\bi work (at|for|as|in|on|nights"
    r"|night shifts|early shifts|late shifts|weekends|from home|remotely|part-time|full-time)\b"
    r"|\b(i'm|i am) the (\w+ ){0,2}(lead|manager|owner|maintainer|founder|cto|ceo|head"
    r"|author|admin|developer|engineer|designer|pm)\b|\bi (lead|manage|run) (a|an|the|our)\b",
    # home, origin, family, health
    r"我住在|我来自|我老家|我的(?![^，。,是叫]{0,8}?(问题|疑问|意思|想法|需求|任务|建议|看法|理解"
    r"|代码|报错|错误|情况|回答|答案|意见))[^，。,是叫]{0,8}(是|叫)"
    # family, named or not ("我妹妹陈悦过段时间要从哈尔滨来")
    r"|我的?(女儿|儿子|孩子|老婆|妻子|丈夫|老公|爱人|妈妈|爸爸|父母|哥哥|姐姐|弟弟|妹妹|表哥|表姐"
    r"|表弟|表妹|堂哥|堂姐|堂弟|堂妹|奶奶|爷爷|外婆|外公|男朋友|女朋友|室友)[\u4e00-\u9fff]{0,3}?"
    r"(叫|是|在|今年|要从|从|住在|过段时间|下周|下个?月|明年|刚|最近)"
    r"|我对.{1,10}过敏|我今年.{1,4}岁|我(是)?在[^，。,]{1,8}(长大|出生)"
    # what they own: 我们家只有一辆车 (not 我有一个问题), 我家的猫年糕
    r"|我们?家?(只|也|还|就|一共)?有(一|两|三|四|五|[0-9])(个|只|条|辆|台|套|部|间|位|所)"
    r"(?!小?(问题|疑问|想法|建议|需求|任务|请求|事|bug|报错))"
    r"|我(家|养)的(猫|狗|猫咪|狗狗|兔子|鹦鹉|仓鼠|乌龟|小猫|小狗)",
    r"\bmy (\w+ )?(timezone|time zone|email|github|handle|username|birthday|role|title|job|team"
    r"|company|employer|pronouns|native language|first language|mother tongue|hometown)"
    r" (is|'s)\b|\b<I> live in\b|\b(i'm|i am) based in\b|\b(i'm|i am) in (?-i:[A-Z])",
    r"\b(i'm|i am) (originally )?from\b|\bi (was born|grew up)\b",
    r"\b(i'm|i am) (married|divorced|single|engaged|pregnant|retired|vegan|vegetarian"
    r"|allergic|left-handed|colorblind|\d{1,2}( years old)?\b)",
    # diets: "I've been vegetarian for about six years now", 我吃素已经六年了
    r"\b(i'm|i am|i've been|i have been) (strictly |mostly |fully )?(vegan|vegetarian"
    r"|pescatarian|gluten-free|lactose intolerant|diabetic|coeliac|celiac|teetotal|kosher"
    r"|halal)\b|我们?(一直|已经|从小|基本|平时|现在)?(吃素|吃全素|吃斋|是素食)",
    r"\bi (teach|study|research|coach)\b|我们?(正在|在|最近在)学"
    r"|\b(i'm|i am) (still |currently |now )?(volunteering|studying|learning|teaching|training"
    r"|living in|working (as|at|for|in)"
    r"|taking (a|an) (\w+ ){0,2}(class|course|lessons?))\b",
    r"\b<I>( only| also| still| just| now)?( have|'ve got| have got| own) (a|an|one|two|three"
    r"|four|\d+) (?!(lot|feeling|few|photo"
    r"|pic|question|quick|problem|issue|bug))",
    r"\bmy (\w+ )?(kids|children|son|daughter|husband|wife|partner|mom|dad|mother|father"
    r"|brother|sister|cousin|niece|nephew|grandma|grandpa|aunt|uncle|boyfriend|girlfriend"
    r"|roommate|flatmate|dogs?|cats?|puppy)( <NAME>)?"
    r" (also |just |recently )?(is (a|an|named|called|coming|visiting|moving|staying|starting"
    r"|getting|turning|flying)|was (a|an|born)|named|called|works"
    r"|worked|lives|lived|has|had|got|started|turned|passed|died|moved|graduated|went"
    r"|is allergic"
    r"|took|made)\b",
    r"\bmy (\w+ )?(dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|tortoise|turtle|horse"
    r"|budgie|guinea pig) <NAME>",
    # plans: a fact about the person, not a decision
    r"我们?(在|正在)?(打算|准备(?!好)|计划|预计|安排了)|我们?.{0,4}(下周|下个?月|明天|后天|明年|月底"
    r"|年底|周末)(要|得|去)|(下周|明天|后天|下个?月|明年|周末|月底|年底)[一二三四五六日天]?我们?(要|得)",
    r"\b<I>('m| am|'re| are)? (planning|plan|intend|aim) (to|on|a|an|for)\b"
    r"|\b<I>('m| am|'re| are) (going|heading|flying|moving|traveling|travelling) to"
    r" ((a|an|the|my|our)\b|(?-i:[A-Z]))",
    # dates: a day that was set
    r"(截止|上线|发布|部署|迁移|交付|面试|考试|生日|婚礼|航班|会议|评审|答辩|演示|提交|入职|离职|出发|回国"
    r"|预产期|deadline|ddl|发版|封版|验收|体检|手术)(日期|时间|日)?.{0,6}(是|在|为).{0,6}<DATE>",
    r"\b(the|our|my) (\w+ )?(deadline|launch|release|demo|due date|go-live|interview|flight"
    r"|appointment|exam|wedding|birthday|anniversary|surgery|move|conference|talk"
    r"|presentation|review|cutover|migration|deploy|deployment|kickoff|trip|vacation)"
    r"( date| day)? (is|was|'s)\b.{0,25}<DATE>",
    # events: what they did, in the past tense
    r"我.{0,6}(搬到|搬去|养了|毕业于|出生在|出生于)"
    r"|我们?(今天|昨天|前天|今早|今晚|早上|上午|中午|下午|晚上|刚才|刚刚|刚|这周末?|上周末?|周末|上个?月"
    r"|去年|最近|已经|终于|又|也|还|一起)*(去了(?!解)|去过|参加了|开始了|换了|买了|订了|点了|叫了|吃了"
    r"|报了|考了|拿到了|结婚|离婚|(读|看|学|跑|做|写|练)完"
    # went somewhere to do something: 去岩馆爬了, 去吃了 (not 我去睡了: going to sleep)
    r"|去(?!年)[\u4e00-\u9fff]{0,5}?(吃|喝|爬|攀|玩|看|逛|打|跑|游|滑|骑|买|练)[\u4e00-\u9fff]{0,4}?了)",
    r"\b<I> (just |recently |finally |also )?(moved|adopted|started|joined|went|ran|took"
    r"|visited|attended|bought|finished|graduated|won|volunteered|signed up|painted|built"
    r"|wrote|published|launched|opened|lost|quit|traveled|travelled|learned|organized"
    r"|accepted|told|recorded|booked"
    r"|got (a|an|my|our|another|married|engaged|divorced|promoted|hired|accepted|picked"
    r"|selected|elected|back from)|tried (?!to)|made (?!(a |an )?(\w+ )?(difference"
    r"|impact)))(?!')\b",
)

CUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (MemoryType.DECISION, DECISIONS),
    (MemoryType.PROJECT, PROJECTS),
    (MemoryType.PREFERENCE, PREFERENCES),
    (MemoryType.FACT, FACTS),
)


def _filled(pattern: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        pattern = pattern.replace(placeholder, value)
    return pattern


_CUES = [(kind, re.compile(_filled("|".join(parts)), re.IGNORECASE)) for kind, parts in CUES]

# --- what is not a statement about the speaker -----------------------------------------------
# Whole sentences, once their asides (questions, courtesies) are cut out:
SENTENCE_REJECT = (
    # a condition or an example makes every clause a supposition ("If we have time, let's
    # book the ryokan"; "如果下雨，我们就改到周日"); a text handed over to be worked on holds
    # someone else's words
    r"\b(if|unless|in case|suppose|supposing|assuming|imagine|hypothetically|for example"
    r"|e\.g\.|translate|rewrite|rephrase|paraphrase|proofread|summari[sz]e)\b"
    r"|^\W*(when|whenever)\b|如果|要是|假如|假设|万一|的话|比如|例如|譬如|翻译|改写|润色",
    # the other person, and requests to them: a clause about "you" colours the rest ("Taking
    # care of yourself helps - I learned that the hard way")
    r"\b(you|your|yours|yourself|u|ya)\b|[你您]|帮我|请帮|麻烦",
    # leaning on what the listener sees or was just told: nothing to stand alone
    # ("these days" and "this week" say when, not what)
    r"^\W*(it|it's|its|they|they're|they've|(this|these)(?! (days|morning|afternoon|evening"
    r"|week|weekend|month|year)\b)|that|that's|those|here|here's|there"
    r"|there's|he|she|his|her|check|look|take a look|seeing|hearing|reminds?|reminded)\b",
    r"\b(here's|here is|check (it |this |them )?out|take a look|look at|similar)\b",
    r"\b(this|that|these|those) (\w+ )?(place|spot|quote|one|pic|photo|picture|shot|image"
    r"|thing|things|stuff|event|animals|people)\b",
    r"\bthe \w+( and \w+)? it \w+s\b",  # "I love the freedom it brings": what brings it?
    r"\bthere\b(?!('s| is| are| was| were))|\b(to|here)\W*$",
    r"\b(love|loved|like|enjoy|adore|made|got|took|did|bought|painted|finished|tried|use)"
    r" (it|them)\b",
    r"\b(love|loved|like|enjoy|adore|made|got|took|did|bought|painted|finished|tried|\w+ing)"
    r" (it|them|one|this|that|these|those)\b(?=\s*([,.;!–—-]|$|(a few|an|the|after|because"
    r"|when|with|for|at|in|last|yesterday|and|but|so|to|from|on|together|again|too)\b))",
    r"\b(love|loved|like|enjoy) (that|this|how|what|when|seeing|hearing|reading about|the way"
    r"|their|his|her|its|all the)\b",
)
# One clause at a time: the rest of the sentence may still be a statement ("I'm vegan, but I
# might try fish").
CLAUSE_REJECT = (
    # questions
    r"[?？]|^\W*(what|how|why|where|when|who|which|whose|did|do|does|are|is|was|were|have"
    r"|has|had|can|could|would|will|should|shall|am|any|anyone|anybody)\b|(?<!不算)(?<!没)什么(?![都也])|(?<!不)怎么|怎样|如何"
    r"|为什么|为啥|哪|谁|多少|多久|(?<![住玩待过前这好])几(个|点|号|天|时)|是否|能不能|可不可以|可以吗|有没有|要不要"
    r"|是不是|行不行|对不对|好不好|[吗呢][。！!～~]*$",
    # wishes, guesses, obligations, the open future; undecided choices
    # ("can't stand", "can't eat" and "trying to stay low-carb" state what holds)
    # ("I can spend about $600" is a limit, not a possibility)
    r"\b(would|could|can(?!'t| (spend|afford|go (up )?to) (up to |about |around )?<MONEY>)"
    r"|(can't|cannot)(?! (stand|bear|eat|drink|tolerate|digest))"
    r"|might|maybe|perhaps|wish|hope|hoping|someday|probably|should|gonna|wanna|want|wants"
    r"|wanted|thinking (of|about)|won't|need to|have to|trying to(?! (stay|eat|go|be|keep)\b)"
    r"|considering|wondering|not yet|undecided|not sure|unsure)\b"
    r"|\b(haven't|have not|hasn't|didn't|did not) (yet )?(decided?|chosen|choose|picked|pick"
    r"|settled|made up)\b|\b(i|we)'d\b(?! (\w+ )?(rather|prefer))"
    r"|\b(i'll|we'll|i will|we will)\b(?! <SETTLE>\b)"
    r"|\bgoing to\b(?! ((a|an|the|my|our)\b|(?-i:[A-Z])|<SETTLE>\b))"
    r"|也许|可能|大概|希望|我想|想要|(好|很|有点|真|特别|超|挺)想|我会|会不会|考虑|纠结|犹豫|不知道|不确定|还没|没(有)?决定"
    r"|未定|待定|试试"
    # "我要" is a request ("我要一个脚本") unless a time makes it a plan ("下周二我要出差")
    r"|^((?!下周|明天|后天|下个?月|明年|周末|月底|年底|今晚|明早).)*我要",
)
# A sentence whose first piece ends on a pointer ("I love it", "I painted that") leans on what
# the listener sees; after a comma the pointer may name what came before it ("I'm allergic to
# peanuts, so anything food-related needs to work around that").
_ENDS_ON_A_POINTER = re.compile(r"\b(it|this|that|them|those|these)\W*$", re.IGNORECASE)
_SENTENCE_REJECT = re.compile("|".join(SENTENCE_REJECT), re.IGNORECASE)
_CLAUSE_REJECT = re.compile(_filled("|".join(CLAUSE_REJECT)), re.IGNORECASE)
# Weighing a choice of its own ("在商量要不要住在一起"): undecided itself, it leaves the clause
# before it standing, where a hedge ("还没决定", "可能吧") takes it back.
_DELIBERATION = re.compile(
    r"(我们|我)?(在|正在|还在|一直在)?(商量|讨论|考虑|纠结)着?(要不要|是否|该不该)"
)
# Asides, cut out of a sentence before it is judged: a question ("I'm building a CLI in Rust,
# any tips?") and courtesies ("Hi, I'm Dana, nice to meet you!").
_ASIDE = re.compile(
    r"[?？]|[吗呢][。！!～~]*$|\b((nice|good|great|glad|pleased) to meet you|thanks?( you)?"
    r"( so much| a lot)?( for (your|the) help)?)\W*$|很高兴认识(你|您)|认识(你|您)很高兴"
    r"|请多(多)?指教|谢谢(你|您)?[。！!～~]*$"
    # an apology for oneself ("Sorry if I'm slow today", 不好意思今天反应有点慢)
    r"|^\W*(sorry|apologies)\b|^(不好意思|抱歉|对不起)",
    re.IGNORECASE,
)

# Words that may come before "I"/"we"/"my" in a clause about the speaker ("Last week I went");
# any other word there makes the cue part of a clause about something else ("people we love").
_OPENERS = re.compile(
    r"(\W*(so|and|but|also|now|then|actually|oh|well|yeah|yes|yep|wow|btw|fyi|plus|sadly"
    r"|luckily|thankfully|honestly|anyway|guess|what|last|this|past|next|a|few|couple|of|ago"
    r"|since|finally|just|recently|lately|yesterday|today|tonight|week|weekend|month|year|night"
    r"|morning|afternoon|evening|summer|winter|spring|fall|two|three|days|weeks|months|years"
    r"|for the record|for context|heads up( that)?|quick note|update|ok|okay|alright|cool|great"
    r"|(mon|tues?|wed(nes)?|thu(rs)?|fri|sat(ur)?|sun)(day)?)\b)*\W*",
    re.IGNORECASE,
)

# Words that date a statement from when it was said.
RELATIVE_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|recently|lately|just|ago|soon|currently|now"
    r"|nowadays|these days|the other day|upcoming|since we last \w+"
    r"|(mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|(this|last|next|past) (morning|afternoon|evening|night|week|weekend|month|year|spring"
    r"|summer|fall|autumn|winter|few|quarter|sprint))\b"
    r"|昨天|今天|明天|前天|后天|前几天|最近|刚才|刚刚|刚|上周|上星期|上个月|下周|下个?月|去年|今年|明年"
    r"|这周|本周|这个月|本月|现在|目前|今晚|明晚|周末|月底|月初|年底|过段时间|过几天|过阵子|(?<!每)(周|星期|礼拜)[一二三四五六日天]",
    re.IGNORECASE,
)

# --- from a message to its statements ---------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[。！？；\n])\s*|(?<=[.!?;])\s+")
# Pasted material: fenced code and quoted lines are not the person's words.
_FENCED = re.compile(r"```.*?(```|\Z)", re.DOTALL)
_QUOTE_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
# LoCoMo appends an image's caption to the turn; it is not the speaker's words.
_IMAGE_CAPTION = re.compile(r"\s*\[image: [^\]]*\]")
# A greeting or a thanks before a statement says nothing about the speaker, and its "you"
# ("Thank you, I'm vegan", "你好，我叫小王") must not sink the statement.
_GREETING = re.compile(
    r"^(((hi|hey|hello|hiya|howdy|good (morning|afternoon|evening))( there| all| everyone"
    r"| folks| team)?( (?-i:[A-Z][a-z]+))?|thanks|thank you|thx|ok|okay)([,!.~]+\s*|\s+)"
    r"|(你好|您好|大家好|嗨|哈喽|早上好|下午好|晚上好|谢谢(你|您)?|多谢|好的|嗯|对了)[,!.，！。~～\s]*)+",
    re.IGNORECASE,
)
# Quoted words are someone's text ("写一句“我喜欢猫”"), not the speaker's statement. (Single
# quotes are left alone: ’ is also an apostrophe, as in "I’m".)
_QUOTED = re.compile(r"[\"“「『][^\"”」』]*[\"”」』]")
# Where a sentence may fall into clauses (not at a dash: what follows one elaborates), and what
# begins one: the speaker as a subject, or the listener.
_SEPARATOR = re.compile(r"\s*[,，;；]\s*")
# The words that join a clause to the one before it ("but I hate crowds", "而且我不吃辣").
_JOINING_EN = r"and|but|so|also|plus|though"
_JOINING_ZH = r"而且|但是?|不过|并且|另外|还有|所以|然后|因此"
_STATEMENT_START = re.compile(
    rf"^(({_JOINING_EN}) )?(i|we|my|our|let's|let us|you|your)\b"
    rf"|^({_JOINING_ZH})?(我|咱们|请|帮我|麻烦|你|您)",
    re.IGNORECASE,
)
# A statement stands alone as a memory: without the word that joined it to the clause before
# ("我对花生过敏，另外我下个月要去成都出差" gives "我下个月要去成都出差").
_JOINED = re.compile(
    rf"^({_JOINING_EN}),?\s+(?=(i|we|my|our)\b)|^({_JOINING_ZH})[,，]?\s*(?=我|咱们)",
    re.IGNORECASE,
)
_AND_I = re.compile(r"\s+(and|but|so|plus)\s+(?=(i|we|let's)\b)", re.IGNORECASE)
# "My partner and I went": the "and I" ends a compound subject, not a clause.
_COMPOUND_SUBJECT = re.compile(
    _OPENERS.pattern + r"((my|our|his|her|the|a|an|both)( \w+){1,2}|me|(?-i:[A-Z][a-z]+))\s*",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_THIRD_PERSON = re.compile(r"\b(he|she|him|her|his|them)\b|[他她]", re.IGNORECASE)
# What a pronoun may point back to: "my mom", "the kids", "a friend", a name.
_ANTECEDENT = re.compile(
    r"\b(my|our|the|a|an)\s+\w|[\u4e00-\u9fff]{2}"
    r"|(?<=\w )(?!(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b)[A-Z][a-z]+"
)


def sentences(text: str) -> list[str]:
    """Split after 。！？； or a newline, and after .!?; followed by a space (not in "3.5")."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _without_greeting(sentence: str) -> str:
    return _without(_GREETING, sentence)


def _without(opening: re.Pattern[str], text: str) -> str:
    """The text without what `opening` matches at its start, capitalised again."""
    rest = opening.sub("", text, count=1)
    return rest[:1].upper() + rest[1:] if rest != text else text


def _pieces(sentence: str) -> list[tuple[int, int]]:
    """The spans between commas, semicolons and dashes."""
    spans, start = [], 0
    for separator in _SEPARATOR.finditer(sentence):
        spans.append((start, separator.start()))
        start = separator.end()
    spans.append((start, len(sentence)))
    return [(s, e) for s, e in spans if e > s]


def _split_at_and_i(sentence: str, start: int, end: int) -> list[tuple[int, int]]:
    """ "I use Neovim and I prefer tabs" is two statements; "my partner and I went" one."""
    spans = []
    for joint in _AND_I.finditer(sentence, start, end):
        if not _COMPOUND_SUBJECT.fullmatch(sentence[start : joint.start()]):
            spans.append((start, joint.start()))
            start = joint.end()
    return [*spans, (start, end)]


Span = tuple[int, int]  # a clause's place in its sentence: start, end


def clause_spans(sentence: str) -> list[Span]:
    """Where the sentence's clauses are: a piece that starts with the speaker or the listener
    starts a clause, an aside (a question, a courtesy) or a deliberation with its own object
    ("在商量要不要住在一起") is a clause of its own, and any other piece continues the clause
    before it ("我叫小明，住在北京" stays one; "搬到杭州了，还没决定" stays undecided). An
    opening piece of time or filler words joins the clause after it ("Last week, I went..."
    keeps its time).
    """
    spans: list[Span] = []
    after_aside = False  # the last piece's, not its whole clause's: a long run stays linear
    for start, end in _pieces(sentence):
        piece = sentence[start:end]
        aside = bool(_ASIDE.search(piece) or _DELIBERATION.match(piece))
        if spans and not after_aside and not aside and not _STATEMENT_START.search(piece):
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        after_aside = aside
    if len(spans) > 1 and _is_opener(sentence[spans[0][0] : spans[0][1]]):
        spans[:2] = [(spans[0][0], spans[1][1])]
    return [part for start, end in spans for part in _split_at_and_i(sentence, start, end)]


def _text(sentence: str, span: Span) -> str:
    return sentence[span[0] : span[1]].strip().rstrip(",，;；")


def _is_opener(piece: str) -> bool:
    if _CJK.search(piece):
        return RELATIVE_TIME.sub("", piece).strip() in ("", "其实", "说实话", "顺便说一下")
    return _OPENERS.fullmatch(piece) is not None


def speaker_name(message: MainMessage) -> str | None:
    """The person named in the metadata ("speaker", or OpenAI's "name"), if any."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    for key in ("speaker", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


# Speaker names that name the AI's role, not a person: a client or a data set that labels the
# agent's turns "Assistant" (agent_sessions does, and 助手) still means the AI. Compared
# without case and spaces ("AI 助手").
AI_SPEAKERS = frozenset(
    {
        "assistant",
        "ai",
        "aiassistant",
        "bot",
        "chatbot",
        "助手",
        "ai助手",
        "智能助手",
        "助理",
        "机器人",
    }
)


def speaks_for_a_person(message: MainMessage) -> bool:
    """The user always; an assistant only when `metadata.speaker` names a person (LoCoMo:
    both sides of the conversation are people), not the role (AI_SPEAKERS).

    Any other assistant is the AI itself, even named (OpenAI's "name" names the bot): what it
    says is not a fact about the user, and what it repeats of the user's words ("I'll
    remember that you prefer tabs") already made the user's memory.
    """
    if message.role == Role.USER:
        return True
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    speaker = metadata.get("speaker")
    if message.role != Role.ASSISTANT or not isinstance(speaker, str):
        return False
    name = "".join(speaker.split()).casefold()
    return bool(name) and name not in AI_SPEAKERS


def _long_enough(clause: str) -> bool:
    """In Chinese, a Latin word counts as two characters, as a two-character word would
    ("就用 Postgres 吧", "我用 Vim")."""
    if _CJK.search(clause):
        latin_words = len(re.findall(r"[A-Za-z0-9][\w.+#-]*", clause))
        return len(_CJK.findall(clause)) + 2 * latin_words >= MIN_CJK_CHARS
    return len(clause.split()) >= MIN_WORDS


def _opens_the_clause(clause: str, start: int) -> bool:
    """Whether the cue at `start` begins the clause, after openers only (English only)."""
    before = clause[:start]
    if not before.strip() or _CJK.search(clause) or re.search(r"[,;:–—-]\s*$", before):
        return True
    return _OPENERS.fullmatch(before) is not None


def _dangling_pronoun(sentence: str) -> bool:
    """A he, she or them with nobody named before: "I visited her old house" (whose?).

    "they" is left alone: it mostly points back to a plural noun ("cats, and they...").
    """
    pronoun = _THIRD_PERSON.search(sentence)
    return pronoun is not None and not _ANTECEDENT.search(sentence[: pronoun.start()])


def _normalised(text: str) -> str:
    """Curly apostrophes as straight ones ("I’m"), quoted words blanked out."""
    return _QUOTED.sub('"…"', text.replace("’", "'").replace("‘", "'"))


def _leans_elsewhere(texts: list[str]) -> bool:
    """Whether the sentence (its clauses) is not about the speaker as a whole: a condition, the
    listener, something only the listener sees, a pronoun nobody was named for."""
    whole = _normalised(" ".join(texts))
    return (
        any(_SENTENCE_REJECT.search(_normalised(text)) for text in texts)
        or bool(texts and _ENDS_ON_A_POINTER.search(_SEPARATOR.split(texts[0])[0]))
        or _dangling_pronoun(whole)
    )


def _cue(text: str) -> str | None:
    """The type of the first cue that opens the text, if any."""
    text = _normalised(text)
    if not _long_enough(text):
        return None
    for kind, cue in _CUES:
        if any(_opens_the_clause(text, m.start()) for m in cue.finditer(text)):
            return kind
    # A value of one of the person's attributes is a fact without a cue: "Now that home is
    # Berlin", 现在在字节跳动上班 (memory.attributes).
    return MemoryType.FACT if attributes.said(text) else None


def classify(clause: str) -> str | None:
    """The memory type of one clause about its speaker, or None when it is not one."""
    if _leans_elsewhere([clause]) or _CLAUSE_REJECT.search(_normalised(clause)):
        return None
    return _cue(clause)


def _runs(sentence: str, spans: list[Span]) -> list[list[Span]]:
    """The clauses in runs that no aside or rejected clause ("I might") interrupts."""
    runs: list[list[Span]] = [[]]
    for span in spans:
        text = _text(sentence, span)
        if _ASIDE.search(text) or _CLAUSE_REJECT.search(_normalised(text)):
            runs.append([])
        else:
            runs[-1].append(span)
    return [run for run in runs if run]


def statements(sentence: str) -> list[tuple[str, str]]:
    """Each statement of the sentence about its speaker, with its type.

    Clauses that each hold a cue are statements of their own ("我叫小王，我是后端工程师"). A
    clause without a cue is context the others lean on ("I had a day out with the gang last
    weekend, we went biking": who "we" are, and when), so its run stays one statement.
    """
    sentence = _without_greeting(sentence)
    spans = clause_spans(sentence)
    said = [_text(sentence, span) for span in spans]
    if _leans_elsewhere([text for text in said if not _ASIDE.search(text)]):
        return []
    found = []
    for run in _runs(sentence, spans):
        if len(run) > 1 and any(_cue(_text(sentence, span)) is None for span in run):
            run = [(run[0][0], run[-1][1])]
        for span in run:
            text = _text(sentence, span)
            kind = _cue(text)
            if kind is not None:
                found.append((kind, _without(_JOINED, text)))
    return found


def _date(message: MainMessage) -> str | None:
    when = message.timestamp
    return day_label(when) if isinstance(when, datetime) else None


def memory_text(statement: str, message: MainMessage) -> str | None:
    """The statement, standing alone: "[date] speaker: statement"; None if it cannot be
    dated."""
    prefix = []
    if RELATIVE_TIME.search(statement):
        date = _date(message)
        if date is None:
            return None  # "yesterday" with no date would be a false claim later
        prefix.append(f"[{date}]")
    name = speaker_name(message)
    if name:
        prefix.append(f"{name}:")
    return " ".join([*prefix, statement])[:MEMORY_CHARS]


def _said(message: MainMessage) -> str:
    """The message's own words: without pasted code, quoted lines and image captions."""
    text = _QUOTE_LINE.sub("", _FENCED.sub("\n", message.content))
    return _IMAGE_CAPTION.sub("", text)


def extract_with_sources(
    messages: Iterable[MainMessage],
) -> list[tuple[Extracted, list[MainMessage]]]:
    """Each memory with the messages it came from: one per distinct text, its first wording
    kept, with every message that said it (the first first)."""
    found: dict[str, tuple[Extracted, list[MainMessage]]] = {}
    for message in messages:
        if not speaks_for_a_person(message):
            continue
        for sentence in sentences(_said(message)):
            for kind, statement in statements(sentence):
                text = memory_text(statement, message)
                if text:
                    key = re.sub(r"[\W_]+", "", text.lower())
                    _, sources = found.setdefault(key, (Extracted(kind, text), []))
                    if message not in sources:
                        sources.append(message)
    return list(found.values())


def offline_extract(messages: Iterable[MainMessage]) -> list[Extracted]:
    return [extracted for extracted, _ in extract_with_sources(messages)]
