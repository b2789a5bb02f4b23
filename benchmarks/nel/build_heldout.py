"""Build the NEL held-out set from presidio-evaluator's templates and Fake Name Generator records.

Sources (neither is the classifier's lexicon nor our corpus generators' Faker lists):

* sentence templates: ``presidio_evaluator/data_generator/raw_data/templates.txt`` of the
  ``presidio-evaluator`` 0.3.2 package (Microsoft, MIT), written for evaluating PII detectors;
* people: ``FakeNameGenerator.com_3000.csv`` shipped in the same package (Fake Name Generator,
  CC BY-SA 3.0 US): 3,000 records in 24 name sets (Czech, Chechen, Japanese, Hungarian, Icelandic,
  ...), each with title, given name, surname, e-mail, company, city and country.

Every template that has a person or e-mail slot is filled ``FILLS`` times (``FILLS_EMAIL``
with an e-mail slot), each time from a fresh
record whose given name AND surname are both absent from Faker's en_US lists (the lists our
synthetic corpora draw from), so the set measures the classifier on names it cannot know from our
generators. Labels come from the slots, not from a reader: a full name (``{{person}}``,
``{{name}}``) is PERSON_NAME, a title before a name or surname (``{{prefix}} {{last_name}}``) is
PERSON_NAME with the title, a lone given name or surname is PERSON_NAME_AMBIGUOUS (the paper's
loose class), an e-mail is EMAIL_REAL. Other slots (organisation, city, country, job, address,
card number, ...) are filled from the same record but not labelled: items found there count
against PERSON_NAME / EMAIL precision only when given those classes.

    pip download --no-deps presidio-evaluator==0.3.2 && unzip presidio_evaluator-0.3.2-*.whl -d /tmp/pe
    python benchmarks/nel/build_heldout.py /tmp/pe/presidio_evaluator/data_generator/raw_data
"""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

FILLS = 3
FILLS_EMAIL = 15  # only six templates have an e-mail slot: more fills give e-mail a usable interval
SEED = 16
OUT = Path(__file__).resolve().parents[2] / "src" / "ragleak" / "data" / "metrics" / "nel_heldout.jsonl"
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_PERSON_SLOTS = {"person", "name", "name_male", "name_female", "first_name", "first_name_male", "first_name_female",
                 "first_name_nonbinary", "last_name", "last_name_male", "last_name_female", "email"}


def faker_names() -> tuple[set[str], set[str]]:
    from faker.providers.person.en_US import Provider

    return set(Provider.first_names), set(Provider.last_names)


def fill(template: str, people: list[dict], extra: dict) -> tuple[str, list[list[str]]]:
    """The sentence and its labelled items; each person/e-mail slot takes the next record."""
    template = template.replace("\\n", "\n")
    out, items, pos, k = [], [], 0, 0
    tokens = list(_SLOT.finditer(template))
    i = 0
    while i < len(tokens):
        m = tokens[i]
        out.append(template[pos:m.start()])
        slot = m.group(1)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        joined = nxt is not None and template[m.end():nxt.start()] == " "
        if slot.startswith("prefix") and joined and nxt.group(1) in _PERSON_SLOTS - {"email"}:
            p = people[k % len(people)]
            k += 1
            name = p["Surname"] if nxt.group(1).startswith("last_name") else f"{p['GivenName']} {p['Surname']}"
            value = f"{p['Title']} {name}"
            items.append([value, "PERSON_NAME"])
            pos, i = nxt.end(), i + 2
            out.append(value)
            continue
        if slot in _PERSON_SLOTS:
            p = people[k % len(people)]
            k += 1
            if slot == "email":
                value, label = p["EmailAddress"], "EMAIL_REAL"
            elif slot.startswith("first_name"):
                value, label = p["GivenName"], "PERSON_NAME_AMBIGUOUS"
            elif slot.startswith("last_name"):
                value, label = p["Surname"], "PERSON_NAME_AMBIGUOUS"
            else:
                value, label = f"{p['GivenName']} {p['Surname']}", "PERSON_NAME"
            items.append([value, label])
        elif slot.startswith("prefix"):
            value = people[k % len(people)]["Title"]
        else:
            value = extra.get(slot, "")
        out.append(value)
        pos, i = m.end(), i + 1
    out.append(template[pos:])
    return "".join(out), items


def main(raw: str) -> None:
    raw_dir = Path(raw)
    first, last = faker_names()
    with open(raw_dir / "FakeNameGenerator.com_3000.csv", encoding="utf-8-sig") as f:
        rows = [r for r in csv.DictReader(f)
                if " " not in r["GivenName"] and r["GivenName"] not in first and r["Surname"] not in last]
    templates = [t.strip() for t in (raw_dir / "templates.txt").read_text(encoding="utf-8", errors="replace").splitlines()
                 if set(_SLOT.findall(t)) & _PERSON_SLOTS]
    rng = random.Random(SEED)
    rng.shuffle(rows)
    lines, r = [], 0
    for t_index, template in enumerate(templates):
        for _ in range(FILLS_EMAIL if "{{email}}" in template else FILLS):
            need = max(1, sum(1 for slot in _SLOT.findall(template) if slot in _PERSON_SLOTS))
            people = [rows[(r + j) % len(rows)] for j in range(need)]
            r += need
            ex = people[0]
            extra = {"organization": ex["Company"], "city": ex["City"], "country": ex["CountryFull"],
                     "nationality": ex["CountryFull"], "job": ex["Occupation"], "age": ex["Age"],
                     "year": ex["Birthday"].rsplit("/", 1)[-1], "date_of_birth": ex["Birthday"],
                     "date_time": ex["Birthday"], "address": f"{ex['StreetAddress']}, {ex['City']} {ex['ZipCode']}",
                     "building_number": ex["StreetAddress"].split()[-1] if ex["StreetAddress"][-1].isdigit() else "12",
                     "street_name": " ".join(w for w in ex["StreetAddress"].split() if not w.isdigit()),
                     "secondary_address": "Apt. 4", "postcode": ex["ZipCode"], "zipcode": ex["ZipCode"],
                     "state_abbr": ex["State"], "phone_number": ex["TelephoneNumber"],
                     "credit_card_number": "4929 1537 6648 2203", "iban": "GB82 WEST 1234 5698 7654 32",
                     "url": ex["Domain"], "day_of_week": "Tuesday"}
            text, items = fill(template, people, extra)
            lines.append({"text": text, "items": items,
                          "source": {"template": t_index, "name_sets": sorted({p["NameSet"] for p in people[:len(items)]})}})
    header = {"_about": "NEL held-out set: presidio-evaluator 0.3.2 templates (MIT) filled with Fake Name Generator "
                        "records (CC BY-SA 3.0 US) whose given name and surname are both absent from Faker's en_US "
                        "lists; labels from the slots; built by benchmarks/nel/build_heldout.py"}
    OUT.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in [header, *lines]) + "\n", encoding="utf-8")
    n_items = sum(len(x["items"]) for x in lines)
    print(f"{len(lines)} sentences, {n_items} labelled items from {len(templates)} templates")


if __name__ == "__main__":
    main(sys.argv[1])
