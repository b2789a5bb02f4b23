"""Synthetic-Corp and Synthetic-Email: determinism, ground truth, layout."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

import pytest

from ragleak.corpora import load_corpus, planted_entities
from ragleak.corpora.synthetic_corp import TEMPLATES as CORP_TEMPLATES
from ragleak.corpora.synthetic_email import ENRON_SURNAMES
from ragleak.records import canonical_json

GENERATORS = ["synthetic-corp", "synthetic-email"]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def corp():
    return load_corpus("synthetic-corp")


@pytest.fixture(scope="module")
def emails():
    return load_corpus("synthetic-email")


@pytest.mark.parametrize("name", GENERATORS)
def test_same_seed_byte_identical(name: str) -> None:
    a = canonical_json(load_corpus(name, n_docs=30, seed=7))
    b = canonical_json(load_corpus(name, n_docs=30, seed=7))
    assert a == b


@pytest.mark.parametrize("name", GENERATORS)
def test_different_seed_differs(name: str) -> None:
    assert canonical_json(load_corpus(name, n_docs=10, seed=1)) != canonical_json(load_corpus(name, n_docs=10, seed=2))


@pytest.mark.parametrize("name", GENERATORS)
def test_identical_across_processes(name: str) -> None:
    """Hash randomisation or import order must not change the output."""
    code = (
        "import hashlib, sys; from ragleak.corpora import load_corpus; from ragleak.records import canonical_json; "
        f"sys.stdout.write(hashlib.sha256(canonical_json(load_corpus({name!r}, n_docs=20, seed=3)).encode()).hexdigest())"
    )
    digests = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(SRC)}
        digests.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    here = hashlib.sha256(canonical_json(load_corpus(name, n_docs=20, seed=3)).encode()).hexdigest()
    assert digests == {here}


@pytest.mark.parametrize("name", GENERATORS)
def test_global_random_state_untouched(name: str) -> None:
    import faker.generator

    before_std, before_faker = random.getstate(), faker.generator.random.getstate()
    load_corpus(name, n_docs=5, seed=11)
    assert random.getstate() == before_std
    assert faker.generator.random.getstate() == before_faker


@pytest.mark.parametrize("name", GENERATORS)
def test_n_docs_parameter(name: str) -> None:
    assert len(load_corpus(name, n_docs=7)) == 7


def test_defaults(corp, emails) -> None:
    assert len(corp) == 100 and len(emails) == 60
    assert [d.id for d in corp][:2] == ["corp-0001", "corp-0002"]


def test_prefix_stable_when_n_grows() -> None:
    assert load_corpus("synthetic-corp", n_docs=5, seed=4) == load_corpus("synthetic-corp", n_docs=8, seed=4)[:5]


@pytest.mark.parametrize("fixture", ["corp", "emails"])
def test_planted_entities_occur_verbatim(fixture, request) -> None:
    docs = request.getfixturevalue(fixture)
    for doc in docs:
        entities = planted_entities(doc)
        assert {"person", "email", "phone", "company", "amount"} <= set(entities), doc.id
        for kind, values in entities.items():
            for value in values:
                assert value and value in doc.text, (doc.id, kind, value)


def test_metadata_values_are_scalars(corp, emails) -> None:
    for doc in corp + emails:
        assert all(isinstance(v, (str, int, float, bool)) or v is None for v in doc.metadata.values())


def test_corp_people_emails_phones_unique(corp) -> None:
    people = [p for d in corp for p in planted_entities(d)["person"]]
    emails = [d.metadata["email"] for d in corp]
    phones = [d.metadata["phone"] for d in corp]
    assert len(set(people)) == len(people) == 200
    assert len(set(emails)) == len(emails) and len(set(phones)) == len(phones)


def test_corp_uses_varied_templates(corp) -> None:
    used = {d.metadata["template"] for d in corp}
    assert used == set(CORP_TEMPLATES)
    assert len({d.text.split(" ", 2)[0] for d in corp}) >= 4  # documents open differently


def test_corp_email_matches_person_and_company(corp) -> None:
    for doc in corp:
        first, last = planted_entities(doc)["person"][0].lower().split(" ", 1)
        local, domain = doc.metadata["email"].split("@")
        assert local.startswith(first.replace(" ", "")[:3]) and domain.endswith(".com")


def test_email_layout_and_metadata(emails) -> None:
    for doc in emails:
        head, sep, body = doc.text.partition("\n\n")
        assert sep and body.strip()
        assert [line.split(":", 1)[0] for line in head.split("\n")] == ["From", "To", "Date", "Subject"]
        msg = Parser().parsestr(doc.text)
        assert msg["Subject"] == doc.metadata["subject"]
        assert f"<{doc.metadata['sender']}>" in msg["From"]
        for recipient in str(doc.metadata["recipients"]).split("; "):
            assert f"<{recipient}>" in msg["To"]
        assert doc.metadata["sender"] not in msg["To"]
        assert "1999" <= doc.metadata["sent"][:4] <= "2001"


def test_email_mixes_enron_surnames_without_real_full_names(emails) -> None:
    people = {p for d in emails for p in planted_entities(d)["person"]}
    enron = {p for p in people if p.split(" ")[-1] in ENRON_SURNAMES}
    assert len({p.split(" ")[-1] for p in enron}) >= 8
    assert len(people - enron) >= 10  # otherwise synthetic people too
    for person in enron:
        first, last = person.rsplit(" ", 1)
        assert first not in ENRON_SURNAMES[last], person


def test_email_senders_repeat_across_documents(emails) -> None:
    senders = [d.metadata["sender"] for d in emails]
    assert len(set(senders)) < len(senders)
