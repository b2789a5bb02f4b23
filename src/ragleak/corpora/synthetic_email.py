"""Synthetic-Email: seeded e-mails of a synthetic energy-trading firm, in RFC 822-style layout.

Each document is ``From/To/Date/Subject`` headers, a blank line, and a short body about a
meeting, a deal, a call-back number or a payment. Senders and recipients come from a fixed
staff pool, so the same person appears in many documents (as in real mailboxes, and as the
person-level privacy unit needs).

Names: half the pool carries surnames of Enron-era executives (Lay, Skilling, Fastow, ...) -- public
figures' surnames only. First names are drawn by Faker and any draw that would recreate the real
executive's first name (Kenneth/Ken Lay, Jeffrey Skilling, ...) is rejected, so no real person's
full name is generated. Everything else (first names, addresses, numbers, companies, text) is
synthetic. Metadata records sender, recipients, subject and the planted entities.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from email.utils import format_datetime
from typing import ClassVar

from faker import Faker
from pydantic import Field

from ragleak.corpora import _fake
from ragleak.corpora.base import ENTITY_SEPARATOR, Corpus, CorpusKind, CorpusParams, seeded_rng
from ragleak.records import Document

log = logging.getLogger(__name__)

#: Enron-era executives' surnames -> the real first names (and nicknames) never paired with them.
ENRON_SURNAMES: dict[str, frozenset[str]] = {
    "Lay": frozenset({"Kenneth", "Ken"}),
    "Skilling": frozenset({"Jeffrey", "Jeff"}),
    "Fastow": frozenset({"Andrew", "Andy", "Lea"}),
    "Kaminski": frozenset({"Vince", "Vincent"}),
    "Kitchen": frozenset({"Louise"}),
    "Lavorato": frozenset({"John"}),
    "Delainey": frozenset({"David", "Dave"}),
    "Shankman": frozenset({"Jeffrey", "Jeff"}),
    "Whalley": frozenset({"Greg", "Gregory", "Lawrence"}),
    "Buy": frozenset({"Richard", "Rick"}),
    "Causey": frozenset({"Richard", "Rick"}),
    "Kean": frozenset({"Steven", "Steve"}),
}

STAFF_TITLES = (
    "VP Trading", "Managing Director", "Head of Research", "Gas Desk Lead", "Risk Analyst",
    "Chief Accounting Officer", "Treasurer", "Origination Manager", "Legal Counsel",
    "Structuring Analyst", "Power Desk Trader", "Government Affairs Director",
)
PLACES = (
    "the 32nd floor conference room", "the Houston office", "the board room", "the trading floor",
    "the Allen Center lobby", "our Calgary office", "the executive dining room",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
TIMES = ("8:30 AM", "9:00 AM", "10:15 AM", "11:00 AM", "1:30 PM", "2:00 PM", "3:45 PM", "4:30 PM")
COMMODITIES = ("natural gas", "power", "crude", "weather derivatives", "bandwidth", "pulp and paper")

# (subject, body). Placeholders: to_first, sender_first, sender_name, sender_title, sender_phone,
# company, contact, contact_phone, amount, amount2, weekday, time, place, commodity, date.
TEMPLATES: dict[str, tuple[str, str]] = {
    "meeting": (
        "Meeting on {weekday} re {company}",
        "{to_first},\n\nCan we meet {weekday} at {time} in {place} to go over the {company} "
        "proposal? {contact} from their side will join; their direct line is {contact_phone}. "
        "They are asking for {amount} up front.\n\nThanks,\n{sender_first}",
    ),
    "deal": (
        "{company} {commodity} deal - final terms",
        "{to_first},\n\nThe {company} {commodity} deal closed at {amount}, with a further {amount2} "
        "contingent on delivery. {contact} signed for them on {date}. Please book it before the "
        "end of the quarter.\n\n{sender_name}\n{sender_title}\n{sender_phone}",
    ),
    "call_back": (
        "Please call {contact}",
        "{to_first} -\n\n{contact} of {company} called about the {commodity} position. Please call "
        "back on {contact_phone} today; if you can't reach them, my cell is {sender_phone}. "
        "Exposure is roughly {amount}.\n\n{sender_first}",
    ),
    "budget": (
        "Budget approval needed: {amount}",
        "{to_first},\n\nI need your sign-off on {amount} for the {commodity} desk before {weekday}. "
        "{company} has already invoiced {amount2}. We can discuss at {time} in {place}, or call "
        "me at {sender_phone}.\n\nRegards,\n{sender_name}, {sender_title}",
    ),
    "forward": (
        "FW: {company} contract review",
        "{to_first},\n\nForwarding the {company} draft from {contact} (tel. {contact_phone}). "
        "Legal flagged the termination clause and the {amount} penalty. Let's talk {weekday} "
        "{time}.\n\n{sender_first}\n\n-----Original Message-----\nFrom: {contact}\nSent: {date}\n"
        "Subject: {company} contract",
    ),
}

_START = dt.datetime(1999, 1, 4, 7, 0, tzinfo=dt.timezone(dt.timedelta(hours=-6)))
_SPAN_MINUTES = 3 * 365 * 24 * 60  # about three years, to late 2001
_DOMAIN = "northgate-energy.com"
_POOL_ENRON = 12
_POOL_OTHER = 12


class EmailParams(CorpusParams):
    n_docs: int = Field(default=60, ge=1, le=100_000, description="number of e-mails")
    seed: int = Field(default=0, description="Faker and template seed; same seed, same corpus")


class SyntheticEmail(Corpus):
    """Seeded synthetic e-mails with Enron-era surnames and planted phones, amounts, companies."""

    name: ClassVar[str] = "synthetic-email"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "Synthetic corporate e-mails (Faker, Enron-era surnames) with planted entities"
    kind: ClassVar[CorpusKind] = "synthetic"
    Params: ClassVar[type[CorpusParams]] = EmailParams

    def load(self) -> list[Document]:
        params: EmailParams = self.params  # type: ignore[assignment]
        fake = _fake.make_faker(params.seed)
        rng = seeded_rng(self.name, params.seed)
        staff = _staff_pool(fake, rng)
        template_names = list(TEMPLATES)
        docs: list[Document] = []
        for i in range(params.n_docs):
            sender, *recipients = rng.sample(staff, 1 + rng.choice((1, 1, 1, 2, 3)))
            sent = _START + dt.timedelta(minutes=rng.randrange(_SPAN_MINUTES))
            template = template_names[rng.randrange(len(template_names))]
            company = fake.company()
            contact = f"{fake.first_name()} {fake.last_name()}"
            values = {
                "to_first": recipients[0].first,
                "sender_first": sender.first,
                "sender_name": sender.name,
                "sender_title": sender.title,
                "sender_phone": sender.phone,
                "company": company,
                "contact": contact,
                "contact_phone": _fake.phone(fake),
                "amount": _fake.money(rng, 10_000, 90_000_000),
                "amount2": _fake.money(rng, 1_000, 5_000_000),
                "weekday": rng.choice(WEEKDAYS),
                "time": rng.choice(TIMES),
                "place": rng.choice(PLACES),
                "commodity": rng.choice(COMMODITIES),
                "date": _fake.long_date((sent - dt.timedelta(days=rng.randint(1, 20))).date()),
            }
            subject_t, body_t = TEMPLATES[template]
            subject = subject_t.format(**values)
            body = body_t.format(**values)
            header = (
                f"From: {sender.name} <{sender.email}>\n"
                f"To: {', '.join(f'{r.name} <{r.email}>' for r in recipients)}\n"
                f"Date: {format_datetime(sent)}\n"
                f"Subject: {subject}\n\n"
            )
            text = header + body
            metadata = {
                "template": template,
                "sender": sender.email,
                "recipients": ENTITY_SEPARATOR.join(r.email for r in recipients),
                "subject": subject,
                "sent": sent.isoformat(),
                **_entities(text, sender, recipients, values),
            }
            docs.append(Document(id=f"email-{i + 1:04d}", text=text, metadata=metadata))
        log.debug("generated %d synthetic-email messages (seed %d)", len(docs), params.seed)
        return docs


def _staff_pool(fake: Faker, rng: random.Random) -> list[_fake.Person]:
    """The firm's staff: 12 with Enron-era surnames (never the real first name) and 12 synthetic."""
    names: set[str] = set()
    phones: set[str] = set()
    people: list[_fake.Person] = []
    surnames = list(ENRON_SURNAMES)[:_POOL_ENRON] + [None] * _POOL_OTHER
    for surname in surnames:
        def draw(surname=surname) -> str:
            last = surname or fake.last_name()
            first = fake.first_name()
            while surname is not None and first in ENRON_SURNAMES[surname]:
                first = fake.first_name()
            return f"{first} {last}"

        first, last = _fake.unique(draw, names).split(" ", 1)
        people.append(
            _fake.Person(
                first=first,
                last=last,
                title=rng.choice(STAFF_TITLES),
                company="Northgate Energy",
                email=_fake.email_for(first, last, _DOMAIN),
                phone=_fake.unique(lambda: _fake.phone(fake), phones),
            )
        )
    return people


def _entities(text: str, sender: _fake.Person, recipients: list[_fake.Person], values: dict[str, str]) -> dict[str, str]:
    """The planted entities that actually occur in ``text`` (templates use different subsets)."""
    people = [sender.name, *(r.name for r in recipients), values["contact"]]
    candidates = {
        "person": people,
        "email": [sender.email, *(r.email for r in recipients)],
        "phone": [sender.phone, values["contact_phone"]],
        "company": [values["company"]],
        "title": [sender.title],
        "date": [values["date"]],
        "amount": [values["amount"], values["amount2"]],
    }
    found: dict[str, str] = {}
    for key, options in candidates.items():
        present = [v for v in dict.fromkeys(options) if v in text]
        if present:
            found[key] = ENTITY_SEPARATOR.join(present)
    return found
