"""Scored transcripts: metrics for transcripts written by ``ragleak attack`` (or any other run),
and a run directory built from them that ``ragleak report`` and ``diff`` read like a grid run.

A transcript holds every query and answer, so every metric can be computed after the fact
(``measure.run_attack`` on the transcript: its queries were sent already); what the transcript does not
hold comes from the user: the corpus the target indexed (``--corpus``: the ground truth of the
extraction and PII metrics) and a corpus view (``--view``: MI member labels, canary secrets),
applied with the attack's own ``label``.

Each transcript becomes one cell. Its "defense" is the label the report groups by: the defense
named in the transcript's traces (the built-in pipeline), else the target's name (an endpoint),
unless the caller names it. The guarantee is left empty: a transcript does not say with which
parameters its target ran, so no guarantee is claimed for it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from ragleak.attacks import ATTACKS
from ragleak.attacks.base import CorpusView, Transcript
from ragleak.config import StackConfig
from ragleak.corpora import documents_digest, load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.errors import ConfigError
from ragleak.grid.spec import DEFAULT_MIN_ANSWERED_SHARE, CellSpec, GridConfig
from ragleak.grid.store import CellRecord, RunStore, measured_record
from ragleak.measure import AttackRun
from ragleak.records import Passage

log = logging.getLogger(__name__)

#: The grid name written into the plan of a run built from transcripts.
SCORED_GRID = "scored-transcripts"


@dataclass(frozen=True)
class ScoredTranscript:
    """One transcript (labelled with the view, if any), where it came from, and its cell spec."""

    path: Path
    transcript: Transcript
    spec: CellSpec


def read_transcript(path: Path) -> Transcript:
    try:
        return Transcript.from_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"transcript {path} does not exist") from exc
    except (ValidationError, ValueError) as exc:
        raise ConfigError(f"{path} is not a ragleak transcript: {str(exc).splitlines()[0]}") from exc


def _looks_like_transcript(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return False
    return isinstance(data, dict) and "attack" in data and "queries" in data


def transcript_paths(source: Path) -> list[Path]:
    """``source`` itself, or the transcripts of a folder (its ``*.json`` files, and those under
    ``transcripts/``, that hold a transcript's ``attack`` and ``queries``)."""
    source = Path(source)
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ConfigError(f"{source}: no such transcript file or folder")
    paths = [p for p in sorted([*source.glob("*.json"), *source.glob("transcripts/*.json")])
             if _looks_like_transcript(p)]
    if not paths:
        raise ConfigError(f"{source}: no transcript JSON files (written by `ragleak attack --out`) in this folder")
    return paths


def scoring_corpus(corpus: Path | str | None, config: StackConfig | None = None) -> tuple[list[Passage], str, str | None]:
    """The passages of ``corpus``, which the transcripts' target indexed (chunked as the stack
    config says: the extraction metrics' ground truth), its label and its documents' digest; no
    corpus: no passages."""
    config = config or StackConfig()
    if corpus is None:
        return [], "unknown-corpus", None
    documents = load_corpus(corpus)
    passages = [p for p in chunk_documents(documents, config.chunk_words, config.chunk_overlap) if p.text.strip()]
    return passages, Path(str(corpus)).name or str(corpus), documents_digest(documents)


def label_with_view(transcript: Transcript, view: CorpusView | None) -> Transcript:
    """``transcript`` with the view's ground truth attached by its attack's own ``label`` (MI
    member labels, canary hits); unchanged without a view."""
    if view is None:
        return transcript
    attack = ATTACKS.get(transcript.attack)(**transcript.params)
    return attack.label(transcript.model_copy(deep=True), view)


def target_label(transcript: Transcript) -> str:
    """The defense the transcript's traces name (built-in pipeline), else its target's name."""
    names = {q.trace.defense for q in transcript.queries if q.trace is not None}
    return names.pop() if len(names) == 1 else transcript.target


def scored(paths: Sequence[Path], view: CorpusView | None, corpus_label: str, corpus_digest: str | None,
           label: str | None = None) -> list[ScoredTranscript]:
    out = []
    for path in paths:
        t = label_with_view(read_transcript(path), view)
        spec = CellSpec(attack=t.attack, defense=label or target_label(t), corpus=corpus_label, mode=t.mode,
                        seed=t.seed, budget=t.budget or None, attack_params=t.params, corpus_digest=corpus_digest,
                        versions={f"attack:{t.attack}": t.attack_version, "transcript": t.release_digest()[:16]})
        out.append(ScoredTranscript(path=Path(path), transcript=t, spec=spec))
    return out


def write_run(out: Path, items: Sequence[ScoredTranscript], runs: Sequence[AttackRun],
              min_share: float = DEFAULT_MIN_ANSWERED_SHARE) -> list[CellRecord]:
    """A run directory at ``out`` with one cell per transcript (plan, cell records, transcripts);
    ``runs``: each transcript measured (``measure.run_attack``), in the order of ``items``. The
    records carry no model use: the transcripts' queries ran elsewhere."""
    specs = [i.spec for i in items]
    if len({s.cell_id for s in specs}) != len(specs):
        raise ConfigError("two transcripts give the same cell (the same attack, target, seed and release); "
                          "score each once")
    config = GridConfig(name=SCORED_GRID, attacks=sorted({s.attack for s in specs}),
                        defenses=sorted({s.defense for s in specs}), corpora=sorted({s.corpus for s in specs}),
                        min_answered_share=min_share)
    store = RunStore(out)
    store.init(config, specs)
    records = []
    for item, run in zip(items, runs, strict=True):
        record = measured_record(item.spec, item.transcript, run.metrics, None, min_share)
        records.append(store.write_cell(record, item.transcript))
    log.info("scored %d transcripts into %s", len(records), out)
    return records
