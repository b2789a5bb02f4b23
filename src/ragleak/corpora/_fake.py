"""Shared, seeded building blocks for the synthetic corpora (Faker instance, people, formats).

Everything draws from a local ``Faker`` instance seeded with ``seed_instance`` and a local
``random.Random``; no global RNG state is read or written. Output is byte-identical for a seed
under a fixed Faker version (Faker's locale data may change between its releases).
"""

from __future__ import annotations

import datetime as dt
import random
import re
from dataclasses import dataclass
from typing import Callable

from faker import Faker

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
_DOMAIN_STOPWORDS = frozenset({"and", "inc", "llc", "ltd", "plc", "group", "sons", "co"})


def make_faker(seed: int) -> Faker:
    """A fresh en_US Faker instance seeded locally (never ``Faker.seed``, which is global)."""
    fake = Faker("en_US")
    fake.seed_instance(seed)
    return fake


def company_domain(company: str) -> str:
    """A plausible e-mail domain for a company name: 'Wells, Carpenter and Jacobs' -> wellscarpenter.com."""
    words = [w for w in re.findall(r"[a-z]+", company.lower()) if w not in _DOMAIN_STOPWORDS]
    return "".join(words[:2] or ["company"]) + ".com"


def email_for(first: str, last: str, domain: str) -> str:
    local = ".".join(re.sub(r"[^a-z]", "", part.lower()) for part in (first, last))
    return f"{local}@{domain}"


def phone(fake: Faker) -> str:
    """A US-style number such as (555) 201-3344."""
    return fake.numerify("(%##) %##-####")


def address(fake: Faker) -> str:
    """A one-line street address: '51027 Jonathan Spring Suite 468, Andrewsside, OR 53922'."""
    return f"{fake.street_address()}, {fake.city()}, {fake.state_abbr(include_territories=False)} {fake.zipcode()}"


def long_date(day: dt.date) -> str:
    """'March 4, 2021' without touching the process locale."""
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def date_between(fake: Faker, start: dt.date, end: dt.date) -> dt.date:
    """A date in [start, end]; fixed bounds, so the result never depends on today's date."""
    return fake.date_between_dates(date_start=start, date_end=end)


def money(rng: random.Random, low: int, high: int) -> str:
    """An amount such as '$48,250.00' drawn uniformly in whole dollars from [low, high]."""
    return f"${rng.randint(low, high):,}.00"


def unique(draw: Callable[[], str], used: set[str], tries: int = 1000) -> str:
    """Redraw until a value not in ``used`` comes up (deterministic for a seeded ``draw``)."""
    for _ in range(tries):
        value = draw()
        if value not in used:
            used.add(value)
            return value
    raise RuntimeError(f"no unused value after {tries} draws; the generator's space is exhausted")


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    title: str
    company: str
    email: str
    phone: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"
