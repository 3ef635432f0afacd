"""The English facts of the updates set, written by hand for orca-memory.

generate.py says each fact inside a request (the requests, tips and replies come from
agent_sessions' blocks). `{v}` is the value said, `{old}` the value it replaces.
"""

# id, speaker, first session's date (year, month, day).
PERSONAS = [
    ("up-01", "Maya", (2026, 1, 6)),
    ("up-02", "Daniel", (2026, 1, 13)),
    ("up-03", "Grace", (2026, 1, 20)),
]

# Facts that change: each persona's chain of values (the first two, or all three, are said).
# `first`: how the first value is said; `change`: how a newer value is said; `around`: the
# question's words without any value; `echo`: what the assistant may say back.
CHANGED = [
    {
        "key": "city",
        "question": "Which city do I live in now?",
        "first": [
            "I live in {v}, so anything you suggest has to work there.",
            "Here in {v} the winters are long and grey.",
            "Since I'm based in {v}, my family's time zone is always a pain.",
        ],
        "change": [
            "We finally moved to {v} last week, so everything is still in boxes.",
            "Quick update: I've left {old} and I'm living in {v} now.",
            "Now that home is {v}, my weekends look very different.",
        ],
        "around": [
            "My cousin keeps talking about moving to another city.",
            "A friend says moving house is the most stressful thing she's done.",
        ],
        "echo": "Settling into life in {v} takes a few months, so be patient with yourself.",
        "values": [
            ["Paris", "Berlin", "Amsterdam"],
            ["Manchester", "Leeds", "Bristol"],
            ["Denver", "Austin", "Seattle"],
        ],
    },
    {
        "key": "employer",
        "question": "Which company do I work for now?",
        "first": [
            "I work at {v}, and meetings eat half my week.",
            "At {v} we have a no-meetings Wednesday, which I love.",
            "My employer, {v}, pays for one course a year.",
        ],
        "change": [
            "I accepted an offer and started at {v} this month.",
            "I quit {old}; my first week at {v} was a blur.",
            "New job news: I'm at {v} now, with a much smaller team.",
        ],
        "around": [
            "My brother just got a new job and can't stop talking about it.",
            "A recruiter messaged me on LinkedIn again today.",
        ],
        "echo": "Getting to know how things work at {v} is worth a few quiet weeks of listening.",
        "values": [
            ["Spotify", "Shopify", "Atlassian"],
            ["Deloitte", "Accenture", "Unilever"],
            ["Boeing", "Airbus", "Rolls-Royce"],
        ],
    },
    {
        "key": "partner",
        "question": "What's my partner's name?",
        "first": [
            "My partner {v} thinks I overplan everything.",
            "{v}, my partner, is the better cook of the two of us.",
            "I'm going with my partner {v}, who hates long drives.",
        ],
        "change": [
            "{old} and I split up in the spring; I've been seeing {v} for a couple of months now.",
            "My new partner {v} is really into hiking, so that's changing my weekends.",
            "Things with {v} are getting serious, we're talking about moving in together.",
        ],
        "around": [
            "My best friend's partner proposed last weekend, which was sweet.",
            "Dating apps are exhausting, according to everyone at work.",
        ],
        "echo": "It sounds like {v} will have opinions on this too, so plan it together.",
        "values": [
            ["Lucas", "Theo", "Adrian"],
            ["Hannah", "Chloe", "Imogen"],
            ["Marcus", "Elliot", "Rafael"],
        ],
    },
    {
        "key": "budget",
        "question": "What's my budget for the new laptop now?",
        "first": [
            "My budget for a new laptop is {v}, not a cent more.",
            "I'm saving up for a laptop and can spend about {v}.",
        ],
        "change": [
            "My laptop budget has changed: it's {v} now.",
            "After talking it over at home, the laptop budget is {v}.",
            "Scratch what I said about the laptop money, I can go to {v} now.",
        ],
        "around": [
            "My old laptop's fan sounds like a jet engine these days.",
            "A colleague bought a laptop that turned out to be far too heavy.",
        ],
        "echo": "With {v} to spend on the laptop, prioritise the screen and the battery.",
        "values": [
            ["$800", "$1,200", "$1,500"],
            ["£600", "£900", "£750"],
            ["$1,000", "$1,400", "$1,100"],
        ],
    },
    {
        "key": "team",
        "question": "Which team am I on at work now?",
        "first": [
            "I'm on the {v} at work, and it's been hectic.",
            "Our {v} has a big review coming up.",
        ],
        "change": [
            "I got moved to the {v} last week, so it's all new people.",
            "Reorg news: I'm on the {v} now.",
            "I transferred out of the {old} and joined the {v}.",
        ],
        "around": [
            "Our whole department has a team-building day next month.",
            "The team next to ours keeps booking our meeting room.",
        ],
        "echo": "Joining the {v} is a good moment to ask everyone what they wish they'd known earlier.",
        "values": [
            ["payments team", "search team", "growth team"],
            ["audit team", "tax team", "risk team"],
            ["wing design team", "engine test team", "safety team"],
        ],
    },
    {
        "key": "band",
        "question": "Who's my favourite band these days?",
        "first": [
            "I've had {v} on repeat all month.",
            "My favourite band at the moment is {v}.",
        ],
        "change": [
            "I'm completely obsessed with {v} now, nothing else gets a look in.",
            "These days my favourite band is {v}.",
            "I've gone off {old} a bit; {v} is what I play all day now.",
        ],
        "around": [
            "My flatmate plays the same playlist every single evening.",
            "Concert tickets are so expensive this year.",
        ],
        "echo": "Having {v} playing in the background can make this feel less like a chore.",
        "values": [
            ["Radiohead", "Fleetwood Mac", "Arctic Monkeys"],
            ["Coldplay", "Daft Punk", "Massive Attack"],
            ["The Strokes", "Tame Impala", "Khruangbin"],
        ],
    },
    {
        "key": "car",
        "question": "What car do I drive now?",
        "first": [
            "I drive a {v}, so boot space is limited.",
            "My {v} needs new tyres soon.",
        ],
        "change": [
            "We sold the {old} and bought a {v}.",
            "I'm driving a {v} now, much smoother on the motorway.",
            "The new car is a {v}, picked it up on Saturday.",
        ],
        "around": [
            "My neighbour's car alarm went off three times last night.",
            "Parking near the office has become impossible.",
        ],
        "echo": "A {v} should handle that trip comfortably.",
        "values": [
            ["Honda Civic", "Toyota RAV4", "Tesla Model 3"],
            ["Ford Fiesta", "VW Golf", "Skoda Octavia"],
            ["Mazda 3", "Subaru Outback", "Kia EV6"],
        ],
    },
    {
        "key": "phone",
        "question": "What phone do I use now?",
        "first": [
            "My phone is the {v}, if that matters for the app.",
            "My {v} battery barely lasts a day.",
        ],
        "change": [
            "I switched to the {v} last week.",
            "Got the {v} to replace my old phone, still learning it.",
            "My {old} died, so I'm using the {v} now.",
        ],
        "around": [
            "My dad dropped his phone in the sink again.",
            "I should really spend less time on my phone in bed.",
        ],
        "echo": "On the {v} you can set this up in the settings in a couple of minutes.",
        "values": [
            ["Pixel 7", "iPhone 15", "Galaxy S24"],
            ["iPhone 12", "Pixel 8", "Nothing Phone"],
            ["Galaxy S21", "iPhone 14", "OnePlus 12"],
        ],
    },
    {
        "key": "language",
        "question": "Which language am I learning now?",
        "first": [
            "I'm learning {v} on an app in the evenings.",
            "My {v} lessons are on Tuesday nights.",
        ],
        "change": [
            "I dropped {old} and started {v} classes.",
            "These days I'm learning {v} instead.",
            "I've signed up for a {v} course that started this week.",
        ],
        "around": [
            "My niece is bilingual already and she's only six.",
            "A colleague says language apps never worked for him.",
        ],
        "echo": "Ten minutes of {v} a day adds up faster than one long weekly session.",
        "values": [
            ["Italian", "Swedish", "Korean"],
            ["German", "Dutch", "Portuguese"],
            ["French", "Mandarin", "Greek"],
        ],
    },
    {
        "key": "sport",
        "question": "What sport do I play on Thursday evenings now?",
        "first": [
            "I play {v} every Thursday evening.",
            "Thursday is my {v} night with friends from work.",
        ],
        "change": [
            "I've swapped {old} for {v} on Thursdays.",
            "Thursday nights are {v} now, a friend talked me into it.",
            "I joined a {v} club that meets on Thursday evenings.",
        ],
        "around": [
            "My knees are not what they used to be, honestly.",
            "The sports centre near me is closing for renovation in the autumn.",
        ],
        "echo": "Warming up properly before {v} will save your joints.",
        "values": [
            ["squash", "padel", "badminton"],
            ["football", "basketball", "netball"],
            ["volleyball", "hockey", "rugby"],
        ],
    },
]

# Facts that do not change: the first value stays true; `also` adds something that holds
# together with it (a second drink, a brother as well as a sister).
CONTROLS = [
    {
        "key": "drink",
        "question": "What do I drink first thing every morning?",
        "first": [
            "I start every morning with a cup of {v}.",
            "First thing each morning I make myself {v}, it's a ritual.",
        ],
        "also": [
            "I've also started having {w} in the afternoons.",
            "Lately I have {w} after lunch as well.",
        ],
        "around": ["My sister drinks five coffees a day, which can't be good."],
        "values": [("green tea", "espresso"), ("black coffee", "kombucha"), ("oolong", "matcha")],
    },
    {
        "key": "sister",
        "question": "What's my sister's name?",
        "first": [
            "My sister {v} lives just around the corner.",
            "I'm seeing my sister {v} this weekend.",
        ],
        "also": [
            "My brother {w} is visiting next month.",
            "My younger brother {w} just started university.",
        ],
        "around": ["A friend of mine has four siblings and they all live abroad."],
        "values": [("Nora", "Felix"), ("Louise", "Oscar"), ("Ruth", "Dominic")],
    },
    {
        "key": "allergy",
        "question": "Which food am I allergic to?",
        "first": [
            "Heads up, I'm allergic to {v}.",
            "I can't have anything with {v} in it, I'm allergic.",
        ],
        "also": [
            "Turns out I'm allergic to {w} too, the doctor confirmed it.",
            "Spring is rough because I'm also allergic to {w}.",
        ],
        "around": ["A colleague of mine has a gluten allergy."],
        "values": [("peanuts", "cats"), ("shellfish", "dust mites"), ("sesame", "pollen")],
    },
    {
        "key": "pet",
        "question": "What's our cat called?",
        "first": [
            "Our cat {v} sleeps on my keyboard whenever I work.",
            "I have to feed our cat {v} before I go.",
        ],
        "also": [
            "We've also adopted a rabbit called {w}.",
            "There's a new puppy in the house too, {w}.",
        ],
        "around": ["The neighbour's dog barks at every delivery van."],
        "values": [("Miso", "Pip"), ("Pepper", "Waffle"), ("Juniper", "Clover")],
    },
]

# How a user turn puts a fact and a request together, clause first or request first.
JOIN_FIRST = ["{clause} {request}", "{clause} Anyway, {request_lower}"]
JOIN_AFTER = ["{request} {clause}", "{request} Oh, and one thing: {clause}"]
