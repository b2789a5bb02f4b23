"""A folder of invented facts, written at run time from a seed: documents no model can know.

Every name (people, settlements, rivers, guilds, festivals) is built from random syllables, and
every number is drawn at random, so a plain LLM cannot produce these facts from its training
data and a test cannot have seen them: the folder exists only for one benchmark run. The subject
(a gazetteer of invented settlements: who keeps what, where, when, how much) is deliberately
none of the built-in corpora's.

    python benchmarks/invented_facts.py OUT_DIR --docs 24 --seed 7
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr", "st",
          "th", "vr", "sk", "tr", "qu")
VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "y")
CODAS = ("", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "st", "x")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
#: the subject's common words: what an attacker "with keywords" is told (no invented name among them)
KEYWORDS = ("settlements", "harbour masters", "river towns", "festivals", "archives", "guilds",
            "bridges", "mills", "ferries", "town councils")


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)).capitalize()


def person(rng: random.Random) -> str:
    return f"{word(rng, rng.randint(1, 2))} {word(rng, rng.randint(2, 3))}"


def document(rng: random.Random, i: int) -> str:
    town, river, guild, feast = word(rng, 3), word(rng, 2), word(rng, 2), word(rng, 2)
    keeper, warden, clerk = person(rng), person(rng), person(rng)
    year = rng.randint(1620, 1960)
    sentences = [
        f"{town} is a river town of {rng.randint(300, 9000)} people on the {river} River, "
        f"{rng.randint(4, 90)} km upstream of {word(rng, 2)} Falls.",
        f"Its harbour master is {keeper}, who has held the post since {year} and lives at "
        f"{rng.randint(2, 480)} {word(rng, 2)} Lane.",
        f"The {feast} Festival is held every {rng.randint(1, 28)} {rng.choice(MONTHS)}; in {year + rng.randint(1, 40)} "
        f"it drew {rng.randint(120, 20000)} visitors and was organised by {warden}.",
        f"The {guild} Guild of {town} keeps {rng.randint(12, 900)} ledgers in its archive, and its clerk "
        f"{clerk} charges {rng.randint(2, 90)} silver marks for a copy of any page.",
        f"The {word(rng, 2)} Bridge over the {river} was rebuilt in {year + rng.randint(-80, 60)} for "
        f"{rng.randint(1000, 90000)} marks after the flood of {year - rng.randint(1, 30)}.",
    ]
    rng.shuffle(sentences)
    return " ".join(sentences[:4])


def write_folder(out: Path, n_docs: int, seed: int) -> list[Path]:
    """``n_docs`` text files of invented facts under ``out`` (created), the same for a seed."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_docs):
        path = out / f"record-{i:03d}.txt"
        path.write_text(document(rng, i) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for p in write_folder(args.out, args.docs, args.seed):
        print(p)
