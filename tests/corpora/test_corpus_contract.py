"""One contract test over every registered corpus, plus load_corpus dispatch."""

from __future__ import annotations

import json
import typing

import pytest
from pydantic import BaseModel, ValidationError

from ragleak.corpora import CORPORA, Corpus, load_corpus, make_corpus
from ragleak.corpora.base import CorpusKind, planted_entities
from ragleak.errors import ConfigError
from ragleak.records import Document

# parameters a loader cannot be built without (paths the user supplies); nothing is read here
REQUIRED = {"pubmedqa": {"path": "/nonexistent/ori_pqal.json"}, "files": {"path": "/nonexistent/folder"}}


@pytest.mark.parametrize("name", CORPORA.names())
def test_contract(name: str) -> None:
    cls = CORPORA.get(name)
    assert issubclass(cls, Corpus)
    assert cls.name == name
    assert isinstance(cls.version, str) and cls.version
    assert isinstance(cls.description, str) and len(cls.description) > 10
    assert cls.kind in typing.get_args(CorpusKind)
    assert issubclass(cls.Params, BaseModel) and cls.Params.model_config.get("frozen") is True
    # constructing stores parameters only: no file is touched for the missing paths above
    corpus = cls(**REQUIRED.get(name, {}))
    params = corpus.params
    with pytest.raises(ValidationError):
        params.__setattr__(next(iter(type(params).model_fields)), None)
    again = cls.Params.model_validate_json(params.model_dump_json())
    assert again == params and hash(again) == hash(params)
    spec = corpus.spec()
    assert json.loads(json.dumps(spec)) == spec and spec["name"] == name
    with pytest.raises(ConfigError, match="no_such_param"):
        cls(no_such_param=1, **REQUIRED.get(name, {}))


def test_kind_values_are_declared() -> None:
    kinds = {CORPORA.get(n).kind for n in CORPORA.names()}
    assert kinds == {"synthetic", "public", "user"}


def test_unknown_name_is_config_error() -> None:
    with pytest.raises(ConfigError, match="not a registered name"):
        load_corpus("no-such-corpus-xyz")


def test_bad_parameter_value_is_config_error() -> None:
    with pytest.raises(ConfigError, match="n_docs"):
        load_corpus("synthetic-corp", n_docs=0)


def test_registered_name_loads_documents() -> None:
    docs = load_corpus("synthetic-corp", n_docs=3, seed=1)
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)


def test_path_dispatches_to_files(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("hello world", encoding="utf-8")
    assert make_corpus(str(tmp_path)).name == "files"
    docs = load_corpus(str(tmp_path))
    assert [d.id for d in docs] == ["a.txt"]


def test_registered_name_wins_over_same_named_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "synthetic-corp").mkdir()
    (tmp_path / "synthetic-corp" / "x.txt").write_text("folder text", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert make_corpus("synthetic-corp").name == "synthetic-corp"
    assert make_corpus("./synthetic-corp").name == "files"


def test_planted_entities_splits_joined_values() -> None:
    doc = Document(id="d", text="x", metadata={"person": "A B; C D", "email": "a@b.com", "other": "z"})
    assert planted_entities(doc) == {"person": ["A B", "C D"], "email": ["a@b.com"]}
