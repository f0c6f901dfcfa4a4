"""Generate course_lib/envs/double_check/double_check.jsonl: arithmetic and short word problems with integer answers.

Each row is {"id": int, "question": str, "answer": str}; the answer is an exact integer
written as digits (with a leading "-" when negative). Every answer is computed by the code
below from the same numbers that are written into the question, never typed by hand.
Difficulty is mixed on purpose (a 135M model should get some right and many wrong):
about 40% easy one-step arithmetic, 25% two-step arithmetic, 35% short word problems,
shuffled together.

Deterministic (random.Random(0), standard library only). Regenerate with:

    python data/make_double_check.py

Written for the "LLM RL Environments" course; the output is released under CC BY 4.0.
"""

import json
import random
from pathlib import Path

# The file ships with the environment, in its folder.
OUT = Path(__file__).resolve().parent.parent / "course_lib" / "envs" / "double_check" / "double_check.jsonl"
N_EASY, N_TWO_STEP, N_WORD = 200, 125, 175

NAMES = [
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
    ("Nadia", "she", "her"),
    ("Felix", "he", "his"),
]
ASK = ["What is {e}?", "Compute {e}.", "Calculate {e}.", "What is the value of {e}?", "{e} = ?"]


def ask(rng, expr):
    return rng.choice(ASK).format(e=expr)


# ---------------------------------------------------------------- easy, one step


def easy(rng):
    op = rng.choices(["+", "-", "x", "/"], weights=[4, 3, 3, 2])[0]
    if op == "+":
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        words = rng.random() < 0.2
        return (ask(rng, f"{a} plus {b}") if words else ask(rng, f"{a} + {b}")), a + b
    if op == "-":
        a, b = rng.randint(5, 99), rng.randint(2, 99)
        if rng.random() < 0.75 and b > a:  # mostly non-negative results, some negative
            a, b = b, a
        words = rng.random() < 0.2
        return (ask(rng, f"{a} minus {b}") if words else ask(rng, f"{a} - {b}")), a - b
    if op == "x":
        a, b = rng.randint(2, 12), rng.randint(2, 25)
        if rng.random() < 0.5:
            a, b = b, a
        words = rng.random() < 0.2
        return (ask(rng, f"{a} times {b}") if words else ask(rng, f"{a} × {b}")), a * b
    b, q = rng.randint(2, 12), rng.randint(2, 15)
    a = b * q
    words = rng.random() < 0.2
    return (ask(rng, f"{a} divided by {b}") if words else ask(rng, f"{a} ÷ {b}")), q


# ---------------------------------------------------------------- two steps


def two_step(rng):
    kind = rng.randint(0, 6)
    if kind == 0:
        a, b, c = rng.randint(3, 15), rng.randint(3, 12), rng.randint(2, 60)
        return ask(rng, f"({a} × {b}) - {c}"), a * b - c
    if kind == 1:
        a, b, c = rng.randint(3, 15), rng.randint(3, 12), rng.randint(2, 60)
        return ask(rng, f"{a} × {b} + {c}"), a * b + c
    if kind == 2:
        a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(2, 9)
        return ask(rng, f"({a} + {b}) × {c}"), (a + b) * c
    if kind == 3:
        a, b, c = rng.randint(10, 99), rng.randint(10, 99), rng.randint(10, 99)
        return ask(rng, f"{a} + {b} + {c}"), a + b + c
    if kind == 4:
        a, b, c = rng.randint(40, 150), rng.randint(5, 60), rng.randint(5, 60)
        return ask(rng, f"{a} - {b} - {c}"), a - b - c
    if kind == 5:
        c, q, b = rng.randint(2, 9), rng.randint(2, 12), rng.randint(1, 30)
        a = c * q + b
        return ask(rng, f"({a} - {b}) ÷ {c}"), (a - b) // c
    a, b, c = rng.randint(20, 99), rng.randint(2, 9), rng.randint(2, 9)
    return ask(rng, f"{a} - {b} × {c}"), a - b * c


# ---------------------------------------------------------------- word problems


def w_bundle_price(rng):
    item = rng.choice(["pencils", "erasers", "stickers", "postcards", "buttons", "marbles"])
    per, price = rng.choice([(3, 2), (2, 5), (4, 3), (5, 2), (3, 4), (2, 3), (6, 5)])
    k = rng.randint(2, 9)
    n = per * k
    q = f"A shop sells {item} at {per} for {price} dollars. How many dollars do {n} {item} cost?"
    return q, price * k


def w_give_and_buy(rng):
    name, pron, _ = rng.choice(NAMES)
    other = rng.choice([n for n, _, _ in NAMES if n != name])
    thing = rng.choice(["apples", "stamps", "marbles", "shells", "cards", "stickers"])
    a = rng.randint(15, 60)
    g = rng.randint(2, a - 3)
    b = rng.randint(2, 25)
    q = (
        f"{name} has {a} {thing}. {pron.capitalize()} gives {g} to {other} and then "
        f"buys {b} more. How many {thing} does {name} have now?"
    )
    return q, a - g + b


def w_groups(rng):
    container, item, size = rng.choice(
        [
            ("box", "eggs", 12),
            ("pack", "juice boxes", 6),
            ("crate", "bottles", 24),
            ("bag", "oranges", 8),
            ("tray", "muffins", 9),
            ("carton", "pencils", 10),
        ]
    )
    n = rng.randint(3, 15)
    plural = "boxes" if container == "box" else container + "s"
    q = f"A {container} holds {size} {item}. How many {item} are in {n} {plural}?"
    return q, size * n


def w_speed(rng):
    v, t = rng.randint(4, 18) * 5, rng.randint(2, 6)
    vehicle = rng.choice(["A train", "A car", "A bus", "A truck"])
    q = f"{vehicle} travels at {v} kilometers per hour for {t} hours. How many kilometers does it travel?"
    return q, v * t


def w_change(rng):
    name, _, _ = rng.choice(NAMES)
    price, k = rng.randint(3, 12), rng.randint(2, 6)
    note = rng.choice([n for n in (20, 50, 100) if n >= price * k])
    thing = rng.choice(["tickets", "notebooks", "sandwiches", "plants", "mugs"])
    q = (
        f"{thing.capitalize()} cost {price} dollars each. {name} buys {k} {thing} and pays "
        f"with a {note}-dollar note. How many dollars of change does {name} get?"
    )
    return q, note - price * k


def w_share(rng):
    kids, each = rng.randint(2, 9), rng.randint(2, 12)
    total = kids * each
    thing = rng.choice(["cookies", "grapes", "crayons", "cherries", "coins"])
    q = f"{total} {thing} are shared equally among {kids} children. How many {thing} does each child get?"
    return q, each


def w_temperature(rng):
    start, drop = rng.randint(-5, 15), rng.randint(3, 25)
    city = rng.choice(["a mountain village", "a small town", "the city", "a desert camp"])
    q = (
        f"In {city} the temperature was {start} degrees at noon and fell by {drop} degrees "
        f"by midnight. What was the temperature at midnight, in degrees?"
    )
    return q, start - drop


def w_rectangle(rng):
    length, width = rng.randint(3, 20), rng.randint(2, 15)
    length, width = max(length, width), min(length, width)
    if rng.random() < 0.5:
        q = f"A rectangle is {length} cm long and {width} cm wide. What is its perimeter in cm?"
        return q, 2 * (length + width)
    q = f"A rectangular garden is {length} meters long and {width} meters wide. What is its area in square meters?"
    return q, length * width


def w_ages(rng):
    name, _, poss = rng.choice(NAMES)
    age = rng.randint(4, 15)
    if rng.random() < 0.5:
        k = rng.randint(2, 4)
        q = f"{name} is {age} years old. {poss.capitalize()} aunt is {k} times as old. How old is {poss} aunt?"
        return q, age * k
    d, y = rng.randint(2, 9), rng.randint(2, 10)
    q = f"{name} is {age} years old and {poss} brother is {d} years older. How old will {poss} brother be in {y} years?"
    return q, age + d + y


def w_hens(rng):
    hens, eggs, weeks = rng.randint(3, 9), rng.randint(3, 6), rng.randint(2, 4)
    q = f"A farmer has {hens} hens. Each hen lays {eggs} eggs a week. How many eggs do the hens lay in {weeks} weeks?"
    return q, hens * eggs * weeks


def w_reading(rng):
    name, pron, _ = rng.choice(NAMES)
    pages = rng.randint(5, 30)
    q = f"{name} reads {pages} pages every day. How many pages does {pron} read in one week?"
    if pron == "they":
        q = q.replace("does they", "do they")
    return q, pages * 7


def w_class(rng):
    total = rng.randint(20, 35)
    girls = rng.randint(8, total - 8)
    q = f"A class has {total} students. {girls} of them are girls. How many are boys?"
    return q, total - girls


def w_wage(rng):
    name, pron, _ = rng.choice(NAMES)
    rate, hours, spend = rng.randint(8, 20), rng.randint(3, 8), rng.randint(5, 40)
    q = (
        f"{name} earns {rate} dollars per hour and works {hours} hours. Then {pron} "
        f"spends {spend} dollars on lunch and a book. How many dollars are left?"
    )
    return q, rate * hours - spend


def w_savings(rng):
    name, pron, _ = rng.choice(NAMES)
    per, weeks = rng.randint(3, 15), rng.randint(3, 12)
    goal = per * weeks
    q = f"{name} saves {per} dollars every week. How many weeks does it take {name} to save {goal} dollars?"
    return q, weeks


def w_bus(rng):
    start, off, on = rng.randint(10, 45), rng.randint(2, 9), rng.randint(2, 15)
    off = min(off, start)
    q = (
        f"A bus has {start} passengers. At the next stop {off} people get off and "
        f"{on} people get on. How many passengers are on the bus now?"
    )
    return q, start - off + on


def w_rows(rng):
    rows, seats, empty = rng.randint(4, 15), rng.randint(5, 12), rng.randint(1, 20)
    q = f"A hall has {rows} rows of {seats} chairs. {empty} chairs are empty. How many chairs are taken?"
    return q, rows * seats - empty


WORD = [
    w_bundle_price,
    w_give_and_buy,
    w_groups,
    w_speed,
    w_change,
    w_share,
    w_temperature,
    w_rectangle,
    w_ages,
    w_hens,
    w_reading,
    w_class,
    w_wage,
    w_savings,
    w_bus,
    w_rows,
]


def word(rng):
    return rng.choice(WORD)(rng)


def take(rng, make, n, seen):
    out = []
    while len(out) < n:
        q, a = make(rng)
        assert isinstance(a, int)
        if q in seen:
            continue
        seen.add(q)
        out.append((q, a))
    return out


def main():
    rng = random.Random(0)
    seen = set()
    items = take(rng, easy, N_EASY, seen) + take(rng, two_step, N_TWO_STEP, seen) + take(rng, word, N_WORD, seen)
    rng.shuffle(items)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        for i, (q, a) in enumerate(items):
            f.write(json.dumps({"id": i, "question": q, "answer": str(a)}, ensure_ascii=False) + "\n")
    print(f"wrote {len(items)} rows to {OUT}")


if __name__ == "__main__":
    main()
