"""The audit by effect: what each hook changes on each channel, measured through the real pipeline.

For a defense class and each hook Python resolves to something other than the base identity, the
probe inputs (``probe_corpus``) go through ``pipeline.build_target`` twice: once with the defense
as it is, once with that one hook replaced by the base identity on the instance (every other hook,
the seed, the corpus and the generator the same). Per input and channel it compares

* ``retrieval``: the selected top-k passages and their order, by content (an id rewrite is not a
  change: the same passages reach the prompt);
* ``context``: the rendered prompt;
* ``output``: the answer text (whitespace-normalised).

A hook is **active** where it changes a channel on a neutral input, **pattern-limited** where it
changes one only on inputs carrying personal data (named by their types), **inactive** where no
channel ever changes, whatever the hook's own output was (a monotone rescoring, a pool cap above
top-k, an id rewrite, a decoding setting greedy decoding ignores), where it only re-orders the
same passages (the prompt carries what it carried), and where its output carries retrieved
passages verbatim (``releases_context``). Each run is repeated once as a control:
a channel that differs between two identical runs is nondeterministic there, and the hook is
credited with the change only where the run without it is deterministic. What the probe could not
exercise is stated per hook (``sensitivity``), never silently scored.

Probes: ``scripted`` (the real MiniLM embedder and FAISS index, ``ProbeGenerator`` in place of
the LLM: no model download, seconds per defense) and ``stack`` (the packaged LLM as well).
"""

from __future__ import annotations

import copy
import random
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np

from ragleak.audit.probe_corpus import ProbeInput, corpora, probe_inputs
from ragleak.audit.probe_generator import ProbeGenerator
from ragleak.audit.runtime import hook_location, overrides, owner_of
from ragleak.audit.source import AuditError
from ragleak.defenses.base import Defense
from ragleak.rag.generator import DecodingParams
from ragleak.records import HOOK_NAMES, HookName, Record, digest

ProbeKind = Literal["scripted", "stack"]
PROBE_KINDS: tuple[ProbeKind, ...] = ("scripted", "stack")
Channel = Literal["retrieval", "context", "output"]
CHANNELS: tuple[Channel, ...] = ("retrieval", "context", "output")
EffectVerdict = Literal["active", "pattern-limited", "inactive", "undetermined", "not-overridden"]

PROBE_TOP_K = 3
PROBE_CANDIDATE_K = 6
PROBE_MAX_TOKENS = {"scripted": 160, "stack": 40}  # the scripted reply is one token a word
PROBE_SEED = 0

# --------------------------------------------------------------------------------- records


class ChannelEffect(Record):
    """On how many probe inputs a hook changed one channel (``nondeterministic``: inputs where two
    identical runs of the defense already differ there and the run without the hook did too)."""

    changed: int
    inputs: int
    nondeterministic: int = 0


class HookEffect(Record):
    """One hook's measured effect: the verdict, per channel counts, the pattern types that
    triggered it, and what the probe could not exercise."""

    hook: HookName
    verdict: EffectVerdict
    overridden: bool
    defined_in: str | None = None
    location: str | None = None
    channels: dict[str, ChannelEffect] = {}
    neutral_changed: int = 0
    neutral_inputs: int = 0
    triggers: list[str] = []  # pattern types whose "with" inputs changed a channel
    with_changed: int = 0
    with_inputs: int = 0
    releases: int = 0  # inputs where this hook's output carried a retrieved passage verbatim
    errors: list[str] = []
    sensitivity: list[str] = []
    reason: str


class DefenseEffect(Record):
    """The probe's measurement of one defense class."""

    defense: str
    cls: str
    probe: ProbeKind
    declared_hooks: list[HookName]
    hooks: list[HookEffect]
    inputs: int
    errors: list[str] = []

    def effect(self, hook: HookName) -> HookEffect:
        return next(h for h in self.hooks if h.hook == hook)


# ------------------------------------------------------------------------------ the probe


@dataclass
class Probe:
    """A built probe: a stack (real embedder; the packaged LLM or ``ProbeGenerator``), one index per
    probe corpus, and the inputs."""

    kind: ProbeKind
    stack: Any
    indexes: dict[str, Any]
    inputs: list[ProbeInput]
    top_k: int = PROBE_TOP_K
    candidate_k: int = PROBE_CANDIDATE_K
    _cache_dir: Any = field(default=None, repr=False)

    @property
    def passages_per_corpus(self) -> int:
        return max(len(ix.passages) for ix in self.indexes.values())


def build_probe(kind: ProbeKind = "scripted", inputs: list[ProbeInput] | None = None,
                cache_dir: str | None = None) -> Probe:
    """The probe of ``kind``; ``stack`` keeps its generations in a cache under ``cache_dir`` (a
    temporary folder when None), so a prompt the probe already sent costs nothing."""
    import tempfile
    from pathlib import Path

    from ragleak.config import StackConfig

    if kind not in PROBE_KINDS:
        raise AuditError(f"unknown probe {kind!r}; use {' | '.join(PROBE_KINDS)}")
    decoding = DecodingParams(max_tokens=PROBE_MAX_TOKENS[kind])
    # the packaged LLM takes $RAGLEAK_THREADS (else every core); the scripted probe needs one thread
    config = StackConfig(n_threads=1 if kind == "scripted" else None, top_k=PROBE_TOP_K, candidate_k=PROBE_CANDIDATE_K, decoding=decoding,
                         seed=PROBE_SEED, use_cache=kind == "stack")
    holder = None
    if kind == "scripted":
        from ragleak.testing import ScriptedStack

        stack = ScriptedStack(config, None, {"target": ProbeGenerator(decoding)})
    else:
        from ragleak.stack import Stack

        if cache_dir is None:
            holder = tempfile.TemporaryDirectory(prefix="ragleak-audit-probe-")
            cache_dir = holder.name
        stack = Stack(config, Path(cache_dir) / "probe-generations.sqlite")
    inputs = inputs if inputs is not None else probe_inputs()
    used = {i.corpus for i in inputs}
    indexes = {name: stack.index(docs) for name, docs in corpora().items() if name in used}
    return Probe(kind, stack, indexes, inputs, _cache_dir=holder)


@dataclass
class _Observation:
    channels: dict[str, str] | None  # channel -> digest; None when the query raised
    released: dict[str, int]  # hook -> passages its output released verbatim
    error: str | None = None


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _seed_globals() -> None:
    # a hook drawing from the global generators gets the same draws in both runs: only the hook differs
    random.seed(PROBE_SEED)
    np.random.seed(PROBE_SEED)


def _identity(hook: HookName) -> Callable:
    return getattr(Defense, hook)


def _instantiate(cls: type[Defense]) -> Defense:
    try:
        return cls()
    except Exception as exc:  # the user's constructor: its failure is the finding
        raise AuditError(f"{cls.__qualname__}() failed: {type(exc).__name__}: {exc}") from exc


def _run(probe: Probe, cls: type[Defense], without: frozenset[str] = frozenset()) -> tuple[list[_Observation], list[str]]:
    """One pass of every probe input through ``cls`` (``without``: those hooks replaced by the
    identity on the instance); a fresh instance and seed per corpus. Returns the observations and run notes."""
    from ragleak.pipeline import build_target

    notes: list[str] = []
    generator = probe.stack.generator("target")
    saved = copy.deepcopy(getattr(getattr(generator, "inner", generator), "params", None))
    by_corpus: dict[str, list[int]] = {}
    for i, item in enumerate(probe.inputs):
        by_corpus.setdefault(item.corpus, []).append(i)
    out: list[_Observation | None] = [None] * len(probe.inputs)
    try:
        for corpus, positions in by_corpus.items():
            _seed_globals()
            defense = _instantiate(cls)
            for hook in without:
                setattr(defense, hook, types.MethodType(_identity(hook), defense))
            target = build_target(probe.stack, probe.indexes[corpus], defense, ctx=probe.stack.context(PROBE_SEED))
            pipeline = target.pipeline
            captured: list = []
            real_retrieve = pipeline.retrieve

            def retrieve(*args, _real=real_retrieve, _into=captured, **kwargs):
                result = _real(*args, **kwargs)
                _into.append(result)
                return result

            pipeline.retrieve = retrieve  # records the Retrieval the pipeline computes (the selected top-k)
            for i in positions:
                captured.clear()
                try:
                    response = pipeline.answer(probe.inputs[i].query)
                except Exception as exc:  # the defense's failure on this input is recorded, not fatal
                    out[i] = _Observation(None, {}, f"{type(exc).__name__}: {exc}")
                    continue
                selected = captured[-1].selected if captured else []
                context = captured[-1].context if captured else []
                trace = response.trace
                out[i] = _Observation(
                    {"retrieval": digest([s.passage.text for s in selected]),
                     "context": digest(_norm(trace.prompt)), "output": digest(_norm(response.answer)),
                     # order-insensitive: the same passages in another order
                     "retrieval_set": digest(sorted(s.passage.text for s in selected)),
                     "context_set": digest(sorted(_norm(p.text) for p in context))},
                    {r.hook: len(r.released) for r in trace.hooks})
            for hook in without:
                if getattr(vars(defense).get(hook), "__func__", None) is not _identity(hook):
                    notes.append(f"the defense rebinds {hook} on its instance while running: the run without it "
                                 "is not the identity")
    finally:
        inner = getattr(generator, "inner", generator)
        if saved is not None and hasattr(inner, "params"):
            inner.params = saved  # a hook that set the shared generator's settings must not leak into later runs
    return [o for o in out if o is not None], notes


def _fmt_errors(observations: list[_Observation]) -> list[str]:
    seen: dict[str, int] = {}
    for o in observations:
        if o.error:
            seen[o.error] = seen.get(o.error, 0) + 1
    return [f"{n}x {e}" for e, n in seen.items()]


def measure(probe: Probe, cls: type[Defense]) -> DefenseEffect:
    """Every hook's effect for defense class ``cls`` on ``probe``. Where the defense raises on
    every input, each overridden hook is tried as the identity: a hook whose replacement lets the
    queries through is the one the probe cannot run (its verdict undetermined, its error kept), and
    the other hooks are measured with it replaced in both runs."""
    hooks_attr = getattr(cls, "hooks", ())
    declared = sorted(hooks_attr) if isinstance(hooks_attr, (set, frozenset, list, tuple)) else []
    name = getattr(cls, "name", cls.__name__)
    name = cls.__name__ if name == "none" and cls is not Defense else name
    try:
        bound = set(vars(_instantiate(cls)))  # hooks the constructor binds on the instance run too
        hooks = [h for h in HOOK_NAMES if overrides(cls, h) or (h in bound and h != "generate")]
        base = _run(probe, cls)[0] if hooks else []
        fixed: frozenset[str] = frozenset()
        if base and all(o.channels is None for o in base):
            for hook in hooks:
                trial = _run(probe, cls, frozenset({hook}))[0]
                if any(o.channels is not None for o in trial):
                    fixed = frozenset({hook})
                    break
        control = _run(probe, cls, fixed)[0] if hooks else []
        if fixed:
            failing, base = base, control
            control = _run(probe, cls, fixed)[0]
    except AuditError as exc:
        effects = [HookEffect(hook=h, verdict="undetermined" if overrides(cls, h) else "not-overridden",
                              overridden=overrides(cls, h), reason=str(exc), errors=[str(exc)]) for h in HOOK_NAMES]
        return DefenseEffect(defense=name, cls=cls.__qualname__, probe=probe.kind, declared_hooks=declared,
                             hooks=effects, inputs=len(probe.inputs), errors=[str(exc)])
    effects = []
    for hook in HOOK_NAMES:
        if hook not in hooks:
            effects.append(HookEffect(hook=hook, verdict="not-overridden", overridden=False,
                                      reason="Python resolves it to the base identity"))
        elif hook in fixed:
            errors = _fmt_errors(failing)
            owner = owner_of(cls, hook)
            if all((o.error or "").startswith("NotImplementedError") for o in failing):
                effects.append(HookEffect(
                    hook=hook, verdict="inactive", overridden=True, errors=errors,
                    defined_in=owner.__qualname__ if owner else None, location=hook_location(cls, hook),
                    reason="raises NotImplementedError on every input: a stub that stops the pipeline"))
                continue
            effects.append(HookEffect(
                hook=hook, verdict="undetermined", overridden=True, errors=errors,
                defined_in=owner.__qualname__ if owner else None, location=hook_location(cls, hook),
                sensitivity=sensitivity(probe, cls, hook),
                reason=f"the probe cannot run it: the defense raised on every input ({errors[0]}) and ran once "
                       f"{hook} was the identity"))
        else:
            effects.append(_hook_effect(probe, cls, hook, base, control, fixed))
    return DefenseEffect(defense=name, cls=cls.__qualname__, probe=probe.kind, declared_hooks=declared,
                         hooks=effects, inputs=len(probe.inputs), errors=_fmt_errors(base))


def _hook_effect(probe: Probe, cls: type[Defense], hook: HookName, base: list[_Observation],
                 control: list[_Observation], fixed: frozenset[str] = frozenset()) -> HookEffect:
    without, notes = _run(probe, cls, fixed | {hook})
    if fixed:
        notes = [*notes, f"measured with {', '.join(sorted(fixed))} as the identity in both runs (the probe cannot run it)"]
    noisy = [i for i, (a, b) in enumerate(zip(base, control)) if a.channels != b.channels]
    without_again = _run(probe, cls, fixed | {hook})[0] if noisy else without
    counts = {c: [0, 0, 0] for c in CHANNELS}  # changed, inputs, nondeterministic
    changed_inputs: list[int] = []
    undecided = 0
    for i, (a, b) in enumerate(zip(base, without)):
        if a.channels is None or b.channels is None:
            continue
        hit = False
        for c in CHANNELS:
            counts[c][1] += 1
            if i in noisy and control[i].channels is not None and control[i].channels[c] != a.channels[c]:
                # the defense is nondeterministic here: the hook is credited only if the run
                # without it is deterministic (then the randomness is the hook's own)
                b2 = without_again[i].channels
                if b2 is not None and b2[c] == b.channels[c]:
                    counts[c][0] += 1
                    hit = True
                else:
                    counts[c][2] += 1
                continue
            if a.channels[c] != b.channels[c]:
                counts[c][0] += 1
                hit = True
        if hit:
            changed_inputs.append(i)
        elif any(counts[c][2] for c in CHANNELS) and i in noisy:
            undecided += 1
    items = probe.inputs
    valid = [i for i, o in enumerate(base) if o.channels is not None and without[i].channels is not None]
    neutral = [i for i in valid if items[i].side == "neutral"]
    withs = [i for i in valid if items[i].side == "with"]
    neutral_hit = [i for i in changed_inputs if items[i].side == "neutral"]
    with_hit = [i for i in changed_inputs if items[i].side == "with"]
    triggers = sorted({items[i].pattern for i in with_hit if items[i].pattern})
    releases = sum(1 for o in base if o.released.get(hook))
    errors = _fmt_errors(base) + [f"without {hook}: {e}" for e in _fmt_errors(without) if e not in _fmt_errors(base)]
    owner = owner_of(cls, hook)
    common = dict(hook=hook, overridden=True, defined_in=owner.__qualname__ if owner else None,
                  location=hook_location(cls, hook),
                  channels={c: ChannelEffect(changed=v[0], inputs=v[1], nondeterministic=v[2]) for c, v in counts.items()},
                  neutral_changed=len(neutral_hit), neutral_inputs=len(neutral), triggers=triggers,
                  with_changed=len(with_hit), with_inputs=len(withs), releases=releases, errors=errors,
                  sensitivity=sensitivity(probe, cls, hook, notes))
    where_ch = ", ".join(f"{c} {v[0]}/{v[1]}" for c, v in counts.items() if v[0])
    if not valid:
        return HookEffect(verdict="undetermined", reason="the defense raised on every probe input: " +
                          "; ".join(errors[:2]), **common)
    if releases:
        return HookEffect(verdict="inactive", reason=f"its output carried retrieved passages verbatim on {releases} "
                          f"of {len(base)} inputs: it releases the context", **common)
    if any("rebinds" in n for n in notes) and not changed_inputs:
        return HookEffect(verdict="undetermined", reason="; ".join(notes), **common)
    if hook in ("score_retrieval", "rewrite_context") and changed_inputs and all(
            base[i].channels["retrieval_set"] == without[i].channels["retrieval_set"]  # type: ignore[index]
            and base[i].channels["context_set"] == without[i].channels["context_set"]  # type: ignore[index]
            for i in changed_inputs):
        # the same passages reach the prompt, in another order: nothing is withheld or altered
        return HookEffect(verdict="inactive", reason=f"only re-orders the same passages ({where_ch}): the prompt "
                          "carries the same passages as with the identity hook", **common)
    if neutral_hit:
        return HookEffect(verdict="active", reason=f"changed {where_ch} (on {len(neutral_hit)} of {len(neutral)} "
                          f"neutral inputs and {len(with_hit)} of {len(withs)} with personal data)", **common)
    if with_hit:
        return HookEffect(verdict="pattern-limited", reason=f"changed {where_ch} only on inputs with "
                          f"{', '.join(triggers)} ({len(with_hit)} of {len(withs)}), on 0 of {len(neutral)} "
                          "neutral inputs", **common)
    if undecided:
        return HookEffect(verdict="undetermined", reason=f"no channel changed where the run was deterministic; "
                          f"{undecided} inputs were nondeterministic without the hook too", **common)
    return HookEffect(verdict="inactive", reason=f"no channel changed on any of {len(valid)} inputs (retrieval, "
                      "prompt and answer equal to the identity hook's)", **common)


def sensitivity(probe: Probe, cls: type[Defense], hook: HookName, notes: Sequence[str] = ()) -> list[str]:
    """What the probe could not exercise for ``hook`` of ``cls``."""
    out = list(notes)
    kinds = sorted({i.pattern for i in probe.inputs if i.pattern})
    out.append(f"pattern types probed: {', '.join(kinds)}; a hook keyed to data of another kind reads inactive")
    if hook == "score_retrieval":
        out.append(f"candidate pools of at most {probe.candidate_k} from corpora of {probe.passages_per_corpus} "
                   f"passages, top-k {probe.top_k}: an effect that needs larger pools is not exercised")
    if hook in ("generate", "postprocess") and probe.kind == "stack":
        out.append("verbatim release is seen only where the model's answer quotes a passage")
    if hook == "generate" and probe.kind == "scripted":
        out.append("scripted generator: replies follow the prompt and the effective decoding settings only; "
                   "token-level decoding (log-probabilities, voting, logit processing) is not exercised - "
                   "use --probe stack")
    per = max((sum(1 for i in probe.inputs if i.corpus == c) for c in probe.indexes), default=0)
    out.append(f"a fresh instance per corpus, at most {per} single-turn queries each, no principal, questions "
               "without a trailing '?': state built over more queries (budgets, rate limits, history) and "
               "query shapes outside these are not exercised")
    return out
