"""Writes the synthetic evaluation conversations beside this file (seeded, so reproducible).

    python tests/data/eval/generate.py

``locomo_synthetic.json``: three LoCoMo-format conversations (nested layout for the first,
flat for the others) between two people over dated sessions: facts told in passing
(names, numbers, places, plans, preferences), questions back, small talk, greetings and
thanks, a few image turns, dates written in the text ("yesterday", "last Friday",
"on 14 June"), and ``qa`` items of the five LoCoMo categories with their evidence turns.
Facts are spread evenly over both speakers, so a fair memory keeps both.

``longmemeval_synthetic.json``: LongMemEval-format instances, one of them over a
coding-agent session whose turns are OpenAI chat messages (assistant ``tool_calls``,
``tool`` results with a stack trace, an aborted request).

The files are frozen evaluation data: the offline baseline was tuned after they were
committed, and they must not change to suit it. Rerunning this script reproduces them
byte for byte.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

SEED = 20231118
HERE = Path(__file__).parent

PAIRS = [
    ("Caroline", "Melanie", datetime(2023, 5, 8, 13, 56)),
    ("Jon", "Gina", datetime(2023, 1, 20, 16, 4)),
    ("Priya", "Tomas", datetime(2023, 8, 14, 19, 30)),
]

GREETINGS = [
    "Hey {other}! How's it going?",
    "Hi {other}, good to hear from you!",
    "Hey {other}, long time no talk!",
    "Hi {other}! Hope your week is going well.",
    "Hello {other}! It's been a while.",
]
GREETING_REPLIES = [
    "Hey {other}! I'm good, thanks for asking. How about you?",
    "Hi {other}! All good here, busy as always.",
    "Hey! Great to hear from you too, {other}.",
    "Hi {other}! Doing well, thanks. What's new with you?",
]
REACTIONS = [
    "Wow, that's amazing!",
    "That's so cool, {other}!",
    "Oh nice, I love that.",
    "Haha, that sounds like a lot of fun.",
    "That's awesome, good for you!",
    "Oh wow, I had no idea.",
    "I totally get that.",
    "That sounds lovely.",
    "Aww, that's so sweet!",
    "No way, that's great news!",
]
CLOSINGS = [
    "Thanks, {other}! Talk soon.",
    "Anyway, I have to run. Bye!",
    "Take care, {other}! Catch up soon.",
    "Thanks for the chat, {other}. Have a great evening!",
    "Alright, talk to you later!",
]
CLOSING_REPLIES = [
    "Bye {other}! Take care.",
    "Thanks, you too!",
    "Talk soon, {other}!",
    "Sounds good, see you!",
]

PETS = [
    ("puppy", "Biscuit", "a golden retriever puppy sitting on a grey couch"),
    ("kitten", "Mochi", "a small black kitten playing with a ball of yarn"),
    ("rabbit", "Clover", "a white rabbit eating lettuce in a garden"),
    ("puppy", "Pepper", "a small beagle puppy lying on a blue blanket"),
]
HOBBIES = [
    ("pottery", "the community center on Elm Street", "Tuesday"),
    ("salsa dancing", "a studio called Rhythm House", "Thursday"),
    ("rock climbing", "the Summit climbing gym", "Wednesday"),
    ("watercolor painting", "the public library", "Monday"),
]
TRIPS = [
    ("Lisbon", "pastel de nata", "the Belem tower"),
    ("Kyoto", "matcha ice cream", "the Fushimi Inari shrine"),
    ("Vancouver", "salmon sushi", "Stanley Park"),
    ("Edinburgh", "shortbread", "Arthur's Seat"),
]
JOBS = [
    ("nurse", "St. Mary's hospital"),
    ("software engineer", "a startup called Brightleaf"),
    ("high school teacher", "Lincoln High"),
    ("graphic designer", "a marketing agency called Northwind"),
]
BOOKS = [
    ("The Night Circus", "Erin Morgenstern"),
    ("Project Hail Mary", "Andy Weir"),
    ("Pachinko", "Min Jin Lee"),
    ("The Overstory", "Richard Powers"),
]
RACES = [("half marathon", "21", "2 hours and 5 minutes"), ("10K run", "10", "52 minutes")]
FOODS = [("Thai", "green curry"), ("Mexican", "tacos al pastor"), ("Italian", "mushroom risotto")]
INSTRUMENTS = ["guitar", "piano", "violin", "ukulele"]
CHARITIES = [
    ("LGBTQ support group", "the youth center"),
    ("food bank", "the Riverside food bank"),
    ("animal shelter", "the Happy Paws shelter"),
]
KIDS = [("Lily", "7"), ("Noah", "5"), ("Ava", "9"), ("Leo", "4")]


def day_text(moment: datetime) -> str:
    """A date as LoCoMo answers write it: ``5 May 2023``."""
    return f"{moment.day} {moment:%B %Y}"


def session_stamp(moment: datetime) -> str:
    """A LoCoMo session date: ``1:56 pm on 8 May, 2023``."""
    hour = moment.hour % 12 or 12
    return (
        f"{hour}:{moment:%M} {'am' if moment.hour < 12 else 'pm'} on {moment.day} {moment:%B, %Y}"
    )


@dataclass
class Turn:
    speaker: str
    text: str
    caption: str | None = None


@dataclass
class Episode:
    """A few turns on one topic and the questions they answer.

    QA evidence refers to turns by their index inside the episode.
    """

    turns: list[Turn]
    qa: list[tuple[str, str, list[int], int]] = field(default_factory=list)


def last_weekday(moment: datetime, weekday: int) -> datetime:
    delta = (moment.weekday() - weekday) % 7 or 7
    return moment - timedelta(days=delta)


class Builder:
    def __init__(self, rng: random.Random, a: str, b: str) -> None:
        self.rng = rng
        self.names = (a, b)
        self.used: dict[str, set[int]] = {}

    def pick(self, pool_name: str, pool: list[Any]) -> Any:
        used = self.used.setdefault(pool_name, set())
        free = [i for i in range(len(pool)) if i not in used] or list(range(len(pool)))
        choice = self.rng.choice(free)
        used.add(choice)
        return pool[choice]

    def other(self, who: str) -> str:
        return self.names[1] if who == self.names[0] else self.names[0]

    def react(self, who: str) -> Turn:
        return Turn(who, self.rng.choice(REACTIONS).format(other=self.other(who)))

    # -- episodes -----------------------------------------------------------------------

    def pet(self, who: str, when: datetime) -> Episode:
        kind, name, caption = self.pick("pet", PETS)
        o = self.other(who)
        adopted = when - timedelta(days=1)
        return Episode(
            [
                Turn(who, f"Guess what, I adopted a {kind} yesterday! His name is {name}."),
                Turn(o, f"Oh my gosh, congrats! How old is {name}?"),
                Turn(
                    who,
                    f"{name} is 10 weeks old. He already knows how to sit, and he sleeps at "
                    "the foot of my bed.",
                ),
                Turn(who, f"Here's {name}!", caption),
                self.react(o),
            ],
            [
                (f"What is the name of {who}'s {kind}?", name, [0], 4),
                (f"When did {who} adopt {name}?", day_text(adopted), [0], 2),
                (f"How old was {name} when {who} talked about him?", "10 weeks", [2], 4),
            ],
        )

    def hobby(self, who: str, when: datetime) -> Episode:
        hobby, place, weekday = self.pick("hobby", HOBBIES)
        o = self.other(who)
        friday = last_weekday(when, 4)
        return Episode(
            [
                Turn(o, "So what have you been up to lately?"),
                Turn(
                    who,
                    f"I started a {hobby} class last Friday! It's every {weekday} evening at "
                    f"{place}.",
                ),
                Turn(o, f"That's so cool! What got you into {hobby}?"),
                Turn(
                    who,
                    "I needed something that gets me off my phone after work. It helps me "
                    "relax, and the teacher is really patient.",
                ),
                self.react(o),
            ],
            [
                (f"What class did {who} start?", hobby, [1], 4),
                (f"When did {who} start the {hobby} class?", day_text(friday), [1], 2),
                (f"Where does {who} take the {hobby} class?", place, [1], 4),
                (f"Why did {who} take up {hobby}?", "to get off phone and relax", [3], 3),
            ],
        )

    def trip(self, who: str, when: datetime) -> Episode:
        city, food, sight = self.pick("trip", TRIPS)
        o = self.other(who)
        month = (when.replace(day=1) + timedelta(days=40)).strftime("%B")
        return Episode(
            [
                Turn(who, f"I've got some exciting news: I booked a trip to {city} for {month}!"),
                Turn(o, "No way! Who are you going with?"),
                Turn(
                    who,
                    f"Just me and my sister. We're staying 6 nights, and I really want to see "
                    f"{sight}.",
                ),
                Turn(o, f"You have to try the {food} there, everyone says it's the best."),
                Turn(who, f"Ha, noted! {food.capitalize()} is already on my list."),
            ],
            [
                (f"Where is {who} travelling in {month}?", city, [0], 4),
                (f"Who is {who} travelling to {city} with?", "sister", [2], 4),
                (f"How many nights will {who} stay in {city}?", "6 nights", [2], 4),
                (f"What food did {o} recommend for {city}?", food, [3], 4),
            ],
        )

    def job(self, who: str, when: datetime) -> Episode:
        role, employer = self.pick("job", JOBS)
        o = self.other(who)
        start = when + timedelta(days=14)
        return Episode(
            [
                Turn(o, "How's the job hunt going?"),
                Turn(
                    who,
                    f"Actually, I got an offer! I'm going to be a {role} at {employer}. I "
                    f"start on {start.day} {start:%B}.",
                ),
                Turn(o, "Congratulations!! That's huge. Are you nervous?"),
                Turn(
                    who,
                    "A little, but mostly excited. The pay is 15 percent better than my old "
                    "job and the commute is only 20 minutes.",
                ),
                self.react(o),
            ],
            [
                (f"What job did {who} get?", role, [1], 4),
                (f"Where will {who} work?", employer, [1], 4),
                (f"When does {who} start the new job?", f"{start.day} {start:%B}", [1], 2),
                (f"How long is {who}'s commute to the new job?", "20 minutes", [3], 4),
            ],
        )

    def book(self, who: str, when: datetime) -> Episode:
        title, author = self.pick("book", BOOKS)
        o = self.other(who)
        return Episode(
            [
                Turn(o, "Read anything good recently?"),
                Turn(who, f"Yes! I just finished {title} by {author}. I couldn't put it down."),
                Turn(o, "Ooh, what's it about?"),
                Turn(
                    who,
                    "I don't want to spoil it, but it's the kind of story that stays with "
                    "you. My favorite genre is still science fiction though.",
                ),
                Turn(o, f"I'll add {title} to my list, thanks!"),
            ],
            [
                (f"What book did {who} just finish?", title, [1], 4),
                (f"Who wrote the book {who} finished?", author, [1], 4),
                (f"What is {who}'s favorite genre?", "science fiction", [3], 4),
            ],
        )

    def race(self, who: str, when: datetime) -> Episode:
        race, km, time_taken = self.pick("race", RACES)
        o = self.other(who)
        raced = last_weekday(when, 6)
        return Episode(
            [
                Turn(who, f"I ran my first {race} last Sunday!"),
                Turn(o, "Whoa, how did it go?"),
                Turn(
                    who,
                    f"I finished in {time_taken}. My legs were jelly after {km} kilometers, "
                    "but I didn't stop once.",
                ),
                Turn(o, "That's incredible, I could never do that."),
                Turn(who, "You totally could! We should train together sometime."),
            ],
            [
                (f"What race did {who} run?", race, [0], 4),
                (f"When did {who} run the {race}?", day_text(raced), [0], 2),
                (f"How long did it take {who} to finish the {race}?", time_taken, [2], 4),
            ],
        )

    def food(self, who: str, when: datetime) -> Episode:
        cuisine, dish = self.pick("food", FOODS)
        o = self.other(who)
        return Episode(
            [
                Turn(o, "Want to grab dinner next week?"),
                Turn(
                    who,
                    f"Definitely! I'm vegetarian now, so somewhere {cuisine} would be great. "
                    f"I've been craving {dish}.",
                ),
                Turn(o, "Vegetarian? Since when?"),
                Turn(who, "Since March. I feel a lot better, honestly."),
                Turn(o, "Good for you. I'll find a place."),
            ],
            [
                (f"What diet does {who} follow?", "vegetarian", [1], 4),
                (f"Which cuisine did {who} suggest for dinner?", cuisine, [1], 4),
                (f"Since when has {who} been vegetarian?", "March", [3], 2),
            ],
        )

    def music(self, who: str, when: datetime) -> Episode:
        instrument = self.pick("instrument", INSTRUMENTS)
        o = self.other(who)
        return Episode(
            [
                Turn(
                    who,
                    f"Oh, I forgot to tell you. I've been learning to play the {instrument}. "
                    "I practice 30 minutes every morning.",
                ),
                Turn(o, "That's awesome! Can you play any songs yet?"),
                Turn(who, "Just a couple of easy ones. My neighbor Rosa gives me lessons."),
                self.react(o),
            ],
            [
                (f"Which instrument is {who} learning?", instrument, [0], 4),
                (f"How long does {who} practice each morning?", "30 minutes", [0], 4),
                (f"Who gives {who} music lessons?", "Rosa", [2], 4),
            ],
        )

    def charity(self, who: str, when: datetime) -> Episode:
        group, place = self.pick("charity", CHARITIES)
        o = self.other(who)
        return Episode(
            [
                Turn(
                    who, f"I went to a {group} meeting at {place} on Saturday. It was so powerful."
                ),
                Turn(o, "That's wonderful. What happened there?"),
                Turn(
                    who,
                    "People shared their stories and I signed up to volunteer two Saturdays "
                    "a month.",
                ),
                Turn(o, "I'm so proud of you, that really matters."),
                Turn(who, "Thanks, it means a lot that you say that."),
            ],
            [
                (f"Which group did {who} visit on Saturday?", group, [0], 4),
                (f"How often will {who} volunteer?", "two Saturdays a month", [2], 4),
                (
                    f"When did {who} go to the {group} meeting?",
                    day_text(last_weekday(when, 5)),
                    [0],
                    2,
                ),
            ],
        )

    def kid(self, who: str, when: datetime) -> Episode:
        name, age = self.pick("kid", KIDS)
        o = self.other(who)
        return Episode(
            [
                Turn(o, "How are the kids doing?"),
                Turn(
                    who,
                    f"{name} just turned {age}! We had a dinosaur party in the backyard last "
                    "weekend.",
                ),
                Turn(o, "Dinosaurs, that's adorable!"),
                Turn(
                    who,
                    f"{name} wants to be a paleontologist now. We're taking {name} to the "
                    "natural history museum next month.",
                ),
                self.react(o),
            ],
            [
                (f"How old did {who}'s child {name} turn?", age, [1], 4),
                (f"What theme was {name}'s birthday party?", "dinosaur", [1], 4),
                (f"What does {name} want to be?", "paleontologist", [3], 3),
            ],
        )

    EPISODES = ("pet", "hobby", "trip", "job", "book", "race", "food", "music", "charity", "kid")


def build_conversation(rng: random.Random, a: str, b: str, start: datetime) -> dict[str, Any]:
    builder = Builder(rng, a, b)
    sessions: list[list[Turn]] = []
    dates: list[datetime] = []
    episode_log: list[tuple[int, int, Episode, str]] = []
    when = start
    kinds = list(Builder.EPISODES)
    rng.shuffle(kinds)
    # Every episode kind twice, once per speaker, spread over eight sessions.
    plan = [(kind, speaker) for kind in kinds for speaker in (a, b)]
    rng.shuffle(plan)
    per_session = [plan[i::8] for i in range(8)]
    for index in range(8):
        opener = a if index % 2 == 0 else b
        other = builder.other(opener)
        turns: list[Turn] = [
            Turn(opener, rng.choice(GREETINGS).format(other=other)),
            Turn(other, rng.choice(GREETING_REPLIES).format(other=opener)),
        ]
        for kind, speaker in per_session[index]:
            episode: Episode = getattr(builder, kind)(speaker, when)
            episode_log.append((index, len(turns), episode, speaker))
            turns.extend(episode.turns)
            if rng.random() < 0.5:
                turns.append(builder.react(builder.other(turns[-1].speaker)))
        turns.append(Turn(opener, rng.choice(CLOSINGS).format(other=other)))
        turns.append(Turn(other, rng.choice(CLOSING_REPLIES).format(other=opener)))
        sessions.append(turns)
        dates.append(when)
        when = when + timedelta(days=rng.randint(5, 19), minutes=rng.randint(-200, 200))

    convo: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for index, (turns, moment) in enumerate(zip(sessions, dates, strict=True), start=1):
        convo[f"session_{index}_date_time"] = session_stamp(moment)
        rows = []
        for number, turn in enumerate(turns, start=1):
            row: dict[str, Any] = {
                "speaker": turn.speaker,
                "dia_id": f"D{index}:{number}",
                "text": turn.text,
            }
            if turn.caption:
                row["img_url"] = [f"https://example.org/img/{index}-{number}.jpg"]
                row["blip_caption"] = turn.caption
            rows.append(row)
        convo[f"session_{index}"] = rows

    qa: list[dict[str, Any]] = []
    by_speaker: dict[str, list[tuple[str, str, str]]] = {a: [], b: []}
    for session_index, offset, episode, speaker in episode_log:
        for question, answer, turn_indexes, category in episode.qa:
            evidence = [f"D{session_index + 1}:{offset + i + 1}" for i in turn_indexes]
            qa.append(
                {"question": question, "answer": answer, "evidence": evidence, "category": category}
            )
            if category == 4:
                by_speaker[speaker].append((question, answer, evidence[0]))
    # Multi-hop: two facts of one speaker from different sessions.
    for speaker in (a, b):
        facts = by_speaker[speaker]
        for first, second in zip(facts[::7], facts[3::7], strict=False):
            qa.append(
                {
                    "question": f"Two things: {first[0]} {second[0]}",
                    "answer": f"{first[1]}; {second[1]}",
                    "evidence": [first[2], second[2]],
                    "category": 1,
                }
            )
    # Adversarial: a fact asked about the wrong speaker.
    for speaker in (a, b):
        question, answer, evidence = by_speaker[speaker][1]
        qa.append(
            {
                "question": question.replace(speaker, builder.other(speaker)),
                "adversarial_answer": answer,
                "evidence": [evidence],
                "category": 5,
            }
        )
    # Real LoCoMo files hold a few malformed evidence ids; parse leniently.
    qa[2]["evidence"] = [qa[2]["evidence"][0].replace("D", "D:", 1)]
    qa[5]["evidence"] = qa[5]["evidence"] + ["D30:05"]
    return {"conversation": convo, "qa": qa}


def coding_session() -> list[dict[str, Any]]:
    """A coding-agent session as OpenAI chat messages: tool calls, results, a stack trace."""
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/billing/export.py", line 88, in export_invoices\n'
        "    rows = [render_row(r) for r in batch]\n"
        '  File "/srv/app/billing/export.py", line 41, in render_row\n'
        '    amount = format_money(row["amount"], row["currency"])\n'
        "KeyError: 'currency'"
    )

    def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }

    def result(call_id: str, content: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": content}

    source = "\n".join(
        [
            "def render_row(row):",
            '    amount = format_money(row["amount"], row["currency"])',
            "    return f\"{row['id']};{row['date']};{amount}\"",
        ]
        * 4
    )
    return [
        {
            "role": "user",
            "content": "The nightly invoice export crashed again. Can you find out why and fix "
            "it? The deadline for the March invoices is Friday.",
            "has_answer": True,
        },
        call("call_1", "bash", {"command": "python -m billing.export --month 2024-03"}),
        result("call_1", trace),
        call("call_2", "read", {"path": "billing/export.py"}),
        result("call_2", source),
        {
            "role": "assistant",
            "content": "The export crashes with a KeyError because legacy rows imported before "
            "2022 have no currency column. I'll default missing currencies to EUR.",
            "has_answer": True,
        },
        {"role": "user", "content": "Sounds good. Use EUR, that's what finance expects."},
        call(
            "call_3",
            "edit",
            {
                "path": "billing/export.py",
                "old": 'row["currency"]',
                "new": 'row.get("currency", "EUR")',
            },
        ),
        result("call_3", "Edited billing/export.py: 1 replacement."),
        call("call_4", "bash", {"command": "pytest tests/billing -q"}),
        result("call_4", "........................\n24 passed in 3.12s"),
        {"role": "assistant", "content": "[aborted] Request was aborted"},
        {"role": "user", "content": "thanks!"},
        {
            "role": "assistant",
            "content": "Fixed: billing/export.py now defaults a missing currency to EUR, and "
            "all 24 billing tests pass.",
            "has_answer": True,
        },
    ]


def chat_session(facts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [{"role": "user", "content": "Hi! Quick question for you."}]
    for user, assistant in facts:
        turns.append({"role": "user", "content": user, "has_answer": True})
        turns.append({"role": "assistant", "content": assistant})
    turns.append({"role": "user", "content": "Great, thank you so much!"})
    turns.append({"role": "assistant", "content": "You're welcome! Anything else?"})
    return turns


def longmemeval() -> list[dict[str, Any]]:
    filler = chat_session(
        [
            (
                "Can you suggest a good stretch for my lower back? I sit at a desk all day.",
                "Try the cat-cow stretch: 10 slow repetitions, twice a day.",
            )
        ]
    )
    car = chat_session(
        [
            (
                "I just bought a used Honda Civic, a 2018 model, for 14,500 dollars.",
                "Congratulations! A 2018 Civic is a reliable choice.",
            ),
            ("What oil should I use for it?", "Use 0W-20 synthetic oil for that model."),
        ]
    )
    car_update = chat_session(
        [
            (
                "Update: I sold the Civic and I now drive a Mazda 3 that I leased in June.",
                "Nice upgrade! The Mazda 3 is fun to drive.",
            )
        ]
    )
    plant = chat_session(
        [
            (
                "My fiddle leaf fig is dropping leaves. I water it every Sunday.",
                "Watering weekly may be too much; check that the top 5 cm of soil is dry first.",
            )
        ]
    )
    return [
        {
            "question_id": "synthetic_ssu_1",
            "question_type": "single-session-user",
            "question": "How much did I pay for my Honda Civic?",
            "answer": "14,500 dollars",
            "question_date": "2023/06/30 (Fri) 10:00",
            "haystack_session_ids": ["s_back", "s_car"],
            "haystack_dates": ["2023/05/02 (Tue) 08:15", "2023/05/20 (Sat) 14:02"],
            "haystack_sessions": [filler, car],
            "answer_session_ids": ["s_car"],
        },
        {
            "question_id": "synthetic_ku_1",
            "question_type": "knowledge-update",
            "question": "What car do I drive now?",
            "answer": "Mazda 3",
            "question_date": "2023/07/15 (Sat) 09:00",
            "haystack_session_ids": ["s_car", "s_plant", "s_car2"],
            "haystack_dates": [
                "2023/05/20 (Sat) 14:02",
                "2023/06/03 (Sat) 11:40",
                "2023/07/01 (Sat) 18:25",
            ],
            "haystack_sessions": [car, plant, car_update],
            "answer_session_ids": ["s_car2"],
        },
        {
            "question_id": "synthetic_ssa_1",
            "question_type": "single-session-assistant",
            "question": "Which oil did you recommend for my car?",
            "answer": "0W-20 synthetic",
            "question_date": "2023/06/30 (Fri) 10:00",
            "haystack_session_ids": ["s_car", "s_plant"],
            "haystack_dates": ["2023/05/20 (Sat) 14:02", "2023/06/03 (Sat) 11:40"],
            "haystack_sessions": [car, plant],
            "answer_session_ids": ["s_car"],
        },
        {
            "question_id": "synthetic_code_1",
            "question_type": "single-session-assistant",
            "question": "Which currency does the invoice export default to when a row has none?",
            "answer": "EUR",
            "question_date": "2024-04-03T09:00:00Z",
            "haystack_session_ids": ["s_back", "s_code"],
            "haystack_dates": ["2024/03/29 (Fri) 08:15", "2024/04/02 (Tue) 22:40"],
            "haystack_sessions": [filler, coding_session()],
            "answer_session_ids": ["s_code"],
        },
        {
            "question_id": "synthetic_code_2_abs",
            "question_type": "single-session-user",
            "question": "Which database did I migrate the invoices to?",
            "answer": "The information provided is not enough to answer this question.",
            "question_date": "2024/04/03 (Wed) 09:00",
            "haystack_session_ids": ["s_code"],
            "haystack_dates": ["2024/04/02 (Tue) 22:40"],
            "haystack_sessions": [coding_session()],
            "answer_session_ids": [],
        },
    ]


def main() -> None:
    rng = random.Random(SEED)
    conversations = []
    for index, (a, b, start) in enumerate(PAIRS):
        convo = build_conversation(rng, a, b, start)
        if index == 0:
            conversations.append({"sample_id": "synthetic-0", **convo})
        else:
            conversations.append({**convo["conversation"], "qa": convo["qa"]})
    dump = {"ensure_ascii": False, "indent": 1}
    (HERE / "locomo_synthetic.json").write_text(json.dumps(conversations, **dump) + "\n")
    (HERE / "longmemeval_synthetic.json").write_text(json.dumps(longmemeval(), **dump) + "\n")


if __name__ == "__main__":
    main()
