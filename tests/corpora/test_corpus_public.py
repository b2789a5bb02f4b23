"""Real public text: chatterbot-qa (pip package) and wordnet-glosses (Debian wordnet-base)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ragleak.corpora import load_corpus
from ragleak.errors import CorpusError
from ragleak.records import canonical_json

FIXTURES = Path(__file__).parent / "fixtures"
HAVE_CHATTERBOT = importlib.util.find_spec("chatterbot_corpus") is not None
HAVE_WORDNET = Path("/usr/share/wordnet/data.noun").is_file()
needs_chatterbot = pytest.mark.skipif(not HAVE_CHATTERBOT, reason="chatterbot-corpus is not installed")
needs_wordnet = pytest.mark.skipif(not HAVE_WORDNET, reason="Debian's wordnet-base is not installed")


# ---- chatterbot-qa ---------------------------------------------------------------------------


def _yaml_corpus(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "data" / "english"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return tmp_path / "data"


def test_chatterbot_layout_from_a_data_dir(tmp_path) -> None:
    data = _yaml_corpus(tmp_path, {
        "science.yml": "categories:\n- science\nconversations:\n- - What is water?\n  - H2O.\n  - A liquid.\n"
                       "- 'A bare trivia string - 42'\n- - ''\n",
        "arts.yml": "categories:\n- arts\nconversations:\n- - Who painted it?\n  - Someone.\n",
    })
    docs = load_corpus("chatterbot-qa", data_dir=str(data))
    assert [d.id for d in docs] == ["chatterbot-arts-0000", "chatterbot-science-0000", "chatterbot-science-0001"]
    assert docs[1].text == "What is water?\nH2O.\nA liquid."
    assert docs[1].metadata == {"category": "science", "file": "science.yml", "question": "What is water?", "n_turns": 3}
    assert docs[2].text == "A bare trivia string - 42"


def test_chatterbot_malformed_yaml(tmp_path) -> None:
    data = _yaml_corpus(tmp_path, {"bad.yml": "conversations: [unclosed\n"})
    with pytest.raises(CorpusError, match="bad.yml"):
        load_corpus("chatterbot-qa", data_dir=str(data))
    data2 = _yaml_corpus(tmp_path / "b", {"odd.yml": "- just\n- a list\n"})
    with pytest.raises(CorpusError, match="conversations"):
        load_corpus("chatterbot-qa", data_dir=str(data2))


def test_chatterbot_missing_language(tmp_path) -> None:
    with pytest.raises(CorpusError, match="no language folder"):
        load_corpus("chatterbot-qa", data_dir=str(tmp_path), language="klingon")


@needs_chatterbot
def test_chatterbot_installed_package() -> None:
    docs = load_corpus("chatterbot-qa")
    assert len(docs) == 2026  # chatterbot-corpus 1.3.3, English
    assert len({d.metadata["category"] for d in docs}) == 21
    assert all(d.text.strip() and d.metadata["question"] == d.text.split("\n")[0] for d in docs)


@needs_chatterbot
def test_chatterbot_subsample_is_seeded_and_ordered() -> None:
    a = load_corpus("chatterbot-qa", n_docs=40, seed=5)
    assert canonical_json(a) == canonical_json(load_corpus("chatterbot-qa", n_docs=40, seed=5))
    assert [d.id for d in a] != [d.id for d in load_corpus("chatterbot-qa", n_docs=40, seed=6)]
    order = [d.id for d in load_corpus("chatterbot-qa")]
    positions = [order.index(d.id) for d in a]
    assert positions == sorted(positions)


@needs_chatterbot
def test_chatterbot_categories_filter_and_errors() -> None:
    docs = load_corpus("chatterbot-qa", categories=["history", "science"])
    assert {d.metadata["file"] for d in docs} == {"history.yml", "science.yml"}
    with pytest.raises(CorpusError, match="no categories"):
        load_corpus("chatterbot-qa", categories=["nope"])
    with pytest.raises(CorpusError, match="fewer than n_docs"):
        load_corpus("chatterbot-qa", n_docs=10**6)


# ---- wordnet-glosses -------------------------------------------------------------------------


def test_wordnet_fixture_parsing() -> None:
    docs = load_corpus("wordnet-glosses", root=str(FIXTURES / "wordnet"), n_docs=9)
    assert [d.id for d in docs] == [
        "wn-noun-00001740", "wn-noun-00001930", "wn-noun-00002137", "wn-noun-00002452",
        "wn-verb-00001740", "wn-verb-00002325", "wn-adj-00019731", "wn-adj-00020103", "wn-adv-00001740",
    ]
    by_id = {d.id: d for d in docs}
    assert by_id["wn-noun-00002137"].text == (
        "abstraction, abstract entity: a general concept formed by extracting common features from specific examples"
    )
    assert by_id["wn-verb-00001740"].metadata == {
        "pos": "verb", "offset": "00001740", "lexfile": 29, "lemmas": "breathe; take a breath; respire; suspire",
    }
    assert by_id["wn-adj-00019731"].text.startswith("handy, ready to hand: easy to reach;")
    assert by_id["wn-adj-00020103"].metadata["lemmas"] == "outback; remote"
    assert not any("fixture" in d.text or "Header" in d.text for d in docs)


def test_wordnet_fixture_pos_and_sample_size() -> None:
    root = str(FIXTURES / "wordnet")
    verbs = load_corpus("wordnet-glosses", root=root, n_docs=2, pos=["verb"])
    assert {d.metadata["pos"] for d in verbs} == {"verb"}
    with pytest.raises(CorpusError, match="fewer than n_docs"):
        load_corpus("wordnet-glosses", root=root, n_docs=10)
    from ragleak.errors import ConfigError

    with pytest.raises(ConfigError, match="repeat"):
        load_corpus("wordnet-glosses", root=root, pos=["noun", "noun"])


def test_wordnet_missing_files_say_how_to_install(tmp_path) -> None:
    with pytest.raises(CorpusError, match=r"apt-get install wordnet-base"):
        load_corpus("wordnet-glosses", root=str(tmp_path))


def test_wordnet_malformed_line(tmp_path) -> None:
    (tmp_path / "data.noun").write_text("  1 header\n00001740 03 n 01 entity 0 000 no gloss here\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"data\.noun:2: malformed"):
        load_corpus("wordnet-glosses", root=str(tmp_path), n_docs=1, pos=["noun"])


def test_wordnet_wrong_synset_type(tmp_path) -> None:
    (tmp_path / "data.verb").write_text("00001740 03 n 01 entity 0 000 | a gloss\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"data\.verb:1: malformed.*synset type 'n'"):
        load_corpus("wordnet-glosses", root=str(tmp_path), n_docs=1, pos=["verb"])


@needs_wordnet
def test_wordnet_real_files() -> None:
    docs = load_corpus("wordnet-glosses")
    assert len(docs) == 500 and len({d.id for d in docs}) == 500
    assert canonical_json(docs) == canonical_json(load_corpus("wordnet-glosses"))
    assert [d.id for d in docs] != [d.id for d in load_corpus("wordnet-glosses", seed=1)]
    assert {d.metadata["pos"] for d in docs} == {"noun", "verb", "adj", "adv"}
    assert all(": " in d.text and "|" not in d.text and "LICENSEE" not in d.text for d in docs)
    order = ["noun", "verb", "adj", "adv"]
    keys = [(order.index(d.metadata["pos"]), d.metadata["offset"]) for d in docs]
    assert keys == sorted(keys)
