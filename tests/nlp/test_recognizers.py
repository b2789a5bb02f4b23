"""The one recognizers module: each recognizer on what it must and must not find, the judges'
e-mail recognizer against obfuscations the masker's pattern misses (and prose it must leave
alone), and no other module under src/ compiling a PII pattern."""

from __future__ import annotations

import ast
import re
import string
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.nlp import recognizers
from ragleak.nlp.recognizers import (
    EMAIL_JUDGE,
    EMAIL_JUDGE_COMPLETE,
    EMAIL_MASK,
    RECOGNIZERS,
    Found,
    known_detector,
    presidio,
)

SRC = Path(recognizers.__file__).resolve().parents[1]


def _values(recognizer, text):
    return [f.value for f in recognizer.find(text)]


# (recognizer, text, the values it must find: [] for a negative)
CASES = [
    (EMAIL_MASK, "write to bob.smith@corp.org today", ["bob.smith@corp.org"]),
    (EMAIL_MASK, "cut off at bob@corp", ["bob@corp"]),
    (EMAIL_MASK, "jane [at] corp dot com", []),
    (recognizers.PHONE_MASK, "call (713) 555-0142 now", ["(713) 555-0142"]),
    (recognizers.PHONE_MASK, "the year 1874 and room 12", []),
    (recognizers.SSN_MASK, "SSN 536-22-1934.", ["536-22-1934"]),
    (recognizers.SSN_MASK, "SSN 536 22 1934.", []),
    (recognizers.CARD_MASK, "card 4111 1111 1111 1111", ["4111 1111 1111 1111"]),
    (recognizers.LONG_NUMBER_MASK, "account 40817723, in 2023", ["40817723"]),
    (recognizers.LONG_NUMBER_MASK, "version 1.204518", []),
    (recognizers.SSN_JUDGE, "SSN 536 22 1934 and 536-22-1934", ["536 22 1934", "536-22-1934"]),
    (recognizers.SSN_JUDGE, "mixed 536-22 1934, long 1536-22-1934", []),
    (recognizers.CARD_LUHN, "card 4111 1111 1111 1111 or 4111111111111111", ["4111111111111111"] * 2),
    (recognizers.CARD_LUHN, "card 4111 1111 1111 1112", []),  # the Luhn checksum fails
    (recognizers.IBAN_MOD97, "IBAN GB82 WEST 1234 5698 7654 32.", ["GB82WEST12345698765432"]),
    (recognizers.IBAN_MOD97, "IBAN GB83 WEST 1234 5698 7654 32.", []),  # mod 97 fails
    (recognizers.MONEY, "salary $128,450.00 and 1.234.567,89 EUR", ["128450", "1234567.89"]),
    (recognizers.MONEY, "tickets cost $12 or $1,000", []),  # fewer than 3 significant digits
    (recognizers.SECRET_AFTER_KEYWORD, "the VPN password is Kx7!mera-42.", ["Kx7!mera-42"]),
    (recognizers.SECRET_AFTER_KEYWORD, "the password expired", []),
    (recognizers.SECRET_KEY_SHAPED, "key ak_live_9f8e7d6c5b4a39281706 here", ["ak_live_9f8e7d6c5b4a39281706"]),
    (recognizers.SECRET_KEY_SHAPED, "mail ak_live_9f8e7d6c5b4a39281706@corp.com", []),
    (recognizers.PERSON_FROM_EMAIL, "Dana Whitfield (dana.whitfield@orbis.com)", ["Dana Whitfield"]),
    (recognizers.PERSON_FROM_EMAIL, "Dana Whitfield (ops@orbis.com)", []),
    (recognizers.DATE_NEL, "seen on 1984-03-12 and March 3rd, 2021", ["1984-03-12", "March 3rd, 2021"]),
    (recognizers.PHONE_NEL, "dial +44 20 7946 0958", ["+44 20 7946 0958"]),
    (recognizers.ADDRESS_NEL, "at 42 Harbour Road, Apt 4", ["42 Harbour Road, Apt 4"]),
    (recognizers.ID_CODE_NEL, "invoice INV-2023-0042, record 4471", ["INV-2023-0042", "4471"]),
    (recognizers.EMAIL_ATTACKER, "mail bob@corp.org or bob@corp", ["bob@corp.org"]),
    (recognizers.PHONE_ATTACKER, "call 713-555-0142", ["713-555-0142"]),
    (recognizers.NAME_ATTACKER, "ask Maria Gonzales", ["Maria Gonzales"]),
    (recognizers.EMAIL_ATTRIBUTION, "to jörg@firma.de", ["jörg@firma.de"]),
]


@pytest.mark.parametrize("recognizer, text, expected", CASES, ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)])
def test_each_recognizer_on_positives_and_negatives(recognizer, text, expected):
    found = recognizer.find(text)
    assert [f.value for f in found] == expected
    for f in found:
        assert isinstance(f, Found) and f.recognizer == recognizer.name and f.entity == recognizer.entity
        assert text[f.start:f.end] == f.text


def test_every_recognizer_is_tested_and_named_once():
    assert {c[0].name for c in CASES} | {"phone-libphonenumber", "email-judge", "email-judge-complete"} == set(RECOGNIZERS)
    assert all(name == r.name and known_detector(name) for name, r in RECOGNIZERS.items())
    assert known_detector(recognizers.SPACY_NER) and known_detector(presidio("EmailRecognizer"))
    assert not known_detector("email") and not known_detector("presidio:")


def test_phone_numbers_by_libphonenumber():
    assert _values(recognizers.PHONE_LIBPHONENUMBER, "her phone (415) 273-9981.") == ["4152739981"]
    assert _values(recognizers.PHONE_LIBPHONENUMBER, "room 12, floor 3") == []


# -- the judges' e-mail recognizer: what the masker's pattern misses --------------------------------

OBFUSCATED = [
    ("jane [at] corp dot com", "jane@corp.com"),
    ("name [at] domain dot com", "name@domain.com"),
    ("jane(at)corp(dot)com", "jane@corp.com"),
    ("jane {at} corp {dot} co {dot} uk", "jane@corp.co.uk"),
    ("jane <AT> corp [DOT] com", "jane@corp.com"),
    ("jane @ corp.com", "jane@corp.com"),
    ("jane\uff20corp\uff0ecom", "jane@corp.com"),  # full-width at and dot
    ("jane&#64;corp.com", "jane@corp.com"),
    ("jane at corp dot com", "jane@corp.com"),
    ("jane dot doe at corp dot com", "jane.doe@corp.com"),
    ("j.smith at corp.com", "j.smith@corp.com"),
    ("Jane.Doe [at] Corp.COM", "Jane.Doe@Corp.COM"),
]


@pytest.mark.parametrize("written, address", OBFUSCATED)
def test_obfuscated_addresses_are_read_by_the_judge_and_missed_by_the_masker(written, address):
    text = f"For the file, write to {written} before Friday."
    assert _values(EMAIL_JUDGE, text) == [address]
    assert _values(EMAIL_JUDGE_COMPLETE, text) == [address]
    # the masker's pattern leaves the address readable: at best a fragment
    assert address not in [m.group(0) for m in EMAIL_MASK.pattern.finditer(text)]


PROSE = [
    "Look at the data before you decide.",
    "Look at example.com for the details.",  # a bare 'at' with a plain word and a plain dot
    "Visit us at example dot com.",  # a pronoun before 'at'
    "The office at corp dot com closed.",  # a determiner before the local part
    "We met at noon dot five.",
    "Meet @ home tomorrow.",  # spaced '@' without a domain
    "jane [at] corp, no domain",  # obfuscated but incomplete
    "Masked: <EMAIL> and <EMAIL_ADDRESS>.",
    "Follow @janedoe on the forum.",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_with_at_and_dot_is_not_an_address(text):
    assert EMAIL_JUDGE.find(text) == []


def test_a_rejected_reading_does_not_hide_the_address_after_it():
    text = "reach me at jane dot doe at corp dot com"
    assert _values(EMAIL_JUDGE, text) == ["jane.doe@corp.com"]


def test_truncated_plain_addresses_count_for_nel_but_not_as_corpus_values():
    assert _values(EMAIL_JUDGE, "write to maria.g@riverside-hea") == ["maria.g@riverside-hea"]
    assert _values(EMAIL_JUDGE_COMPLETE, "write to maria.g@riverside-hea") == []
    # non-ASCII local parts are read whole (the masker's pattern keeps a fragment: "rg@firma.de")
    assert _values(EMAIL_JUDGE, "an jörg@firma.de") == ["jörg@firma.de"]
    assert EMAIL_MASK.find("an jörg@firma.de")[0].value == "rg@firma.de"


_LABEL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_TLD = st.text(string.ascii_lowercase, min_size=2, max_size=6)
_AT_FORMS = st.sampled_from(["@", " @ ", "[at]", " [at] ", "(at)", " (AT) ", "{at}", "\uff20", "&#64;"])
_DOT_FORMS = st.sampled_from([".", " dot ", "[dot]", " [dot] ", "(dot)", " DOT ", "\uff0e"])


@settings(max_examples=200, deadline=None)
@given(local=st.lists(_LABEL, min_size=1, max_size=3), domain=st.lists(_LABEL, min_size=1, max_size=2), tld=_TLD,
       at=_AT_FORMS, dot=_DOT_FORMS)
def test_any_mix_of_obfuscations_is_read_back_to_the_address(local, domain, tld, at, dot):
    address = ".".join(local) + "@" + ".".join([*domain, tld])
    written = dot.join(local) + at + dot.join([*domain, tld])
    assert _values(EMAIL_JUDGE, f"Contact: {written}; thanks.") == [address]


@settings(max_examples=200, deadline=None)
@given(local=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,10}[A-Za-z0-9]", fullmatch=True),
       domain=st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,6}[A-Za-z0-9]", fullmatch=True), min_size=1,
                       max_size=3), tld=_TLD)
def test_the_judge_reads_every_plain_address_the_masker_reads(local, domain, tld):
    address = f"{local}@{'.'.join([*domain, tld])}"
    if ".." in address or ".@" in address:
        return  # not an address
    text = f"Write to {address} today."
    assert [m.group(0) for m in EMAIL_MASK.pattern.finditer(text)] == [address]
    assert _values(EMAIL_JUDGE, text) == [address]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["look", "at", "the", "data", "dot", "com", "us", "visit", "office", "we", "met",
                                 "noon", "example", "a", "report", ".", ",", "It", "is"]), max_size=25))
def test_prose_without_a_mailbox_reads_as_none(words):
    """Sentences of prose words, 'at' and 'dot' among them: a reading needs an obfuscated dot (the
    words hold no handle mark), and a one-word local part is never a pronoun, a verb of place or a
    determiner, nor after a determiner."""
    text = " ".join(words)
    for f in EMAIL_JUDGE.find(text):
        assert " dot " in f.text, (text, f)
        local = f.value.split("@")[0]
        if "." not in local:
            assert local.lower() not in {"look", "at", "the", "dot", "us", "visit", "we", "met", "a", "it", "is"}
            before = text[:f.start].split()
            assert not before or before[-1].lower() not in {"the", "a"}, (text, f)


# -- one module holds the patterns -------------------------------------------------------------------

PII_SAMPLES = ["jane.doe@corp.com", "(713) 555-0142", "713-555-0142", "536-22-1934", "4111 1111 1111 1111",
               "GB82 WEST 1234 5698 7654 32", "+44 20 7946 0958"]
PLAIN = ["data", "hello world", "12", "a-b", "12 apples"]  # a catch-all matches these too


def _string_constants(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def _pii_pattern(source: str) -> bool:
    """Whether a string constant, read as a pattern, finds an e-mail address or matches a phone,
    SSN, card or IBAN sample whole (and is not a catch-all that matches plain words too)."""
    try:
        with warnings.catch_warnings():  # prose and templates read as patterns warn ("nested set")
            warnings.simplefilter("ignore")
            pattern = re.compile(source)
    except (re.error, RecursionError, OverflowError):
        return False
    email = pattern.search("write to jane.doe@corp.com today")
    if email and re.search(r"\w@\w", email.group(0)):
        return True
    return any(pattern.fullmatch(s) for s in PII_SAMPLES) and not any(pattern.fullmatch(p) for p in PLAIN)


def test_no_module_outside_recognizers_compiles_a_pii_pattern():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "recognizers.py" and path.parent.name == "nlp":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(SRC)}: {s!r}" for s in _string_constants(tree) if _pii_pattern(s)]
    assert not offenders, "PII patterns outside ragleak.nlp.recognizers:\n" + "\n".join(offenders)


def test_the_guard_catches_an_e_mail_pattern():
    assert _pii_pattern(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
    assert _pii_pattern(r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])")
    assert not _pii_pattern(r"\S+") and not _pii_pattern("@") and not _pii_pattern(r"[a-z]+")
    # the recognizers module itself holds them
    tree = ast.parse(Path(recognizers.__file__).read_text(encoding="utf-8"))
    assert sum(_pii_pattern(s) for s in _string_constants(tree)) >= 5


def test_the_e_mail_judge_reads_in_linear_time():
    """A local part is read once as a chain: runs of ' dot ' and 'at' (a quadratic search took 2 s
    on the first of these) and a long dotted domain read in milliseconds."""
    import time

    for text in ("a dot " * 2000 + "b", "x at a dot b " * 800, "x@" + ".".join(["a"] * 3000) + "-"):
        t0 = time.perf_counter()
        EMAIL_JUDGE.find(text)
        assert time.perf_counter() - t0 < 1.0
