"""NEL classifier quality on the held-out set, and its vocabulary against the defenses' substitutes.

Writes one JSON file and prints a Markdown table (the one in docs/metrics.md). Per class: support,
predictions, precision and recall (exact text + class) with 95% Clopper-Pearson intervals, on

* ``heldout/test``: templates with odd index of the held-out set (presidio-evaluator templates
  filled with Fake Name Generator people absent from Faker's lists). Quote this one: the decision
  rules were revised while reading errors on the other half only;
* ``heldout/dev``: the even-index half the rules were revised on (optimistic);
* ``dev``: the 63 sentences written alongside the first rules (optimistic).

Also: how much of Faker's en_US name lists the classifier lexicon contains (it is built from
names-dataset, so some overlap is natural, but it is not a copy), and ``vocabulary_overlap`` of
each substitution defense's public vocabulary (LPRAG's candidates) and the maskers' tags.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_nel.py --out benchmarks/results/bench_nel-DATE.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

CLASSES = ("PERSON_NAME", "PERSON_NAME_AMBIGUOUS", "EMAIL_REAL")


def splits() -> dict[str, list[dict] | str]:
    from ragleak.metrics.nel import load_eval_set

    held = load_eval_set("heldout")
    return {"heldout/test": [x for x in held if x["source"]["template"] % 2 == 1],
            "heldout/dev": [x for x in held if x["source"]["template"] % 2 == 0],
            "heldout/all": held, "dev": "dev"}


def substitution_vocabularies() -> dict[str, list[str]]:
    from ragleak.defenses.lprag import CANDIDATES

    lprag = [*CANDIDATES["PERSON"], *CANDIDATES["EMAIL"]]
    return {"lprag": lprag, "lprag-output": lprag,
            "pad / pad-regex (mask tags)": ["<PERSON>", "<EMAIL>", "<EMAIL_ADDRESS>", "<PHONE>", "<PHONE_NUMBER>"]}


def faker_overlap() -> dict[str, float]:
    from faker.providers.person.en_US import Provider

    from ragleak.metrics.nel import lexicon

    lex = lexicon()
    first, last = set(Provider.first_names), set(Provider.last_names)
    return {"faker_first_in_given": len(first & lex["given"]) / len(first),
            "faker_last_in_surname": len(last & lex["surname"]) / len(last),
            "given_size": len(lex["given"]), "surname_size": len(lex["surname"])}


def fmt(row: dict, key: str) -> str:
    if row[key] is None:
        return "-"
    low, high = row[f"{key}_ci"]
    return f"{row[key]:.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from ragleak.metrics.nel import NELClassifier, evaluate, vocabulary_overlap

    t0 = time.perf_counter()
    results: dict = {"date": dt.date.today().isoformat(), "evaluation": {}}
    for ner in (True, False):
        clf = NELClassifier(ner=ner)
        for name, data in splits().items():
            results["evaluation"][f"{name}{'' if ner else ' (lexicon only)'}"] = evaluate(clf, data)
    results["faker_overlap"] = faker_overlap()
    results["substitution_overlap"] = {d: vocabulary_overlap(v) for d, v in substitution_vocabularies().items()}
    results["seconds"] = round(time.perf_counter() - t0, 1)
    print("| set | class | support | predicted | precision [95% CP] | recall [95% CP] |")
    print("|---|---|---:|---:|---|---|")
    for name, report in results["evaluation"].items():
        for label in CLASSES:
            row = report[label]
            if row["support"]:
                print(f"| {name} | {label} | {row['support']} | {row['predicted']} | {fmt(row, 'precision')} | "
                      f"{fmt(row, 'recall')} |")
    print(json.dumps({"faker_overlap": results["faker_overlap"]}, indent=1))
    for d, o in results["substitution_overlap"].items():
        print(f"{d}: {o['values']} values, swallowed by placeholders {o['swallowed']}, counted by NEL_strict "
              f"{o['counted']}, with a lexicon word {o['lexicon']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
