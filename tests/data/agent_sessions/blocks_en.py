"""The English building blocks of agent_sessions, written by hand for orca-memory.

generate.py composes them: a user turn is a request of a topic, sometimes with one sentence
said in passing (a fact, a preference, an event); an assistant reply is an opener naming the
request, then tips of its topic and generic advice in paragraphs and lists, sometimes code or a
disclaimer, and a closer. `{...}` are filled from a persona's values.
"""

ASSISTANT = "Assistant"

# id, speaker, first session's date (year, month, day).
PERSONAS = [
    ("as-01", "Priya", (2026, 1, 5)),
    ("as-02", "Tom", (2026, 2, 2)),
    ("as-03", "Sofia", (2026, 1, 19)),
]

# The request as the assistant names it in its opener: "my" becomes "your".
PRONOUNS = [(r"\bmy\b", "your"), (r"\bI'm\b", "you're"), (r"\bI\b", "you"), (r"\bme\b", "you")]

# Days before the session an event happened -> how the user says it.
WHEN = {0: ["today", "this morning", "earlier today"], 1: ["yesterday", "yesterday evening"]}

OPENERS = [
    "Happy to help with {subject}.",
    "Good question about {subject}.",
    "Sure, let's work through {subject} together.",
    "Here's how I would approach {subject}.",
    "Let's look at {subject} step by step.",
    "Thanks for the details on {subject}, that makes it easier to give useful advice.",
    "Absolutely, {subject} is something a lot of people ask about.",
]

# A follow-up on the session's last request, as the user says it ({subject}: "my"), and the
# openers of the replies to follow-ups.
FOLLOW_UPS = [
    "Going back to {subject}: what are the most common mistakes people make?",
    "Following up on {subject}, what would you change if I only had half the time?",
    "One more question on {subject}: what should I do first this week?",
    "About {subject} again, could you sum it up in a few bullet points?",
    "For {subject}, is there anything I should avoid completely?",
    "Still thinking about {subject}. How would you adapt it for a tighter budget?",
    "On {subject}, what would a realistic first month look like?",
    "Regarding {subject}, which of your points matters most if I can only do one?",
]

# Requests about a question's subject ({theme}, as the user says it): a user comes back to
# the things in their life, so a question's words come up in many turns.
THEME_REQUESTS = [
    "Any tips for {theme}?",
    "What should I keep in mind about {theme}?",
    "Can you give me a short checklist for {theme}?",
    "What's a sensible first step with {theme} this week?",
    "I keep putting off {theme}. How do I get started?",
    "What do people usually get wrong about {theme}?",
]

FOLLOW_UP_OPENERS = [
    "Good follow-up on {subject}.",
    "Sure, here is a bit more on {subject}.",
    "Let's go a little deeper into {subject}.",
    "Building on what I said about {subject}, here are a few more thoughts.",
    "That's a sensible thing to ask next about {subject}.",
]

LIST_INTROS = [
    "A few things to keep in mind:",
    "Here's a short checklist:",
    "The main points, in rough order of importance:",
    "Some practical tips:",
    "What usually works well:",
]

CLOSERS = [
    "Let me know how it goes, and I can adjust the plan if anything changes.",
    "If you tell me a bit more about your schedule, I can make this more specific.",
    "Would you like me to turn this into a step-by-step plan for the next few weeks?",
    "Happy to go deeper on any of these points if you want.",
    "I hope this helps! Feel free to come back with follow-up questions.",
    "If you want, I can recommend a few alternatives that fit your budget too.",
]

DISCLAIMERS = [
    "As an AI language model, I can't see your full situation, so please treat this as general information rather than professional advice.",
    "I'm an AI, so I can't check prices, opening hours or availability in real time; please confirm the details before you book anything.",
    "Please note that I'm not a doctor, and if symptoms get worse or don't improve, it's worth talking to a medical professional.",
    "Just a disclaimer: I don't have access to your accounts or files, so double-check anything that depends on your exact setup.",
    "This isn't financial advice; rules and rates change, so check with a qualified adviser for decisions with real money at stake.",
]

# Generic advice an assistant adds to almost anything: it reuses the words later questions use
# (recommend, prefer, allergy, budget, how many times, the month, the weekend, a class).
GENERIC = [
    "It usually helps to start small and build a routine you can actually keep, rather than an ambitious plan you drop after two weeks.",
    "If you have any allergies or dietary restrictions, it's worth writing them down once so you don't have to repeat them every time.",
    "Many people find it easier to plan a week at a time, and to review on the weekend how many times they actually did what they planned.",
    "A budget doesn't have to be strict to be useful; even a rough monthly number helps you notice when something is drifting.",
    "When you're choosing between options, think about what you'd recommend to a friend in the same situation; it's often clearer from the outside.",
    "Keeping a short log, even two lines a day, makes it much easier to see patterns over a month or two.",
    "If your schedule changes a lot, plan around the parts that stay fixed, such as your commute, your work hours or a weekly class.",
    "It's fine to adjust as you go; the first version of any plan is mostly a way to find out what you actually prefer.",
    "People often underestimate how much sleep, stress and the season (February is hard for everyone) affect their energy.",
    "If something has worked for you before, start from that instead of copying someone else's routine wholesale.",
    "For anything involving other people, agree on the basics early: dates, costs and who is responsible for what.",
    "Try not to change too many things at once; if you change one thing at a time, you'll know what made the difference.",
    "Reviews and recommendations online are a useful starting point, but your own preferences matter more than the average rating.",
    "A reminder on your phone or a note on the fridge sounds trivial, but it's one of the most reliable ways to build a habit.",
    "If you're unsure, pick the option that is easiest to undo, and revisit the decision in a month.",
    "Time spent preparing usually pays off: ten minutes the evening before can save an hour of stress the next day.",
    "It can help to ask yourself how you'll feel about the choice a week from now, not just today.",
    "Small wins count; celebrating them makes it more likely you'll keep going when motivation dips.",
    "Try to leave some slack in any plan, because something unexpected always comes up, whether it's work, weather or family.",
    "If you share a home or a calendar with someone, a quick weekly check-in avoids most misunderstandings.",
    "It's worth checking what's included before you pay: delivery, cancellation terms, and whether there's a cheaper plan.",
    "Whatever you choose, write down why you chose it; future you will appreciate the context.",
    "Don't worry about getting it perfect. A decent plan that you follow beats a perfect plan that stays in a notes app.",
    "If you notice you're dreading something, that's useful information: maybe the plan needs to be smaller or more enjoyable.",
]

# Each topic: requests (text, subject for the opener, options for {x}), tips, code blocks.
TOPICS = {
    "travel": {
        "requests": [
            (
                "Can you help me plan {x} in Lisbon?",
                "planning {x} in Lisbon",
                ["a long weekend", "three days", "a week", "a day trip"],
            ),
            (
                "What should I pack for {x}?",
                "packing for {x}",
                ["a rainy city break", "a hiking weekend", "a beach holiday", "a business trip"],
            ),
            (
                "Any tips for finding cheap flights to {x}?",
                "cheap flights to {x}",
                ["Mexico City", "Rome", "Tokyo", "Reykjavik"],
            ),
            (
                "How do I deal with jet lag after flying to {x}?",
                "jet lag after a flight to {x}",
                ["Singapore", "Sydney", "Vancouver", "Cape Town"],
            ),
            (
                "Is it worth getting travel insurance for {x}?",
                "travel insurance for {x}",
                ["a two-week trip", "a ski trip", "a weekend away", "a family holiday"],
            ),
        ],
        "tips": [
            "Book the first and last nights of a trip early; the middle can stay flexible.",
            "Walking tours on the first day are a great way to get your bearings in a new city.",
            "Flights on Tuesdays and Wednesdays are often cheaper than at the weekend.",
            "Keep digital and paper copies of your passport and booking confirmations.",
            "Packing cubes make it much easier to live out of a suitcase for more than a few days.",
            "Try to get outside in daylight on your first morning; it helps reset your body clock.",
            "Local transport passes usually pay for themselves after two or three days.",
            "Leave one afternoon unplanned so you can go back to the place you liked most.",
            "Check whether your bank charges foreign transaction fees before you leave.",
            "If you have food allergies, carry a card in the local language that explains them.",
            "Neighbourhoods just outside the centre are often quieter and cheaper to stay in.",
            "Travel insurance matters most for medical costs and cancellations, not lost luggage.",
            "Download offline maps before you go; roaming data can be slow or expensive.",
            "Markets and bakeries are a cheap way to eat well while you explore.",
        ],
    },
    "cooking": {
        "requests": [
            (
                "Can you give me a simple recipe for {x}?",
                "a simple recipe for {x}",
                ["lentil soup", "a weeknight curry", "banana bread", "shakshuka"],
            ),
            (
                "How do I meal prep {x} for the week?",
                "meal prepping {x}",
                ["lunches", "breakfasts", "high-protein dinners", "snacks"],
            ),
            (
                "What can I make with {x}?",
                "ideas for {x}",
                ["leftover rice", "a bag of spinach", "canned chickpeas", "stale bread"],
            ),
            (
                "How do I get better at {x}?",
                "getting better at {x}",
                ["knife skills", "seasoning", "baking bread", "cooking without a recipe"],
            ),
            (
                "What's the best way to store {x}?",
                "storing {x}",
                ["fresh herbs", "cooked rice", "homemade soup", "cut avocado"],
            ),
        ],
        "tips": [
            "Season in layers: a little salt at each stage tastes better than a lot at the end.",
            "A sharp knife is safer than a dull one because it doesn't slip.",
            "Cooked rice should go into the fridge within an hour and be eaten within a day or two.",
            "Most soups and stews taste better on the second day, which makes them ideal for meal prep.",
            "Toasting spices in a dry pan for a minute brings out much more flavour.",
            "An acid at the end, like lemon juice or vinegar, brightens almost any dish.",
            "Keep a few pantry staples around: canned tomatoes, chickpeas, pasta, rice and stock.",
            "Herbs keep longer stood in a glass of water in the fridge, like flowers.",
            "If you're cooking for guests, ask about allergies and whether anyone is vegetarian.",
            "Batch-cooking grains on Sunday saves a lot of time on busy weekday evenings.",
            "An oven thermometer is cheap and shows how far off your oven's dial really is.",
            "Freeze soup in portions so you can take out exactly what you need.",
            "Read the whole recipe before you start; it avoids surprises halfway through.",
            "Don't crowd the pan when browning; food steams instead of getting crisp.",
        ],
    },
    "fitness": {
        "requests": [
            (
                "Can you suggest a {x} workout I can do at home?",
                "a {x} home workout",
                ["20-minute", "no-equipment", "core", "beginner strength"],
            ),
            (
                "How should I train for {x}?",
                "training for {x}",
                ["a 10K", "my first half marathon", "a charity hike", "a cycling sportive"],
            ),
            (
                "How do I stay motivated to {x}?",
                "staying motivated to {x}",
                ["exercise in winter", "go to the gym", "stretch every day", "run in the rain"],
            ),
            (
                "Is it bad to {x}?",
                "whether it's bad to {x}",
                [
                    "train every day",
                    "run on an empty stomach",
                    "skip rest days",
                    "lift weights twice a day",
                ],
            ),
            (
                "What should I eat {x}?",
                "what to eat {x}",
                ["before a long run", "after a workout", "on rest days", "before an early swim"],
            ),
        ],
        "tips": [
            "Increase your weekly running distance by no more than about ten percent.",
            "Rest days are when your body actually adapts to training, so don't skip them.",
            "A proper warm-up of five to ten minutes lowers the risk of strains.",
            "Strength training twice a week helps runners avoid common injuries.",
            "Sleep is the most underrated part of any training plan.",
            "If something hurts sharply rather than aches, stop and get it checked.",
            "A training buddy or a class makes it much harder to skip a session.",
            "Eat something with carbohydrates and a bit of protein within an hour or two after hard sessions.",
            "Track how many times you train each week rather than obsessing over single workouts.",
            "Mix easy and hard days; most of your training should feel comfortable.",
            "Good shoes matter more than expensive gadgets for most beginners.",
            "Stretching after exercise feels good, though the evidence on injury prevention is mixed.",
            "Drink water through the day rather than all at once before a workout.",
            "Set a goal with a date, like a race or a hike, to give your training a shape.",
        ],
    },
    "coding": {
        "requests": [
            (
                "How do I {x} in Python?",
                "how to {x} in Python",
                [
                    "read a CSV file",
                    "parse dates",
                    "retry a failing HTTP request",
                    "write a simple CLI",
                ],
            ),
            (
                "Can you explain {x} simply?",
                "an explanation of {x}",
                ["git rebase", "Docker volumes", "SQL joins", "async and await"],
            ),
            (
                "How should I structure {x}?",
                "structuring {x}",
                ["a small Flask app", "my unit tests", "a data pipeline", "a config file"],
            ),
            (
                "Why is my {x} so slow?",
                "why a {x} might be slow",
                ["SQL query", "pandas script", "Docker build", "test suite"],
            ),
            (
                "What's a good way to learn {x}?",
                "learning {x}",
                ["Rust", "TypeScript", "system design", "regular expressions"],
            ),
        ],
        "tips": [
            "Write a small failing test first; it tells you exactly when the bug is fixed.",
            "Profile before you optimise; the slow part is rarely where you expect.",
            "Keep functions short and give them names that say what they return.",
            "Commit small, focused changes with messages that explain why.",
            "An index on the column you filter by is the most common fix for a slow query.",
            "Read the error message from the bottom up; the last line usually names the real problem.",
            "Pin your dependencies so a new release doesn't break the build overnight.",
            "Use a virtual environment per project to keep dependencies separate.",
            "Type hints catch a surprising number of bugs before the code even runs.",
            "Logging with timestamps makes intermittent problems much easier to track down.",
            "Cache the expensive step of a Docker build by copying the requirements file first.",
            "Small side projects teach a new language faster than tutorials alone.",
            "Retries should back off exponentially so they don't hammer a struggling server.",
            "Code review is easier when each pull request does one thing.",
        ],
        "code": [
            '```python\nimport csv\n\nwith open("data.csv", newline="", encoding="utf-8") as f:\n    for row in csv.DictReader(f):\n        print(row["name"], row["amount"])\n```',
            '```python\nimport time\n\nimport httpx\n\n\ndef get_with_retry(url: str, attempts: int = 4) -> httpx.Response:\n    for attempt in range(attempts):\n        try:\n            return httpx.get(url, timeout=10).raise_for_status()\n        except httpx.HTTPError:\n            time.sleep(2 ** attempt)\n    raise RuntimeError(f"{url} kept failing")\n```',
            "```sql\nCREATE INDEX idx_orders_customer ON orders (customer_id);\nEXPLAIN QUERY PLAN\nSELECT * FROM orders WHERE customer_id = 42;\n```",
            "```bash\ngit fetch origin\ngit rebase origin/main\n# fix conflicts, then\ngit add -p && git rebase --continue\n```",
        ],
    },
    "work": {
        "requests": [
            (
                "Can you help me write an email to {x}?",
                "an email to {x}",
                [
                    "decline a meeting",
                    "ask for a deadline extension",
                    "follow up after an interview",
                    "introduce myself to a new team",
                ],
            ),
            (
                "How do I prepare for {x}?",
                "preparing for {x}",
                [
                    "a performance review",
                    "a salary negotiation",
                    "a big presentation",
                    "a job interview",
                ],
            ),
            (
                "How can I manage {x} better?",
                "managing {x}",
                ["my inbox", "too many meetings", "interruptions", "a heavy workload"],
            ),
            (
                "What's a polite way to {x}?",
                "a polite way to {x}",
                [
                    "say no to extra work",
                    "give critical feedback",
                    "ask for help",
                    "push back on a deadline",
                ],
            ),
            (
                "How do I run {x}?",
                "running {x}",
                [
                    "a good retrospective",
                    "a one-on-one",
                    "a kickoff meeting",
                    "a brainstorming session",
                ],
            ),
        ],
        "tips": [
            "Put the request in the first two lines of an email; people skim.",
            "Block time in your calendar for focused work, and treat it like a meeting.",
            "Before a review, write down three things you're proud of and one you want to improve.",
            "In a negotiation, know your walk-away point before the conversation starts.",
            "Feedback lands better when it's specific and about behaviour, not personality.",
            "A short agenda sent in advance makes most meetings shorter.",
            "It's fine to say no to extra work if you explain what would have to give.",
            "Ask your manager what success looks like for the next quarter.",
            "Batch email into two or three slots a day instead of checking constantly.",
            "Rehearse a presentation out loud at least twice; reading it silently isn't the same.",
            "End every meeting with who does what by when.",
            "Thank people publicly and give criticism privately.",
            "Keep a running document of your wins; it makes review season much easier.",
            "If your workload is too heavy, ask your manager to help you prioritise.",
        ],
    },
    "money": {
        "requests": [
            (
                "How do I make a budget for {x}?",
                "a budget for {x}",
                ["a single month", "groceries", "a wedding", "the holidays"],
            ),
            (
                "Should I {x}?",
                "whether to {x}",
                [
                    "pay off my credit card or save first",
                    "get a cash-back card",
                    "refinance my car loan",
                    "open a second savings account",
                ],
            ),
            (
                "How much should I save for {x}?",
                "saving for {x}",
                ["an emergency fund", "a house deposit", "retirement", "a new laptop"],
            ),
            (
                "Can you explain {x}?",
                "an explanation of {x}",
                ["index funds", "compound interest", "how credit scores work", "what an ETF is"],
            ),
            (
                "How can I cut back on {x}?",
                "cutting back on {x}",
                ["subscriptions", "eating out", "impulse buys", "energy bills"],
            ),
        ],
        "tips": [
            "An emergency fund of three to six months of expenses is a common target.",
            "Pay off high-interest debt before investing beyond an employer match.",
            "Automate savings on payday so the money never sits in your current account.",
            "Review subscriptions every few months; it's easy to forget small monthly charges.",
            "Index funds keep costs low and spread risk across many companies.",
            "Compound interest works best over long periods, so starting early matters more than the amount.",
            "Track spending for one month before setting a budget, so the budget is realistic.",
            "A 24-hour rule for non-essential purchases cuts down on impulse buys.",
            "Separate accounts for bills and for spending make overspending obvious.",
            "Check whether your bank offers a better rate on savings; loyalty rarely pays.",
            "Big one-off costs, like a holiday, are easier when you save a small amount every month.",
            "Credit scores improve mostly from paying on time and keeping balances low.",
            "Energy bills often drop with small changes: lower thermostat, shorter showers, full loads.",
            "Write down your goals with amounts and dates; vague goals are hard to save for.",
        ],
    },
    "home": {
        "requests": [
            (
                "How do I get rid of {x}?",
                "getting rid of {x}",
                [
                    "mould in the bathroom",
                    "fruit flies",
                    "a musty smell in the wardrobe",
                    "limescale on the taps",
                ],
            ),
            (
                "Can you suggest a cleaning routine for {x}?",
                "a cleaning routine for {x}",
                ["a small flat", "a busy week", "a house with pets", "two people sharing"],
            ),
            (
                "How do I organise {x}?",
                "organising {x}",
                ["a tiny kitchen", "my wardrobe", "the garage", "paperwork at home"],
            ),
            (
                "What plants are good for {x}?",
                "plants for {x}",
                ["a dark room", "a balcony", "people who forget to water", "a bathroom"],
            ),
            (
                "How can I make {x} feel cosier?",
                "making {x} feel cosier",
                ["my living room", "a rented flat", "a home office", "a small bedroom"],
            ),
        ],
        "tips": [
            "Ventilation is the long-term fix for mould; cleaning only treats the symptoms.",
            "A fifteen-minute tidy each evening keeps a home under control better than a weekly blitz.",
            "Vinegar dissolves limescale, but keep it away from natural stone.",
            "Declutter one drawer or shelf at a time rather than a whole room.",
            "Snake plants and pothos tolerate low light and irregular watering.",
            "Warm bulbs and a couple of lamps make a room feel cosier than one bright ceiling light.",
            "Clear storage boxes with labels mean you actually find things again.",
            "A doormat inside and outside the door keeps a surprising amount of dirt out.",
            "Wash bedding weekly, and pillows a few times a year.",
            "In a rented flat, rugs, throws and plants change the feel without losing the deposit.",
            "Fruit flies love a trap of cider vinegar with a drop of washing-up liquid.",
            "Shared homes run smoother with a simple rota that everyone can see.",
            "Keep a folder for warranties and manuals; you'll need them at the worst moment.",
            "Open windows for ten minutes a day, even in winter, to let moisture out.",
        ],
    },
    "health": {
        "requests": [
            (
                "How can I sleep better when {x}?",
                "sleeping better when {x}",
                ["I'm stressed", "it's hot", "my schedule keeps changing", "I wake up at 4 am"],
            ),
            (
                "What helps with {x}?",
                "what helps with {x}",
                ["tension headaches", "a stiff neck", "afternoon slumps", "seasonal allergies"],
            ),
            (
                "How much {x} do I actually need?",
                "how much {x} you need",
                ["water", "protein", "sleep", "vitamin D"],
            ),
            (
                "Can you suggest ways to reduce {x}?",
                "ways to reduce {x}",
                ["screen time", "caffeine", "sugar", "stress at work"],
            ),
            (
                "Is it normal to {x}?",
                "whether it's normal to {x}",
                [
                    "feel tired after lunch",
                    "wake up at night",
                    "get sore knees on stairs",
                    "have cold hands all the time",
                ],
            ),
        ],
        "tips": [
            "A consistent wake-up time, even at weekends, does more for sleep than an early bedtime.",
            "Caffeine has a long half-life, so an afternoon coffee can still affect your sleep at night.",
            "Short walks after meals help with energy and blood sugar.",
            "Screens aren't the only issue at night; the content keeps your brain busy too.",
            "Most adults need seven to nine hours of sleep, though it varies.",
            "A cool, dark, quiet bedroom makes a noticeable difference.",
            "Tension headaches often improve with regular breaks from the screen and better posture.",
            "Drinking water through the day helps, but you don't need to force litres down.",
            "Protein needs go up if you're training hard or trying to keep muscle while losing weight.",
            "Cutting caffeine gradually avoids the headaches of stopping all at once.",
            "Writing tomorrow's to-do list before bed can quiet a racing mind.",
            "Vitamin D levels tend to drop in winter in northern countries.",
            "If tiredness lasts for weeks despite good sleep, it's worth a blood test.",
            "Breathing slowly for a couple of minutes is a simple way to take the edge off stress.",
        ],
    },
    "learning": {
        "requests": [
            (
                "How can I learn {x} faster?",
                "learning {x} faster",
                ["Spanish", "Japanese", "to play the guitar", "to touch type"],
            ),
            (
                "Can you recommend a study plan for {x}?",
                "a study plan for {x}",
                [
                    "a certification exam",
                    "a language exam",
                    "an online course",
                    "learning statistics",
                ],
            ),
            (
                "How do I remember {x}?",
                "remembering {x}",
                ["vocabulary", "what I read", "people's names", "formulas"],
            ),
            (
                "How do I stay consistent with {x}?",
                "staying consistent with {x}",
                ["Duolingo", "practising an instrument", "reading every day", "journaling"],
            ),
            (
                "What's a good way to practise {x}?",
                "practising {x}",
                ["speaking a language", "public speaking", "writing", "mental arithmetic"],
            ),
        ],
        "tips": [
            "Spaced repetition, for example with Anki, is the most efficient way to remember vocabulary.",
            "Twenty minutes every day beats two hours once a week.",
            "Speaking early, even badly, speeds up language learning more than perfect grammar drills.",
            "Test yourself instead of re-reading; recall is what builds memory.",
            "Pick one resource and finish it before hopping to the next.",
            "A study plan works best when it's tied to a date, like an exam or a trip.",
            "Teaching what you've learned to someone else shows where the gaps are.",
            "Tie a new habit to an existing one, like practising right after breakfast.",
            "Mistakes are part of learning; native speakers are usually happy you're trying.",
            "Short notes in your own words stick better than highlighted text.",
            "A weekly class gives structure, and the homework keeps you honest.",
            "Track how many days in a row you've practised; a streak is surprisingly motivating.",
            "Podcasts and shows with subtitles are an easy way to get more listening practice.",
            "Take breaks: the brain consolidates what you learned while you rest.",
        ],
    },
    "tech": {
        "requests": [
            (
                "Which {x} should I buy?",
                "choosing {x}",
                [
                    "laptop for work",
                    "pair of noise-cancelling headphones",
                    "e-reader",
                    "budget phone",
                ],
            ),
            (
                "How do I {x}?",
                "how to {x}",
                [
                    "back up my photos",
                    "speed up my old laptop",
                    "set up a password manager",
                    "free up space on my phone",
                ],
            ),
            (
                "Is it worth upgrading to {x}?",
                "whether to upgrade to {x}",
                ["a new phone this year", "an SSD", "a bigger monitor", "mesh Wi-Fi"],
            ),
            (
                "Can you help me fix {x}?",
                "fixing {x}",
                [
                    "slow Wi-Fi",
                    "a laptop that overheats",
                    "Bluetooth that keeps dropping",
                    "a printer that won't connect",
                ],
            ),
            (
                "What's the safest way to {x}?",
                "the safest way to {x}",
                [
                    "store passwords",
                    "sell my old phone",
                    "use public Wi-Fi",
                    "share files with family",
                ],
            ),
        ],
        "tips": [
            "A password manager plus two-factor authentication covers most security risks.",
            "Keep backups in at least two places, one of them outside your home.",
            "Replacing a hard drive with an SSD is the cheapest way to speed up an older laptop.",
            "Restarting the router fixes more Wi-Fi problems than anyone likes to admit.",
            "Factory reset and sign out of every account before selling a device.",
            "Check battery health before deciding a phone needs replacing; a new battery is much cheaper.",
            "For headphones, comfort over hours matters more than small differences in sound.",
            "Public Wi-Fi is much safer when you use sites with HTTPS or a VPN.",
            "Laptops overheat mostly from dust in the fans and from being used on soft surfaces.",
            "Buying last year's model often gets you most of the features for much less.",
            "Turn on automatic updates; most attacks use holes that were already patched.",
            "Cloud photo backup is convenient, but check how much storage you'll really need.",
            "An e-reader with a warm light is easier on the eyes at night than a tablet.",
            "Write down what changed right before a problem started; it's usually the cause.",
        ],
    },
}

# --- what the user says in passing, and what is asked later -----------------------------------
# Every frame has one value set per persona (PERSONAS' order).

FACTS = [
    {
        "clause": "Also, heads up that I'm allergic to {v}, so anything food-related needs to work around that.",
        "question": "What am I allergic to?",
        "theme": ["cooking", "eating out with a food allergy", "any"],
        "around": [
            "My colleague is allergic to gluten, which makes office birthday cakes a puzzle.",
            "Can food allergies go away with age? I've always wondered.",
            "We had an allergy scare at my nephew's party, nobody knew what was in the dip.",
            "The new café near work lists every allergen on its menu, which I really appreciate.",
        ],
        "echo": "Since you're allergic to {v}, double-check labels and tell the kitchen whenever you eat out.",
        "answer": "{v}",
        "values": [{"v": "peanuts"}, {"v": "shellfish"}, {"v": "sesame"}],
    },
    {
        "clause": "My {rel} {name} is coming to stay with us from {city} soon, so I'm trying to get organised.",
        "question": "Where is my {rel} {name} coming from?",
        "theme": ["home", "having my {rel} {name} to stay", "any"],
        "around": [
            "My {rel} {name} called last night and we talked for two hours.",
            "I still owe my {rel} {name} a birthday present, which is embarrassing.",
            "My {rel} {name} keeps sending me recipes to try.",
            "A friend of mine just moved to Toronto and says the flats there are tiny.",
        ],
        "echo": "With your {rel} {name} staying with you, it may help to plan a couple of things you can do together.",
        "answer": "{city}",
        "values": [
            {"rel": "sister", "name": "Anika", "city": "Vancouver"},
            {"rel": "brother", "name": "Jamie", "city": "Glasgow"},
            {"rel": "cousin", "name": "Lucia", "city": "Monterrey"},
        ],
    },
    {
        "clause": "Sorry if I'm slow today, my {pet} {name} kept me up half the night.",
        "question": "What's the name of my {pet}?",
        "theme": ["home", "looking after my {pet}", "any"],
        "around": [
            "Is it true that lilies are dangerous for pets? We have a {pet} at home.",
            "My neighbour's {pet}, Mochi, is so much calmer than ours.",
            "The vet bill for our {pet} this year was more than my phone bill.",
        ],
        "echo": "I hope {name} lets you sleep better tonight; a tired owner and a restless {pet} are a tough combination.",
        "answer": "{name}",
        "values": [
            {"pet": "cat", "name": "Biscuit"},
            {"pet": "dog", "name": "Pepper"},
            {"pet": "parrot", "name": "Kiwi"},
        ],
    },
    {
        "clause": "For context, I work as {job}, so my evenings are the only free time I get.",
        "question": "What do I do for a living?",
        "theme": ["work", "keeping my job from taking over my evenings", "any"],
        "around": [
            "Work has been hectic this month, lots of late evenings.",
            "My best friend just started a new job as a pharmacist, I'm so proud of her.",
            "Sometimes I wonder whether I should change careers completely.",
        ],
        "echo": "Working as {job} is demanding, so keep the plan light on weekday evenings.",
        "answer": "{job}",
        "values": [
            {"job": "a data engineer at a bank"},
            {"job": "a history teacher at a secondary school"},
            {"job": "an ICU nurse at a children's hospital"},
        ],
    },
    {
        "clause": "We only have one car, an old {car}, and my partner needs it most days.",
        "question": "What car do we have?",
        "theme": ["money", "the running costs of our car", "any"],
        "around": [
            "My neighbour just bought a Tesla Model 3 and won't stop talking about it.",
            "Our car is due for a service soon, and I never remember what it needs.",
            "We rented a Fiat 500 on holiday once and I loved how easy it was to park.",
        ],
        "echo": "Since you share the {car}, plan anything that needs the car for the days your partner doesn't.",
        "answer": "{car}",
        "values": [{"car": "Honda Civic"}, {"car": "Skoda Octavia"}, {"car": "Toyota RAV4"}],
    },
    {
        "clause": "I grew up in {town}, so a bit of bad weather doesn't really scare me.",
        "question": "Where did I grow up?",
        "theme": ["travel", "a trip back to where I grew up", "any"],
        "around": [
            "My partner grew up in Brighton, so the sea is a big deal for us.",
            "I might go back to my hometown for a school reunion this year.",
            "Whenever I smell pine trees I think of my childhood.",
        ],
        "echo": "Growing up in {town} probably makes this weather feel mild.",
        "answer": "{town}",
        "values": [{"town": "Winnipeg"}, {"town": "Aberdeen"}, {"town": "El Paso"}],
    },
]

CHANGED = [
    {
        "old": "My manager {old} wants a status update from me every Friday, which eats my afternoon.",
        "new": "Big change at work: {new} is my manager now, since {old} moved to another team.",
        "question": "Who is my manager now?",
        "theme": ["work", "one-on-ones with my manager", "any"],
        "around": [
            "My manager asked everyone to write down their goals for the quarter.",
            "A friend of mine has a manager who emails at midnight, I'd go mad.",
            "We have a team offsite coming up and my manager wants ideas for it.",
        ],
        "echo_old": "A weekly status update for {old} is easier if you keep a running list of what you did each day.",
        "echo_new": "A new manager like {new} usually appreciates a short summary of your projects early on.",
        "answer": "{new}",
        "values": [
            {"old": "Ian", "new": "Rachel"},
            {"old": "Mrs Patel", "new": "Mr Hughes"},
            {"old": "Dr Kim", "new": "Dana Ortiz"},
        ],
    },
    {
        "old": "I'm at {old} kg right now and would like to get a bit lower by summer.",
        "new": "Weighed myself this week and I'm down to {new} kg, which feels great.",
        "question": "How much do I weigh now?",
        "theme": ["health", "losing weight", "any"],
        "around": [
            "My partner wants to lose a few kilos before a wedding we're going to.",
            "The scale at the gym never agrees with the one at home, which is annoying.",
            "I've stopped weighing myself every day, once a week is enough.",
        ],
        "echo_old": "Going down from {old} kg is best done slowly, about half a kilo a week.",
        "echo_new": "Congratulations on reaching {new} kg; keep the habits that got you there.",
        "answer": "{new} kg",
        "values": [
            {"old": "74", "new": "70"},
            {"old": "92", "new": "87"},
            {"old": "68", "new": "65"},
        ],
    },
    {
        "old": "Our big summer trip this year is going to be {old} in August.",
        "new": "Change of plans for the summer: we're doing {new} instead of {old} now.",
        "question": "Where are we going on our summer trip?",
        "theme": ["travel", "our summer trip", "any"],
        "around": [
            "My colleague just got back from Greece and now I want a summer trip like hers.",
            "We still need to sort out time off work for the summer trip.",
            "Our summer trip budget is tighter than I'd like this year.",
        ],
        "echo_old": "For a summer trip to {old}, book flights early, since August is peak season.",
        "echo_new": "{new} is a great choice for the summer trip; check what the weather is like there in August.",
        "answer": "{new}",
        "values": [
            {"old": "Portugal", "new": "Iceland"},
            {"old": "Croatia", "new": "Norway"},
            {"old": "Peru", "new": "Japan"},
        ],
    },
    {
        "old": "I take the {old} to work, about forty minutes each way.",
        "new": "I've switched my commute and now go by {new}, which is honestly nicer.",
        "question": "How do I get to work these days?",
        "theme": ["work", "my commute", "any"],
        "around": [
            "My commute was a nightmare this morning, everything was delayed.",
            "A friend of mine drives to work and pays a fortune for parking.",
            "I'd like to use my commute time better, maybe with audiobooks.",
        ],
        "echo_old": "Forty minutes on the {old} each way is a good slot for podcasts or reading.",
        "echo_new": "Commuting by {new} is a nice change; give yourself a few weeks to settle into it.",
        "answer": "{new}",
        "values": [
            {"old": "subway", "new": "bike"},
            {"old": "bus", "new": "train"},
            {"old": "car", "new": "carpool with a colleague"},
        ],
    },
]

# Something the assistant says: its request, the reply's topic and the paragraph that says it.
ASSISTANT_SAID = [
    {
        "topic": "fitness",
        "request": "Can you give me a proper warm-up for my {activity}? I always skip it.",
        "subject": "a warm-up for your {activity}",
        "said": "My suggestion is a warm-up of {mins} minutes: {steps}. Do it every time, even when you're short on time, and shorten the main session instead.",
        "question": "What warm-up did you suggest before my {activity}?",
        "theme": ["fitness", "my {activity}", "any"],
        "alike": [
            ["What should I eat before my {activity}?", "eating before your {activity}"],
            [
                "How do I stay motivated for my {activity} when it's cold and dark?",
                "staying motivated for your {activity}",
            ],
            [
                "Should I stretch before or after my {activity}?",
                "stretching around your {activity}",
            ],
        ],
        "others": [
            {
                "activity": "weight training",
                "mins": "5",
                "steps": "rowing, bodyweight squats, push-ups and light sets of the first lift",
            },
            {
                "activity": "tennis lessons",
                "mins": "7",
                "steps": "skipping, lateral lunges, arm swings and gentle rallying",
            },
        ],
        "answer": "{mins} minutes: {steps}",
        "values": [
            {
                "activity": "morning runs",
                "mins": "8",
                "steps": "leg swings, walking lunges, high knees and two easy strides",
            },
            {
                "activity": "five-a-side football",
                "mins": "10",
                "steps": "a slow jog, side shuffles, hip circles and short sprints",
            },
            {
                "activity": "swimming",
                "mins": "6",
                "steps": "arm circles, band pull-aparts, shoulder rolls and two easy lengths",
            },
        ],
    },
    {
        "topic": "cooking",
        "request": "How do I roast {dish} so it doesn't come out dry?",
        "subject": "roasting {dish}",
        "said": "For {dish}, I'd roast at {temp} for {time}, then let it rest for ten minutes under foil before cutting.",
        "question": "What temperature and time did you tell me for roasting {dish}?",
        "theme": ["cooking", "cooking {dish} for guests", "any"],
        "alike": [
            ["What should I season {dish} with?", "seasoning {dish}"],
            ["What sides go well with {dish}?", "sides for {dish}"],
            ["How long do leftovers of {dish} keep in the fridge?", "keeping leftovers of {dish}"],
        ],
        "others": [
            {"dish": "a tray of root vegetables", "temp": "220°C", "time": "40 minutes"},
            {"dish": "a whole cauliflower", "temp": "210°C", "time": "about an hour"},
        ],
        "answer": "{temp} for {time}",
        "values": [
            {"dish": "a whole chicken", "temp": "200°C", "time": "about 75 minutes"},
            {"dish": "a pork shoulder", "temp": "160°C", "time": "four hours"},
            {"dish": "salmon fillets", "temp": "190°C", "time": "12 to 14 minutes"},
        ],
    },
    {
        "topic": "money",
        "request": "I've got {amount} to put aside. How would you split it?",
        "subject": "how to split {amount}",
        "said": "With {amount}, I'd suggest a {split} split: {parts}. That keeps you safe while the rest works for you.",
        "question": "How did you suggest I split the {amount}?",
        "theme": ["money", "putting the {amount} to good use", "any"],
        "alike": [
            [
                "Should I keep the {amount} in a savings account or invest it?",
                "where to keep {amount}",
            ],
            [
                "Is it silly to spend part of the {amount} on a holiday?",
                "spending part of {amount}",
            ],
            ["How fast could the {amount} grow in an index fund?", "how {amount} might grow"],
        ],
        "others": [
            {
                "amount": "this year's bonus",
                "split": "70/30",
                "parts": "70% towards the credit card, 30% into the holiday fund",
            },
            {
                "amount": "the tax refund",
                "split": "80/20",
                "parts": "80% into the emergency fund, 20% to spend on something fun",
            },
        ],
        "answer": "{split}: {parts}",
        "values": [
            {
                "amount": "$12,000",
                "split": "50/30/20",
                "parts": "half in an emergency fund, 30% in an index fund, 20% for the trip",
            },
            {
                "amount": "£8,000",
                "split": "60/40",
                "parts": "60% in an easy-access savings account, 40% in a stocks and shares ISA",
            },
            {
                "amount": "$20,000",
                "split": "40/40/20",
                "parts": "40% emergency fund, 40% retirement account, 20% for paying down the car loan",
            },
        ],
    },
    {
        "topic": "tech",
        "request": "What's a good {thing} for me? I keep going back and forth.",
        "subject": "picking a {thing}",
        "said": "If I had to pick one {thing} for you, it would be {pick}, mainly because {why}.",
        "question": "Which {thing} did you recommend to me?",
        "theme": ["tech", "choosing a {thing}", "any"],
        "alike": [
            ["What should I look for in a {thing}?", "what to look for in a {thing}"],
            ["Is a free {thing} good enough, or should I pay?", "whether a free {thing} is enough"],
            [
                "How do I switch to a new {thing} without losing anything?",
                "switching to a new {thing}",
            ],
        ],
        "others": [
            {
                "thing": "note-taking app",
                "pick": "Obsidian",
                "why": "your notes stay on your own disk as plain files",
            },
            {
                "thing": "photo backup service",
                "pick": "Backblaze",
                "why": "it backs up everything without you having to think about it",
            },
        ],
        "answer": "{pick}",
        "values": [
            {
                "thing": "password manager",
                "pick": "Bitwarden",
                "why": "it's open source, cheap and works on every device",
            },
            {
                "thing": "e-reader",
                "pick": "Kobo Clara",
                "why": "it reads library books and has a warm light",
            },
            {
                "thing": "pair of running headphones",
                "pick": "Shokz OpenRun",
                "why": "they leave your ears open to traffic",
            },
        ],
    },
]

# Events with a date: the user says when relative to the session ({when}).
DATED = [
    {
        "clause": "Sat the {short} {when} and walked out with a headache, so my brain is a bit fried.",
        "question": "On what day did I have my {exam}?",
        "theme": ["learning", "studying for my {exam}", "before"],
        "before": [
            "I finally booked a date for my {exam}, so there's no excuse now.",
            "A colleague failed her {exam} twice, which isn't helping my nerves.",
            "Is it normal to feel this anxious about my {exam}? I keep dreaming about it.",
            "My {exam} is coming up and I haven't studied nearly enough.",
        ],
        "after": [
            "Still waiting for the results of my {exam}, the suspense is killing me.",
            "The results of my {exam} came in and I passed!",
        ],
        "echo": "Well done on getting through the {exam}; give yourself an evening off.",
        "values": [
            {"exam": "AWS certification exam", "short": "AWS Solutions Architect test"},
            {"exam": "driving theory test", "short": "theory part of the driving licence"},
            {"exam": "ACLS recertification", "short": "advanced life support recert"},
        ],
    },
    {
        "clause": "Our names are finally on the rental contract for the new {home}, as of {when}!",
        "question": "On what day did we sign the lease on the new {home}?",
        "theme": ["home", "renting a new {home}", "before"],
        "before": [
            "We've been viewing places for weeks and I think we've found our new {home}.",
            "What should I check in a lease before we sign for the new {home}?",
            "The agent says the lease for the new {home} should be ready to sign soon.",
            "Our current landlord wants notice before we move to the new {home}.",
        ],
        "after": [
            "Moving day for the new {home} is coming up and I'm drowning in boxes.",
            "We've settled into the new {home} and the neighbours are lovely.",
        ],
        "echo": "Congratulations on the lease for the new {home}! Moving is a lot of small jobs, so a checklist helps.",
        "values": [{"home": "apartment"}, {"home": "flat"}, {"home": "house"}],
    },
]

# Two dated events in different sessions: the question asks the days between them.
BETWEEN = [
    {
        "first": "I started an online {course} course {when}, wish me luck.",
        "second": "I finished the last module of my {course} course {when}!",
        "question": "How many days did it take me to finish my {course} course?",
        "theme": ["learning", "my {course} course", "between"],
        "before": ["I'm thinking of signing up for an online {course} course, any advice?"],
        "between": [
            "I'm halfway through my {course} course and the assignments are getting harder.",
            "I fell behind on my {course} course this week, work got in the way.",
            "The {course} course has a quiz every week and I keep forgetting about it.",
            "Do you think a certificate from an online {course} course is worth anything?",
        ],
        "after": ["Now that the {course} course is done, I want to actually use what I learned."],
        "echo_first": "Good luck with the {course} course; a fixed weekly slot helps you finish it.",
        "echo_second": "Congratulations on finishing the {course} course!",
        "values": [
            {"course": "machine learning"},
            {"course": "Spanish"},
            {"course": "watercolour painting"},
        ],
    },
    {
        "first": "I sprained my ankle {when} playing {sport}, so I'm hobbling around.",
        "second": "I played {sport} again {when} for the first time since the sprain.",
        "question": "How many days after spraining my ankle did I play {sport} again?",
        "theme": ["fitness", "getting back into {sport}", "between"],
        "before": ["I play {sport} with friends most weeks, it's the highlight of my week."],
        "between": [
            "My ankle is still swollen, so no {sport} for me for a while.",
            "I really miss {sport} while the ankle heals.",
            "The physio says my ankle needs another week before any {sport}.",
            "How do I strengthen an ankle after a sprain so I can get back to {sport}?",
        ],
        "after": ["I'm back to playing {sport} every week and the ankle feels normal."],
        "echo_first": "Rest the sprained ankle and ease back into {sport} only when it stops hurting.",
        "echo_second": "Glad the ankle held up for {sport}; build back up gradually.",
        "values": [{"sport": "basketball"}, {"sport": "squash"}, {"sport": "volleyball"}],
    },
]

# Events that repeat; "how many in <month>" counts the mentions whose day is in that month.
COUNTED = [
    {
        "mentions": [
            "I {did} {when}, so my arms are dead.",
            "Also I {did} again {when}, it's becoming a habit.",
            "Side note: {did} {when} with a friend from work.",
            "I {did} {when} and finally managed the route I'd been stuck on.",
            "I {did} {when} and the wall was packed.",
            "Quick update: I {did} {when}, my forearms are still burning.",
        ],
        "question": "How many times did I {go} in {month}?",
        "theme": ["fitness", "climbing as a hobby", "any"],
        "around": [
            "I'd like to {go} more often, but the wall is always packed at weekends.",
            "Do I need new shoes to {go}? Mine are falling apart.",
            "A colleague keeps asking me to {go} with her group on Thursdays.",
        ],
        "echo_around": "If you {go} regularly, stretching your forearms and fingers afterwards helps a lot.",
        "echo": "It sounds like you {did} again; sessions like that count as training too, so plan a lighter day after.",
        "values": [
            {
                "did": "went climbing",
                "go": "go climbing",
                "alts": [
                    "did a few routes at the bouldering gym",
                    "spent the evening on the wall at the gym",
                ],
            },
            {
                "did": "went bouldering",
                "go": "go bouldering",
                "alts": [
                    "worked on a couple of problems at the climbing gym",
                    "was on the boulder wall for two hours",
                ],
            },
            {
                "did": "went to the climbing wall",
                "go": "go to the climbing wall",
                "alts": [
                    "did a session on the ropes at the leisure centre",
                    "got some climbing in at the gym",
                ],
            },
        ],
    },
    {
        "mentions": [
            "Oh, and I {did} {when} because I was too tired to cook.",
            "Confession: I {did} again {when}.",
            "We {did} {when}, which is not great for the budget.",
            "I {did} {when} since the fridge was empty.",
            "I {did} {when}, we just couldn't be bothered.",
            "Full honesty: I {did} {when} again.",
        ],
        "question": "How many times did I {go} in {month}?",
        "theme": ["money", "spending less on takeaways", "any"],
        "around": [
            "I want to {go} less often, it's getting expensive.",
            "Is it really cheaper to cook than to {go}? Be honest.",
            "My partner says we {go} far too often lately.",
        ],
        "echo_around": "If you'd like to {go} less often, a short list of fifteen-minute meals helps on tired evenings.",
        "echo": "No judgement that you {did}; keeping a few quick meals in the freezer makes it easier next time.",
        "values": [
            {
                "did": "ordered takeout",
                "go": "order takeout",
                "alts": ["got Thai food delivered", "had a curry delivered"],
            },
            {
                "did": "got fish and chips",
                "go": "get fish and chips",
                "alts": ["had a chippy tea", "picked up a fish supper from the chippy"],
            },
            {
                "did": "ordered pizza",
                "go": "order pizza",
                "alts": ["got a Domino's delivered", "had a large pepperoni brought to the door"],
            },
        ],
    },
]

# A list gathered over sessions: the question asks for all of it.
LISTED = [
    {
        "mention": "I just finished reading {item}, by the way.",
        "question": "Which books have I finished reading so far?",
        "theme": ["learning", "reading more books", "any"],
        "around": [
            "I started {other} but gave up after fifty pages.",
            "A friend lent me {other}, it's next on my list.",
        ],
        "echo": "Nice that you finished {item}; writing two lines about each book you read helps you remember it.",
        "values": [
            {
                "items": ["Project Hail Mary", "The Midnight Library", "Educated"],
                "others": ["Klara and the Sun", "Sapiens"],
            },
            {
                "items": ["Wolf Hall", "The Guns of August", "SPQR"],
                "others": ["Dune", "The Silk Roads"],
            },
            {
                "items": ["Being Mortal", "Lessons in Chemistry", "Circe"],
                "others": ["Normal People", "Atomic Habits"],
            },
        ],
    },
    {
        "mention": "We tried a new place called {item} for dinner this week, pretty good actually.",
        "question": "Which new restaurants have we tried this year?",
        "theme": ["cooking", "finding good restaurants nearby", "any"],
        "around": [
            "We walked past {other} on Saturday, it looked busy, maybe next time.",
            "A friend keeps telling us to try {other}, we still haven't been.",
        ],
        "echo": "Glad {item} was good; it's worth noting what you ordered so you remember next time.",
        "values": [
            {
                "items": ["Saffron House", "Nonna Rosa", "The Green Fork"],
                "others": ["Bombay Bicycle", "Harbour Grill"],
            },
            {
                "items": ["The Brass Anchor", "Little Lahore"],
                "others": ["The Old Mill", "Sakura Ramen"],
            },
            {
                "items": ["Casa Verde", "Pho Saigon", "Smokestack BBQ", "Olive & Thyme"],
                "others": ["Taqueria Luna", "The Blue Door"],
            },
        ],
    },
]

# A preference said in passing, asked later as "can you recommend ..." / "what should I ...".
PREFERENCES = [
    {
        "question": "Can you recommend somewhere for a weekend away?",
        "theme": ["travel", "planning a weekend away", "any"],
        "around": [
            "We haven't had a proper weekend away since last year.",
            "My friends spent a weekend in the Cotswolds and won't stop posting photos.",
        ],
        "values": [
            {
                "clause": "Honestly, I can't stand crowded tourist spots, they drain me.",
                "answer": "somewhere quiet, not crowded",
                "echo": "I'll keep in mind that busy tourist crowds wear you out.",
            },
            {
                "clause": "I'd rather not drive for more than an hour, long drives make me miserable.",
                "answer": "somewhere close, no long drive",
                "echo": "Noted that long drives make you miserable, so I'll stick to places close by.",
            },
            {
                "clause": "I really hate the cold, anything under ten degrees and I'm miserable.",
                "answer": "somewhere warm",
                "echo": "Since the cold really gets to you, dress in layers and keep outdoor plans short.",
            },
        ],
    },
    {
        "question": "What should I cook for a dinner party this weekend?",
        "theme": ["cooking", "hosting a dinner party", "any"],
        "around": [
            "I went to a dinner party last week and the host made everything from scratch.",
            "We're hosting friends for dinner sometime soon and I'm already nervous.",
        ],
        "values": [
            {
                "clause": "I've been vegetarian for about six years now, so work barbecues are always fun.",
                "answer": "something vegetarian",
                "echo": "As you're vegetarian, I've kept meat out of the suggestions.",
            },
            {
                "clause": "I don't eat pork, which makes British breakfasts a bit tricky.",
                "answer": "something without pork",
                "echo": "Since you don't eat pork, I've left out bacon and sausages.",
            },
            {
                "clause": "I'm trying to stay low-carb these days, so no pasta for me.",
                "answer": "something low-carb",
                "echo": "As you're keeping things low-carb, I've skipped pasta and bread.",
            },
        ],
    },
    {
        "question": "What time of day should I schedule my workouts?",
        "theme": ["fitness", "fitting workouts into my week", "any"],
        "around": [
            "My workouts have been a bit random lately, no real schedule.",
            "My gym is open 24 hours, which is great and dangerous.",
        ],
        "values": [
            {
                "clause": "I'm useless before 10 am, my brain just doesn't start.",
                "answer": "after 10 am, not early morning",
                "echo": "Since your brain doesn't start before 10, keep anything demanding for later in the day.",
            },
            {
                "clause": "I'm up at 5:30 every day anyway, I'm a total morning person.",
                "answer": "early morning",
                "echo": "As a morning person up at 5:30, you can use those early hours for the hardest tasks.",
            },
            {
                "clause": "Since I work nights, I sleep from about 9 am to 4 pm.",
                "answer": "late afternoon or evening, after 4 pm",
                "echo": "Since you sleep in the daytime after night shifts, plan around that sleep.",
            },
        ],
    },
    {
        "question": "Can you recommend a birthday gift for my best friend?",
        "theme": ["money", "a birthday gift for my best friend", "any"],
        "around": [
            "Last year I gave my best friend a scarf and she never wore it.",
            "My best friend always gives amazing gifts, so I feel the pressure.",
        ],
        "values": [
            {
                "clause": "I'm trying to keep any extra spending under $50 this year.",
                "answer": "something under $50",
                "echo": "With your $50 limit on extras this year, I've kept the options cheap.",
            },
            {
                "clause": "I'd like to stop buying stuff, I prefer giving experiences rather than things.",
                "answer": "an experience, not a thing",
                "echo": "Since you'd rather give experiences than things, skip the gadget aisle.",
            },
            {
                "clause": "I love handmade things, I'd always rather make something than buy it.",
                "answer": "something handmade",
                "echo": "Since you love handmade things, you could make part of this yourself.",
            },
        ],
    },
]
