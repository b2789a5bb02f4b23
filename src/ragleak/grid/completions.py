"""How long the answers of each attack really are, for the dry-run's expected ETA.

Decoding dominates a grid's time (95% of its profile samples are llama.cpp decode) and an answer
rarely runs to ``max_tokens``: a prompt-stealing answer may repeat a whole context, a membership
probe's is a sentence. So the plan prices decoding at completion lengths observed per (attack,
role, model), where role is ``target`` (the audited pipeline's answers), ``bare`` (its answers to
a bare question, a query a defense answered with no passages: ``Defense.context_budget``) or
``attacker`` (an agent attack's own LLM calls), and keeps ``max_tokens`` only as the upper bound.

Observations come from a run folder's generation cache (``observe(run_dir)``): each entry holds
its exact rendered prompt and the ``Generation`` with its token counts. A target entry is
attributed to its attack by matching that prompt to a prompt some cell's transcript recorded in
its trace; an entry no trace shows (an attacker call, a voter's sequence) is attributed to the
one attack of the run whose declared attacker decode cap (``StreamShape.attacker_max_tokens``)
equals the entry's ``max_tokens``, and left unattributed when no attack or several attacks of the
run share that cap, or the target's own decoding shares it and the entry's settings are the
target's (an entry sampled at settings no target uses is still an attacker call). Target answers
are also kept per defense that changes what the model reads (``CompletionTable.under``). Without
a run, the plan reads the table measured on this project's runs (``data/plan/completions.v1.json``,
its provenance inside).

The finished cell records give, per attack, how many queries it really sent of its budget and
its own LLM calls per target query (``AttackCalls``): the expected ETA scales by both, the upper
bound keeps the full budget and the larger of the declared and observed calls. An attack that
ends on its own (IKEA runs out of anchors: greedy decoding writes the same question for an anchor
every time) stops where it stops whatever its budget, so a cell that sent fewer queries than its
budget prices any budget at most at what it sent; one that used its whole budget says nothing
beyond it, so a larger budget is priced whole. Observations on the planned cell's corpus come
first (where an attack stops depends on what it reads).

Each row keeps the median (what a typical call costs, as asked of the plan) and the mean: the
ETA sums calls, so it prices them at the mean, which a few answers at the cap pull above the
median.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import statistics
from collections import defaultdict
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Iterable, Literal

from ragleak.errors import ConfigError

log = logging.getLogger(__name__)

Role = Literal["target", "bare", "attacker"]
TABLE = "completions.v1.json"


@dataclass(frozen=True)
class CompletionStats:
    """Observed token counts of one (attack, role, model)'s generations."""

    attack: str
    role: Role
    model: str
    n: int
    completion_median: float
    completion_mean: float
    # None: no prompt of this role measures what it asks (only a conversation's later bare turns,
    # which carry its history, were observed)
    prompt_median: float | None
    at_cap: float  # share of them that stopped at max_tokens

    def row(self) -> dict:
        return {"attack": self.attack, "role": self.role, "model": self.model, "n": self.n,
                "completion_median": self.completion_median, "completion_mean": self.completion_mean,
                "prompt_median": self.prompt_median, "at_cap": self.at_cap}


@dataclass(frozen=True)
class SentQueries:
    """One observed cell of an attack: its corpus, its budget and the queries it sent."""

    corpus: str
    budget: int
    sent: int

    def expected(self, budget: int) -> float:
        """Queries this cell's attack would send under ``budget``: where it ended on its own (it
        sent less than its budget), at most that; otherwise the whole of ``budget``."""
        return float(min(budget, self.sent)) if self.sent < self.budget else float(budget)

    def row(self) -> dict:
        return {"corpus": self.corpus, "budget": self.budget, "sent": self.sent}


@dataclass(frozen=True)
class AttackCalls:
    """What an attack's cells really sent, from their records: the share of the budget it used
    (an attack may stop early) and its own LLM calls per target query (RAG-Thief reflects only
    on answers that yield a new chunk; IKEA's anchors come on top of its per-query calls), each
    distinct prompt of a cell once (a repeat is a cache hit: ``CachedGenerator.repeats``)."""

    attack: str
    cells: int
    queries_share: float | None  # sent / budget over the ok cells with a budget; None: no such cell
    attacker_per_query: float
    sent: tuple[SentQueries, ...] = ()  # the cells with a budget (tables before 2026-12-06: none)
    version: str | None = None  # the attack's plugin version in those cells (None: not recorded)
    # share of the target's generations that repeated a prompt the cell had sent (served by the
    # cache), in single-prompt cells whose generation prompts depend on the query alone
    # (``generation_prompts_repeat``); None: no such cell observed
    target_repeat_share: float | None = None
    # share of the bare questions (``Defense.context_budget``: asked after the defense stopped
    # giving passages) that repeated one the cell had sent, in single-prompt cells of a defense
    # whose prompts with passages never repeat (noise), so every repeat there is a bare one. An
    # agent re-sends more when its answers are bare (RAG-Thief: 0.60-0.70 under ca-dp, 0.49-0.66
    # of its queries under none); None: no such cell observed
    bare_repeat_share: float | None = None

    def expected_queries(self, budget: int, corpus: str) -> tuple[float, str]:
        """(queries expected under ``budget`` on ``corpus``, what that rests on): the mean over
        the observed cells on that corpus, else over all observed cells (``SentQueries.expected``);
        tables without them scale by ``queries_share``, at most the whole budget."""
        same = [c for c in self.sent if c.corpus == corpus]
        cells = same or list(self.sent)
        if cells:
            where = f"{len(cells)} cell(s) on {corpus}" if same else f"{len(cells)} cell(s) on other corpora"
            return sum(c.expected(budget) for c in cells) / len(cells), where
        share = min(self.queries_share, 1.0) if self.queries_share is not None else 1.0
        return budget * share, "share of the budget"

    def repeat_share(self, queries: float, bare: bool = False) -> float:
        """The share of target generations (``bare``: of bare questions, where observed, else of
        all target generations) a cell expected to send ``queries`` queries repeats: the observed
        share where it sends at least as many as the fewest an observed cell sent, else none
        (repeats build up over a cell: RAG-Thief re-sends anchors it has used, which a short cell
        has not yet done, so the share of a longer one would price it low)."""
        share = self.bare_repeat_share if bare and self.bare_repeat_share is not None else self.target_repeat_share
        if not share:
            return 0.0
        fewest = min((c.sent for c in self.sent), default=0)
        return share if queries >= fewest else 0.0

    def row(self) -> dict:
        return {"attack": self.attack, "cells": self.cells, "queries_share": self.queries_share,
                "attacker_per_query": self.attacker_per_query, "sent": [c.row() for c in self.sent],
                "version": self.version, "target_repeat_share": self.target_repeat_share,
                "bare_repeat_share": self.bare_repeat_share}


@dataclass(frozen=True)
class VotingStats:
    """What a voting defense's answers to an attack decoded on average, from the ``voting_used``
    its cells' records hold (``defenses.base.VotingUse``): private-rag leaves the slots of
    documents under its relevance threshold empty and an answer ends at its end token, so its cost
    is under its ``VotingShape``'s caps by an amount that depends on the queries (an attack's
    topical questions find relevant documents, a prompt-stealing command few) and the corpus."""

    defense: str
    attack: str
    model: str
    cells: int
    answers: int
    prompts_mean: float
    passages_mean: float
    steps_mean: float

    def row(self) -> dict:
        return {"defense": self.defense, "attack": self.attack, "model": self.model, "cells": self.cells,
                "answers": self.answers, "prompts_mean": self.prompts_mean,
                "passages_mean": self.passages_mean, "steps_mean": self.steps_mean}


@dataclass(frozen=True)
class CompletionTable:
    """Observed completions by (attack, role, model), calls by attack, voting answers by
    (defense, attack, model), and where they come from."""

    rows: dict[tuple[str, str, str], CompletionStats]
    source: str
    unattributed: int = 0  # cache entries no attack could be matched to
    calls: dict[str, AttackCalls] = field(default_factory=dict)
    voting: dict[tuple[str, str, str], VotingStats] = field(default_factory=dict)
    # target answers by (defense, attack, model), for the defenses that change what the model reads
    # (``observe``): RAG-Thief's answers ran to 214.5 tokens on average under dp-retrieval's noisy
    # passages against 112.8 under none, so an answer's length depends on the defense too
    under: dict[tuple[str, str, str], CompletionStats] = field(default_factory=dict)
    # the tables this one was merged with (``benchmarks/plan_completions.py --keep-shipped``), newest
    # first, each named by its own ``source``; each row names the run it comes from
    earlier_sources: tuple[str, ...] = ()

    def get(self, attack: str, role: Role, model: str) -> CompletionStats | None:
        return self.rows.get((attack, role, model))

    def target_under(self, defense: str, attack: str, model: str) -> CompletionStats | None:
        """The target answers of ``attack`` observed under ``defense`` (None: none observed)."""
        return self.under.get((defense, attack, model))

    def voting_for(self, defense: str, attack: str, model: str) -> VotingStats | None:
        return self.voting.get((defense, attack, model))

    def to_json(self) -> dict:
        return {"source": self.source, "earlier_sources": list(self.earlier_sources), "unattributed": self.unattributed,
                "rows": [s.row() for s in sorted(self.rows.values(), key=lambda s: (s.model, s.attack, s.role))],
                "calls": [c.row() for _, c in sorted(self.calls.items())],
                "voting": [v.row() for _, v in sorted(self.voting.items())],
                "target_under_defense": [{"defense": d, **s.row()} for (d, *_), s in sorted(self.under.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "CompletionTable":
        rows = {}
        names = CompletionStats.__dataclass_fields__
        for r in data.get("rows", []):
            s = CompletionStats(**{k: v for k, v in r.items() if k in names})
            rows[(s.attack, s.role, s.model)] = s
        calls = {}
        for r in data.get("calls", []):
            fields = {k: v for k, v in r.items() if k in AttackCalls.__dataclass_fields__}
            fields["sent"] = tuple(SentQueries(str(c["corpus"]), int(c["budget"]), int(c["sent"]))
                                   for c in r.get("sent") or ())
            c = AttackCalls(**fields)
            calls[c.attack] = c
        voting = {}
        for r in data.get("voting", []):
            v = VotingStats(**{k: v for k, v in r.items() if k in VotingStats.__dataclass_fields__})
            voting[(v.defense, v.attack, v.model)] = v
        under = {}
        for r in data.get("target_under_defense", []):
            s = CompletionStats(**{k: v for k, v in r.items() if k in names})
            under[(str(r["defense"]), s.attack, s.model)] = s
        return cls(rows, str(data.get("source", "?")), int(data.get("unattributed", 0)), calls, voting, under,
                   tuple(str(s) for s in data.get("earlier_sources") or ()))


def stored_table() -> CompletionTable:
    """The completion lengths measured on this project's runs (shipped with the package)."""
    text = resources.files("ragleak").joinpath("data", "plan", TABLE).read_text(encoding="utf-8")
    return CompletionTable.from_json(json.loads(text))


def summarise(samples: dict[tuple[str, str, str], list[tuple[int, int | None, bool]]], source: str,
              unattributed: int = 0, calls: dict[str, AttackCalls] | None = None,
              voting: dict[tuple[str, str, str], VotingStats] | None = None) -> CompletionTable:
    """A table from (completion tokens, prompt tokens, stopped at the cap) samples per key; a
    sample's prompt tokens None: its answer counts, its prompt does not (``_trace_prompts``)."""
    rows = {key: _stats(*key, values) for key, values in samples.items() if values}
    return CompletionTable(rows, source, unattributed, calls or {}, voting or {})


def _stats(attack: str, role: str, model: str, values: list[tuple[int, int | None, bool]]) -> CompletionStats:
    completions = [c for c, _, _ in values]
    prompts = [p for _, p, _ in values if p is not None]
    return CompletionStats(
        attack=attack, role=role, model=model, n=len(values),  # type: ignore[arg-type]
        completion_median=float(statistics.median(completions)),
        completion_mean=round(statistics.fmean(completions), 1),
        prompt_median=float(statistics.median(prompts)) if prompts else None,
        at_cap=round(sum(1 for *_, cap in values if cap) / len(values), 3))


def generation_prompts_repeat(defense: str, carries_answers: bool) -> bool:
    """Whether a query sent again reaches the model as the same prompt, so the cache serves it: a
    single prompt (a conversation's next turn carries other history) through a defense that says
    so (``Defense.repeats_prompts``: none, one acting only after generation, LPRAG; a defense
    drawing noise before generation gives the same query another prompt)."""
    from ragleak.defenses import defense_class

    try:
        repeats = defense_class(defense).repeats_prompts()
    except Exception:  # noqa: BLE001 - a plugin this install lacks: assume it may randomise
        return False
    return not carries_answers and repeats


def attack_calls(cells: Iterable[dict]) -> dict[str, AttackCalls]:
    """``AttackCalls`` per attack over the finished cell records of a run."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # cells, sent, budgeted sent, budget, agent
    stops: dict[str, list[SentQueries]] = defaultdict(list)
    versions: dict[str, set[str]] = defaultdict(set)
    repeats: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # target repeats, target generations
    bare: dict[str, list[float]] = defaultdict(lambda: [0, 0])  # bare repeats, bare questions
    for cell in cells:
        spec, counts = cell["spec"], cell.get("counts") or {}
        sent = counts.get("queries")
        if cell.get("status") not in ("ok", "partial") or not isinstance(sent, int) or sent <= 0:
            continue
        roles = cell.get("calls_by_role") or {}
        # the attack's own model: its agent ("attacker") and a standard LLM it compares with; a
        # prompt the cell had sent before is served by the cache in any plan, so not counted
        agent = {k: sum((roles.get(r) or {}).get(k, 0) for r in ("attacker", "standard"))
                 for k in ("model_calls", "cache_hits", "cache_repeats")}
        row = sums[spec["attack"]]
        row[0] += 1
        row[1] += sent
        budget = spec.get("budget") or counts.get("budget")  # records before 2026-12-06: the spec's only
        # where an attack ends: a partial cell may have ended on its failed queries, not on its own
        if isinstance(budget, int) and budget > 0 and cell.get("status") == "ok":
            row[2] += sent
            row[3] += budget
            stops[spec["attack"]].append(SentQueries(str(spec.get("corpus", "?")), budget, sent))
        target = roles.get("target") or {}
        if "cache_repeats" in target and generation_prompts_repeat(str(spec.get("defense")), spec.get("mode") == "multi"):
            repeats[spec["attack"]][0] += target["cache_repeats"]
            repeats[spec["attack"]][1] += target.get("model_calls", 0) + target.get("cache_hits", 0)
        asked_bare = _bare_questions(spec, sent) if "cache_repeats" in target else None
        if asked_bare:
            bare[spec["attack"]][0] += target["cache_repeats"]
            bare[spec["attack"]][1] += asked_bare
        version = (spec.get("versions") or {}).get(f"attack:{spec['attack']}")
        if version is not None:
            versions[spec["attack"]].add(str(version))
        row[4] += agent["model_calls"] + agent["cache_hits"] - agent["cache_repeats"]
    return {attack: AttackCalls(attack, int(n), round(budgeted / budget, 3) if budget else None,
                                round(agent / sent, 3), tuple(stops[attack]), ",".join(sorted(versions[attack])) or None,
                                round(repeats[attack][0] / repeats[attack][1], 3) if repeats[attack][1] else None,
                                round(bare[attack][0] / bare[attack][1], 3) if bare[attack][1] else None)
            for attack, (n, sent, budgeted, budget, agent) in sums.items()}


def _bare_questions(spec: dict, sent: int) -> int | None:
    """Bare questions of a finished single-prompt cell of ``sent`` queries whose defense has a
    context budget (one client: grid targets name no principal) and draws fresh noise for every
    prompt with passages (``Defense.repeats_prompts`` False), so that its target repeats are all
    bare ones; None for any other cell (or a defense this install cannot build)."""
    from ragleak.defenses import defense_class
    from ragleak.grid.spec import CellSpec

    if spec.get("mode") == "multi":
        return None
    try:
        cell = CellSpec.model_validate(spec)
        cls = defense_class(cell.defense)
        budget = cls(**cell.defense_kwargs()).context_budget()
        if budget is None or cls.repeats_prompts():
            return None
    except Exception:  # noqa: BLE001 - a plugin this install lacks, a record of another version: its cells say nothing here
        return None
    return max(sent - budget, 0)


def voting_use(cells: Iterable[dict]) -> dict[tuple[str, str, str], VotingStats]:
    """``VotingStats`` per (defense, attack, model) over the cell records of a run that hold a
    ``voting_used`` (the finished cells of voting defenses)."""
    sums: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # cells, answers, prompts, passages, steps
    for cell in cells:
        spec, used = cell["spec"], (cell.get("defense_state") or {}).get("voting_used")
        if not isinstance(used, dict) or not isinstance(used.get("answers"), int) or used["answers"] <= 0:
            continue
        model = str((spec.get("stack") or {}).get("model", "?"))
        row = sums[(str(spec.get("defense")), str(spec.get("attack")), model)]
        row[0] += 1
        for i, k in enumerate(("answers", "prompts", "passages", "steps"), start=1):
            row[i] += int(used.get(k, 0))
    return {key: VotingStats(*key, n, answers, round(prompts / answers, 3), round(passages / answers, 3),
                             round(steps / answers, 2))
            for key, (n, answers, prompts, passages, steps) in sums.items()}


def _model_names() -> dict[str, str]:
    from ragleak.rag.models import MODELS

    return {spec.sha256: name for name, spec in MODELS.items()}


def _run_cells(run_dir: Path) -> list[dict]:
    cells = []
    for path in sorted((run_dir / "cells").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("spec"), dict):
            cells.append(record)
    return cells


def _trace_prompts(run_dir: Path, defenses: dict[str, str]) -> dict[str, tuple[str, Role, bool, str | None]]:
    """Rendered target prompt -> (the attack whose transcript recorded it, ``bare`` where the
    trace gave the model no passages, else ``target``, whether the prompt's length measures what
    it asks, the defense of the transcript's cell where ``defenses`` (cell id -> defense) names
    one). A bare prompt of a
    conversation's later turn carries the conversation's history: its answer is a bare answer,
    but its length would size the attack's question (``_question_excess`` reads the bare
    prompts' length) by that history."""
    prompts: dict[str, tuple[str, Role, bool, str | None]] = {}
    for path in sorted((run_dir / "transcripts").glob("*.json")):
        try:
            transcript = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        defense = defenses.get(path.stem)  # a transcript is named by its cell's id
        for query in transcript.get("queries", []):
            trace = query.get("trace") or {}
            if trace.get("prompt"):
                # a trace that lists no context at all (one another target wrote) is not called bare
                role: Role = "bare" if trace.get("context") == [] else "target"
                measures = role != "bare" or not query.get("turn", 0)
                prompts.setdefault(trace["prompt"], (transcript["attack"], role, measures, defense))
    return prompts


def _reads_other_passages(defense: str | None) -> bool:
    """Whether a defense changes what the model reads (any hook before ``postprocess``), so its
    answers get rows of their own (``CompletionTable.under``); unknown ones do not."""
    from ragleak.defenses import defense_class

    try:
        return defense is not None and not defense_class(defense).acts_after_generation_only()
    except Exception:  # noqa: BLE001 - a plugin this install lacks
        return False


def _attacker_caps(cells: Iterable[dict], with_target: bool = True) -> dict[int, str | None]:
    """max_tokens -> the one attack of the run whose attacker calls decode at that cap (None:
    shared by several attacks, or - ``with_target`` - by the target's own decoding, so not
    attributable)."""
    from ragleak.attacks import ATTACKS

    caps: dict[int, set[str]] = defaultdict(set)
    for cell in cells:
        spec = cell["spec"]
        decoding = (spec.get("stack") or {}).get("decoding") or {}
        if with_target:
            caps[int(decoding.get("max_tokens", 256))].add("<target>")
        try:
            shape = ATTACKS.get(spec["attack"])(**(spec.get("attack_params") or {})).stream_shape(spec.get("mode", "single"))
        except Exception as exc:  # noqa: BLE001 - a plugin this install lacks: its calls stay unattributed
            log.info("observe: attack %s not buildable here (%s)", spec.get("attack"), exc)
            continue
        if shape.attacker_calls_per_query and shape.attacker_max_tokens is not None:
            caps[shape.attacker_max_tokens].add(spec["attack"])
    return {cap: next(iter(names)) if len(names) == 1 and "<target>" not in names else None
            for cap, names in caps.items()}


def _target_params(cells: Iterable[dict]) -> set[str]:
    """The decoding settings (as the cache stores them) of the run's targets: an entry decoded
    with other settings (DEAL's optimizer samples at temperature 0.7) is no target's answer."""
    from ragleak.rag.generator import DecodingParams
    from ragleak.records import canonical_json

    out = set()
    for cell in cells:
        decoding = ((cell["spec"].get("stack") or {}).get("decoding") or {})
        try:
            out.add(canonical_json(DecodingParams(**decoding)))
        except (TypeError, ValueError):  # a field this install does not know: nothing is excluded by it
            continue
    return out


def observe(run_dir: Path) -> CompletionTable:
    """Completion lengths per (attack, role, model) in the generation cache of the grid run in
    ``run_dir`` (read-only: a run in progress is not disturbed)."""
    run_dir = Path(run_dir)
    path = run_dir / "generations.sqlite"
    if not path.exists():
        raise ConfigError(f"--observe {run_dir}: no generations.sqlite there (is it a grid run folder?)")
    cells = _run_cells(run_dir)
    # the cells whose answers also get rows of their own (``CompletionTable.under``)
    under_defenses = {str(c["cell_id"]): str(c["spec"]["defense"]) for c in cells
                      if c.get("cell_id") and _reads_other_passages(c["spec"].get("defense"))}
    prompts, caps, names = _trace_prompts(run_dir, under_defenses), _attacker_caps(cells), _model_names()
    # a cap the target shares still attributes an entry the target's settings cannot have made
    untargeted_caps, target_params = _attacker_caps(cells, with_target=False), _target_params(cells)
    samples: dict[tuple[str, str, str], list[tuple[int, int | None, bool]]] = defaultdict(list)
    under: dict[tuple[str, str, str], list[tuple[int, int | None, bool]]] = defaultdict(list)
    unattributed = 0
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        rows = conn.execute("SELECT model_id, params, prompt, generation FROM generations").fetchall()
        conn.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"--observe {run_dir}: cannot read its generation cache: {exc}") from exc
    for model_id, params_text, prompt, generation_text in rows:
        try:
            params, generation = json.loads(params_text), json.loads(generation_text)
            max_tokens, completion = int(params["max_tokens"]), int(generation["completion_tokens"])
            prompt_tokens = int(generation["prompt_tokens"])
        except (ValueError, KeyError, TypeError):
            unattributed += 1
            continue
        if generation.get("finish_reason") == "likelihood":
            continue  # a text's log-probabilities (``CachedGenerator``), not a decode
        model = names.get(model_id, model_id)
        if prompt in prompts:
            attack, role, measures, defense = prompts[prompt]
            key = (attack, role, model)
            if role == "target" and defense is not None:
                under[(defense, attack, model)].append((completion, prompt_tokens, completion >= max_tokens))
            if not measures:  # a later turn's bare prompt: its length is not the question's
                samples[key].append((completion, None, completion >= max_tokens))
                continue
        elif caps.get(max_tokens):
            key = (caps[max_tokens], "attacker", model)  # type: ignore[assignment]
        elif params_text not in target_params and untargeted_caps.get(max_tokens):
            key = (untargeted_caps[max_tokens], "attacker", model)  # type: ignore[assignment]
        else:
            unattributed += 1
            continue
        samples[key].append((completion, prompt_tokens, completion >= max_tokens))
    table = summarise(samples, f"observed in {run_dir}", unattributed, attack_calls(cells), voting_use(cells))
    return replace(table, under={(d, a, m): _stats(a, "target", m, v) for (d, a, m), v in under.items()})
