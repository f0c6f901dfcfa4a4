"""Generate course_lib/envs/reverse_text/reverse_text.jsonl: short English paragraphs for the reverse-text task.

Each row is {"id": int, "text": str}: one to three sentences, 60-350 characters,
built from the small hand-written grammar and word lists below. No answers are
stored; the environment computes the target as text[::-1].

Deterministic (random.Random(0), standard library only). Regenerate with:

    python data/make_reverse_text.py

Written for the "LLM RL Environments" course; the output is released under CC BY 4.0.
"""

import json
import random
from pathlib import Path

# The file ships with the environment, in its folder.
OUT = Path(__file__).resolve().parent.parent / "course_lib" / "envs" / "reverse_text" / "reverse_text.jsonl"
N_ROWS = 1000
MIN_LEN, MAX_LEN = 60, 350

PEOPLE = [  # (name, subject pronoun, possessive pronoun)
    ("Maria", "she", "her"),
    ("Omar", "he", "his"),
    ("Priya", "she", "her"),
    ("Lena", "she", "her"),
    ("Tomas", "he", "his"),
    ("Aiko", "she", "her"),
    ("Kwame", "he", "his"),
    ("Sofia", "she", "her"),
    ("Jonas", "he", "his"),
    ("Elena", "she", "her"),
    ("Mateo", "he", "his"),
    ("Hana", "she", "her"),
    ("Ravi", "he", "his"),
    ("Ingrid", "she", "her"),
    ("Samuel", "he", "his"),
    ("Chloe", "she", "her"),
    ("Diego", "he", "his"),
    ("Nadia", "she", "her"),
    ("Felix", "he", "his"),
    ("Amara", "she", "her"),
    ("Sam", "they", "their"),
    ("Grandpa Joe", "he", "his"),
    ("Aunt Rosa", "she", "her"),
    ("Dr. Patel", "she", "her"),
    ("Captain Reyes", "he", "his"),
    ("Ms. Okafor", "she", "her"),
    ("Mr. Lindqvist", "he", "his"),
    ("Professor Ito", "they", "their"),
]
NAMES = [p[0] for p in PEOPLE]
CITIES = [
    "Lisbon",
    "Nairobi",
    "Oslo",
    "Kyoto",
    "Lima",
    "Cairo",
    "Toronto",
    "Melbourne",
    "Dublin",
    "Hanoi",
    "Quito",
    "Krakow",
    "Seville",
    "Montreal",
    "Accra",
    "Auckland",
    "Bergen",
    "Porto",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
ADJS = [
    "small",
    "old",
    "bright",
    "quiet",
    "heavy",
    "green",
    "broken",
    "shiny",
    "wooden",
    "tiny",
    "enormous",
    "dusty",
    "warm",
    "cold",
    "purple",
    "curious",
    "patient",
    "noisy",
    "gentle",
    "strange",
    "yellow",
    "narrow",
    "crooked",
    "soft",
    "ancient",
    "clever",
    "sleepy",
    "golden",
    "striped",
    "rusty",
    "fragile",
    "cheerful",
    "silver",
    "muddy",
    "polished",
    "lonely",
]
NOUNS = [
    "lamp",
    "bicycle",
    "kettle",
    "notebook",
    "umbrella",
    "violin",
    "basket",
    "ladder",
    "compass",
    "teapot",
    "lantern",
    "map",
    "drum",
    "scarf",
    "window frame",
    "letter",
    "clock",
    "boat",
    "mirror",
    "pencil",
    "blanket",
    "key",
    "suitcase",
    "telescope",
    "piano",
    "kite",
    "bottle",
    "wheelbarrow",
    "envelope",
    "chair",
    "candle",
    "shovel",
    "radio",
    "hat",
    "accordion",
]
ANIMALS = [
    "cat",
    "dog",
    "fox",
    "owl",
    "goat",
    "rabbit",
    "heron",
    "turtle",
    "crow",
    "horse",
    "squirrel",
    "parrot",
    "hedgehog",
    "donkey",
    "otter",
    "sparrow",
    "badger",
    "duck",
]
PLACES = [
    "kitchen",
    "library",
    "harbor",
    "market",
    "station",
    "attic",
    "meadow",
    "bakery",
    "museum",
    "garage",
    "orchard",
    "classroom",
    "workshop",
    "lighthouse",
    "hallway",
    "village square",
    "train platform",
    "riverbank",
    "greenhouse",
    "post office",
]
VERBS_T_PAST = [
    "painted",
    "fixed",
    "carried",
    "found",
    "dropped",
    "cleaned",
    "borrowed",
    "sold",
    "opened",
    "wrapped",
    "measured",
    "lost",
    "polished",
    "repaired",
    "hid",
    "moved",
    "weighed",
    "sketched",
    "returned",
    "packed",
    "lifted",
    "examined",
    "ordered",
    "tested",
]
VERBS_T_PRES = [  # (third person singular, base form)
    ("paints", "paint"),
    ("fixes", "fix"),
    ("carries", "carry"),
    ("cleans", "clean"),
    ("borrows", "borrow"),
    ("opens", "open"),
    ("wraps", "wrap"),
    ("measures", "measure"),
    ("polishes", "polish"),
    ("repairs", "repair"),
    ("moves", "move"),
    ("sketches", "sketch"),
    ("checks", "check"),
    ("inspects", "inspect"),
    ("dusts", "dust"),
    ("tunes", "tune"),
]
VERBS_I_PAST = [
    "laughed",
    "waited",
    "sang",
    "slept",
    "whistled",
    "danced",
    "shivered",
    "wandered",
    "hesitated",
    "vanished",
    "rested",
    "listened",
    "sighed",
    "appeared",
    "stumbled",
]
ANIMAL_VERBS_PAST = [
    "chased",
    "watched",
    "ignored",
    "followed",
    "sniffed",
    "guarded",
    "nudged",
    "circled",
]
ADVERBS = [
    "slowly",
    "quickly",
    "carefully",
    "quietly",
    "happily",
    "suddenly",
    "patiently",
    "nervously",
    "proudly",
    "gently",
    "loudly",
    "eagerly",
    "calmly",
    "twice",
]
TIMES = [
    "before breakfast",
    "after lunch",
    "at noon",
    "at dawn",
    "late at night",
    "in the evening",
    "yesterday",
    "last week",
    "this morning",
    "during the storm",
    "before the rain",
    "after school",
    "at sunset",
    "on the weekend",
]
WEATHER = ["rain", "snow", "fog", "wind", "sunshine", "hail", "thunder", "drizzle"]
UNITS = ["minutes", "hours", "days", "weeks", "miles", "steps", "pages"]
FOODS = [
    "soup",
    "bread",
    "apples",
    "rice",
    "tea",
    "cheese",
    "pancakes",
    "lemonade",
    "oranges",
    "noodles",
    "cookies",
    "porridge",
    "plums",
    "dumplings",
]
COUNT_FOODS = [
    "apples",
    "oranges",
    "plums",
    "cookies",
    "dumplings",
    "pancakes",
    "eggs",
    "muffins",
    "pears",
    "lemons",
    "biscuits",
    "tomatoes",
]
PRICE_VERBS = ["sold", "bought", "auctioned", "insured", "repaired", "shipped", "raffled"]
REASONS = [
    "wanted to surprise {other}",
    "had promised {other} a favor",
    "could not sleep",
    "was tired of waiting",
    "had nothing better to do",
    "wanted to finish before {day}",
    "had lost a bet with {other}",
    "missed the last bus to {city}",
]
FEELINGS = [
    "surprised",
    "tired",
    "delighted",
    "confused",
    "hungry",
    "relieved",
    "worried",
    "amused",
    "impatient",
    "grateful",
    "sleepy",
    "thrilled",
]
QUOTES = [
    "We should leave before it gets dark",
    "I think the {noun} is in the {place}",
    "Nobody touches the {adj} {noun}",
    "Bring the {noun} and follow me",
    "That was the best {food} I have ever had",
    "Count them again, slowly",
    "The {animal} is back",
    "Meet me at the {place} on {day}",
    "It is exactly {num} steps from here",
    "Where did you put the {noun}",
    "Is the {place} open on {day}",
]
NUMBER_WORDS = [
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "twelve",
    "a dozen",
    "twenty",
    "forty",
    "a hundred",
]


def a_or_an(word):
    return "an" if word[0].lower() in "aeiou" else "a"


def cap(s):
    return s[0].upper() + s[1:]


def plural(word):
    return word + ("es" if word.endswith(("x", "s", "sh", "ch")) else "s")


def np(rng, with_adj=0.7, owner=None):
    """A noun phrase such as 'the rusty kettle', 'an old kite' or 'her lamp'."""
    noun = rng.choice(NOUNS)
    if rng.random() < with_adj:
        adj = rng.choice(ADJS)
        if rng.random() < 0.2:
            adj2 = rng.choice([a for a in ADJS if a != adj])
            phrase = f"{adj}, {adj2} {noun}"
        else:
            phrase = f"{adj} {noun}"
    else:
        phrase = noun
    det = owner or rng.choice(["the", "the", "a", "her", "his", "their", "my", "our"])
    if det == "a":
        det = a_or_an(phrase)
    return f"{det} {phrase}"


def other_than(rng, name):
    return rng.choice([n for n in NAMES if n != name])


def fill(rng, template, name="Maria"):
    return template.format(
        noun=rng.choice(NOUNS),
        place=rng.choice(PLACES),
        adj=rng.choice(ADJS),
        food=rng.choice(FOODS),
        animal=rng.choice(ANIMALS),
        day=rng.choice(DAYS),
        num=rng.randint(12, 480),
        city=rng.choice(CITIES),
        other=other_than(rng, name),
    )


def s_person_did(rng):
    name, pron, _ = rng.choice(PEOPLE)
    s = f"{name} {rng.choice(VERBS_T_PAST)} {np(rng)}"
    r = rng.random()
    if r < 0.4:
        s += f" in the {rng.choice(PLACES)}"
    elif r < 0.6:
        s += f" in {rng.choice(CITIES)}"
    if rng.random() < 0.5:
        s += f" {rng.choice(TIMES)}"
    r = rng.random()
    if r < 0.3:
        was = "were" if pron == "they" else "was"
        because = fill(rng, rng.choice(REASONS), name).replace("was tired", f"{was} tired")
        s += f" because {pron} {because}"
    elif r < 0.45:
        s += f", which nobody had touched since {rng.randint(1950, 2020)}"
    return s + rng.choice([".", ".", ".", "!"])


def s_animal(rng):
    adj = rng.choice(ADJS)
    s = f"The {adj} {rng.choice(ANIMALS)} {rng.choice(ANIMAL_VERBS_PAST)} {np(rng, 0.5)}"
    if rng.random() < 0.6:
        s += f" {rng.choice(ADVERBS)}"
    if rng.random() < 0.5:
        s += f" until the {rng.choice(ANIMALS)} {rng.choice(VERBS_I_PAST)}"
    return s + "."


def s_weekday(rng):
    s = (
        f"On {rng.choice(DAYS)}, {rng.choice(NUMBER_WORDS)} {plural(rng.choice(ANIMALS))} "
        f"{rng.choice(VERBS_I_PAST)} near the {rng.choice(PLACES)}"
    )
    if rng.random() < 0.4:
        s += f" while {rng.choice(NAMES)} {rng.choice(VERBS_T_PAST)} {np(rng)}"
    return s + "."


def s_question(rng):
    r = rng.random()
    if r < 0.35:
        return (
            f"Why did {rng.choice(NAMES)} leave {np(rng)} "
            f"{rng.choice(['in', 'behind', 'outside', 'next to'])} the {rng.choice(PLACES)}?"
        )
    if r < 0.7:
        return f"Who {rng.choice(VERBS_T_PAST)} {np(rng)} {rng.choice(TIMES)}?"
    adj = rng.choice(ADJS)
    return f"Have you ever seen {a_or_an(adj)} {adj} {rng.choice(ANIMALS)} in {rng.choice(CITIES)}?"


def s_quote(rng):
    speaker = rng.choice(NAMES)
    quote = fill(rng, rng.choice(QUOTES), speaker)
    end = "?" if quote.startswith(("Where", "Is ")) else rng.choice([".", "!"])
    if rng.random() < 0.5:
        verb = "asked" if end == "?" else rng.choice(["said", "whispered", "shouted", "announced", "muttered"])
        return f'{speaker} {verb}, "{quote}{end}"'
    verb = rng.choice(["asked", "called"]) if end == "?" else rng.choice(["said", "whispered", "called", "replied"])
    inner = "," if end == "." else end
    return f'"{quote}{inner}" {verb} {speaker}.'


def s_numbers(rng):
    r = rng.random()
    if r < 0.3:
        return (
            f"After {rng.randint(2, 59)} {rng.choice(UNITS)}, {np(rng)} finally "
            f"{rng.choice(['stopped', 'moved', 'worked', 'cracked', 'fell', 'opened'])}!"
        )
    if r < 0.6:
        adj = rng.choice(ADJS)
        return (
            f"In {rng.randint(1850, 2023)}, {a_or_an(adj)} {adj} {rng.choice(NOUNS)} "
            f"from {rng.choice(CITIES)} was {rng.choice(PRICE_VERBS)} for "
            f"{rng.randint(3, 950)} dollars."
        )
    if r < 0.8:
        shop = rng.choice(
            [
                "library",
                "market",
                "bakery",
                "museum",
                "post office",
                "pharmacy",
                "bookshop",
                "swimming pool",
                "cafe",
                "flower shop",
            ]
        )
        return (
            f"The {shop} opens at {rng.randint(6, 11)}:"
            f"{rng.choice(['00', '15', '30', '45'])} and closes at {rng.randint(4, 10)}:"
            f"{rng.choice(['00', '15', '30', '45'])} every day except {rng.choice(DAYS)}."
        )
    a = rng.randint(3, 40)
    return (
        f"{rng.choice(NAMES)} counted {a} {rng.choice(COUNT_FOODS)} on the table, "
        f"but only {rng.randint(1, a - 1)} were left by {rng.choice(DAYS)}."
    )


def s_habit(rng):
    name, pron, poss = rng.choice(PEOPLE)
    third, base = rng.choice(VERBS_T_PRES)
    feel3, feel = rng.choice(
        [("forgets", "forget"), ("remembers", "remember"), ("enjoys", "enjoy"), ("mentions", "mention")]
    )
    if pron == "they":
        feel3 = feel
    owner = poss if rng.random() < 0.5 else None
    return (
        f"Every {rng.choice(['morning', 'evening', 'winter', 'summer', 'Sunday', 'week'])}, "
        f"{name} {third} {np(rng, owner=owner)}; {pron} {rng.choice(['never', 'always'])} "
        f"{feel3} the {rng.choice(['reason', 'date', 'smell', 'noise', 'color', 'song'])}."
    )


def s_weather(rng):
    w = rng.choice(WEATHER)
    if rng.random() < 0.5:
        return (
            f"The {w} in {rng.choice(CITIES)} lasted {rng.choice(NUMBER_WORDS)} "
            f"{rng.choice(['hours', 'days', 'weeks'])}, so everyone stayed near the "
            f"{rng.choice(PLACES)}."
        )
    return (
        f"When the {w} began in {rng.choice(MONTHS)}, {rng.choice(NAMES)} felt "
        f"{rng.choice(FEELINGS)} and {rng.choice(VERBS_I_PAST)} {rng.choice(ADVERBS)}."
    )


def s_food(rng):
    a = rng.choice(NAMES)
    f1 = rng.choice(FOODS)
    return (
        f"{a} and {other_than(rng, a)} shared {f1} and "
        f"{rng.choice([f for f in FOODS if f != f1])} at the {rng.choice(PLACES)}, then "
        f"{rng.choice(VERBS_I_PAST)} {rng.choice(TIMES)}."
    )


def s_story(rng):
    """A long sentence with a subordinate clause (lets paragraphs reach ~350 characters)."""
    name, pron, poss = rng.choice(PEOPLE)
    n = rng.randint(2, 30)
    unit = rng.choice(["days", "weeks", "months", "years"])
    w = rng.choice(WEATHER)
    day, place, city = rng.choice(DAYS), rng.choice(PLACES), rng.choice(CITIES)
    thing = np(rng, 0.9, owner=rng.choice([poss, "the"]))
    return (
        f"Although the {w} had not stopped since {day}, {name} walked all the way to the "
        f"{place} in {city} to return {thing} that {pron} had borrowed from "
        f"{other_than(rng, name)} {n} {unit} earlier."
    )


def s_short(rng):
    return rng.choice(
        [
            f"It was {rng.choice(ADJS)}.",
            f"Nobody {rng.choice(VERBS_I_PAST)}.",
            f"The {rng.choice(ANIMALS)} {rng.choice(VERBS_I_PAST)}.",
            f"{rng.choice(NAMES)} felt {rng.choice(FEELINGS)}.",
            f"What a {rng.choice(ADJS)} {rng.choice(NOUNS)}!",
            f"Then it was {rng.choice(DAYS)} again.",
            "Nobody knew why.",
        ]
    )


GENERATORS = [
    (s_person_did, 4),
    (s_animal, 3),
    (s_weekday, 2),
    (s_question, 2),
    (s_quote, 2),
    (s_numbers, 3),
    (s_habit, 2),
    (s_weather, 2),
    (s_food, 1),
    (s_story, 2),
    (s_short, 1),
]
FUNCS = [g for g, _ in GENERATORS]
WEIGHTS = [w for _, w in GENERATORS]


def paragraph(rng):
    n = rng.choices([1, 2, 3], weights=[3, 4, 4])[0]
    sentences = []
    used = []
    for _ in range(n):
        f = rng.choices(FUNCS, weights=WEIGHTS)[0]
        # no generator twice in one paragraph; a bare short sentence never stands first
        while f in used or (f is s_short and not sentences):
            f = rng.choices(FUNCS, weights=WEIGHTS)[0]
        used.append(f)
        sentences.append(cap(f(rng)))
    return " ".join(sentences)


def main():
    rng = random.Random(0)
    seen = set()
    rows = []
    while len(rows) < N_ROWS:
        text = paragraph(rng)
        if not (MIN_LEN <= len(text) <= MAX_LEN) or text in seen:
            continue
        seen.add(text)
        rows.append({"id": len(rows), "text": text})
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
