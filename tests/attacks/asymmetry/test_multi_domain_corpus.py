"""The multi-domain corpus: deterministic per seed, three domains, planted entities verbatim."""

from __future__ import annotations

from collections import Counter

import pytest

from ragleak.corpora.base import check_unique_ids, planted_entities
from ragleak.corpora.multi_domain import DOMAINS, MultiDomain
from ragleak.errors import ConfigError


def test_same_seed_same_corpus_other_seed_other_corpus():
    a = MultiDomain(n_docs=30, seed=4).load()
    assert a == MultiDomain(n_docs=30, seed=4).load()
    assert [d.text for d in a] != [d.text for d in MultiDomain(n_docs=30, seed=5).load()]
    check_unique_ids(a, "multi-domain")


def test_domains_cycle_and_entities_are_planted_verbatim():
    docs = MultiDomain(n_docs=30, seed=0).load()
    assert Counter(d.metadata["domain"] for d in docs) == {d: 10 for d in DOMAINS}
    people, phones = [], []
    for doc in docs:
        found = planted_entities(doc)
        assert {"person", "phone", "company", "date"} <= set(found)
        for values in found.values():
            assert all(v in doc.text for v in values), (doc.id, values)
        people += found["person"]
        phones += found["phone"]
    assert len(set(people)) == len(people) and len(set(phones)) == len(phones)


def test_declared_metadata_and_bad_params():
    assert MultiDomain.name == "multi-domain" and MultiDomain.kind == "synthetic"
    assert MultiDomain().spec()["params"] == {"n_docs": 90, "seed": 0}
    with pytest.raises(ConfigError):
        MultiDomain(n_docs=0)
