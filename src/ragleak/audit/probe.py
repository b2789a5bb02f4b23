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
the LLM: no model download, seconds per defense) and ``stack`` (the packaged LLM as well). The
stack probe generates an answer only where it can decide something (``probe_answers``): a run
whose ``generate`` and ``postprocess`` are the identity gets stand-ins keyed by (model, settings,
prompt), equal keys being equal answers under greedy decoding; an answer is generated where a
hook reads it, or where two runs sent the same prompt under different settings. Where the prompt
already changed, the answer is not generated (the prompt channel decided that input).
"""

from __future__ import annotations

import copy
import dataclasses
import random
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np

from ragleak.audit.probe_answers import AnswerMemo, DeferringGenerator, stand_in
from ragleak.audit.probe_corpus import PATTERN_TYPES, QUERY_FORMS, ProbeInput, corpora, probe_inputs
from ragleak.audit.probe_generator import ProbeGenerator
from ragleak.audit.runtime import hook_location, overrides, owner_of
from ragleak.audit.source import AuditError
from ragleak.audit.stateful import Harness, revisit
from ragleak.defenses.base import Defense
from ragleak.pipeline.channel_keys import (context_set_key, norm_text, retrieval_key, retrieval_set_key,
                                            text_key)
from ragleak.rag.generator import DecodingParams
from ragleak.records import HOOK_NAMES, HookName, Record

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
    # answer channel of the stack probe: inputs where the prompt had already changed, so the
    # answers were not generated (greedy decoding: the answer is a function of prompt and settings)
    not_generated: int = 0


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


class ProbeCost(Record):
    """What a probe cost so far: the model's generations and what the stack probe left ungenerated."""

    probe: ProbeKind
    inputs: int
    generations: int  # the model ran (generation-cache misses), the determinism check included
    cache_hits: int  # served by the generation cache
    answers_generated: int  # distinct (model, settings, prompt) whose answer the probe generated
    stand_ins: int  # pipeline answers deferred (a stand-in while the run went)
    never_generated: int  # distinct deferred keys no comparison needed
    determinism: str | None = None


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
    answers: AnswerMemo | None = None  # the stack probe's deferred answers (None: every answer generated)
    staged: bool = False  # measure on the neutral inputs first (``measure``)
    _cache_dir: Any = field(default=None, repr=False)

    @property
    def passages_per_corpus(self) -> int:
        return max(len(ix.passages) for ix in self.indexes.values())

    def close(self) -> None:
        """Remove the temporary folder of the stack probe's generation cache (when it made one)."""
        if self._cache_dir is not None:
            self._cache_dir.cleanup()
            self._cache_dir = None

    def cost(self) -> ProbeCost:
        usage, memo = self.stack.usage(), self.answers
        return ProbeCost(probe=self.kind, inputs=len(self.inputs),
                         generations=usage.model_calls + (memo.rechecked if memo else 0),
                         cache_hits=usage.cache_hits, answers_generated=len(memo.texts) if memo else usage.model_calls,
                         stand_ins=memo.stand_ins if memo else 0,
                         never_generated=len(set(memo.requests) - set(memo.texts)) if memo else 0,
                         determinism=memo.determinism if memo else None)


def select_inputs(types: Sequence[str] | None = None) -> list[ProbeInput]:
    """The probe inputs, every pair (``types`` None) or only the pairs of ``types`` (of
    ``PATTERN_TYPES``) with every input outside a pair: a quicker probe that sees only those
    types, so a hook keyed to another reads inactive."""
    items = probe_inputs()
    if types is None:
        return items
    unknown = sorted(set(types) - set(PATTERN_TYPES))
    if unknown or not types:
        raise AuditError(f"unknown probe type(s) {', '.join(unknown) or '(none named)'}; known: "
                         f"{', '.join(PATTERN_TYPES)}")
    return [i for i in items if i.pair is None or i.pair.split(":")[1] in set(types)]


def build_probe(kind: ProbeKind = "scripted", inputs: list[ProbeInput] | None = None,
                cache_dir: str | None = None, defer_answers: bool | None = None) -> Probe:
    """The probe of ``kind``; ``stack`` keeps its generations in a cache under ``cache_dir`` (a
    temporary folder when None), so a prompt the probe already sent costs nothing, defers
    answers that cannot decide anything and measures in two stages (``defer_answers``, default:
    for ``stack`` only; see ``measure``)."""
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
    defer = kind == "stack" if defer_answers is None else defer_answers
    answers = AnswerMemo(stack.generator("target")) if defer else None
    return Probe(kind, stack, indexes, inputs, answers=answers, staged=defer, _cache_dir=holder)


@dataclass
class _Observation:
    channels: dict[str, str] | None  # channel -> digest; None when the query raised
    released: dict[str, int]  # hook -> passages its output released verbatim
    error: str | None = None
    answer_key: str | None = None  # a deferred answer's key (``probe_answers``): the answer was not generated


def _seed_globals() -> None:
    # a hook drawing from the global generators gets the same draws in both runs: only the hook differs
    random.seed(PROBE_SEED)
    np.random.seed(PROBE_SEED)


def _identity(hook: HookName) -> Callable:
    return getattr(Defense, hook)


def _reads_no_answer(defense: Defense) -> bool:
    """Whether no hook of ``defense`` reads the answer right now (``generate`` and ``postprocess``
    resolve to the identity on the instance): asked at each generation, so a hook the defense
    rebinds while running is seen."""
    return all(getattr(getattr(defense, h, None), "__func__", None) is _identity(h) for h in ("generate", "postprocess"))


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
                try:
                    setattr(defense, hook, types.MethodType(_identity(hook), defense))
                except AttributeError:  # a property or another data descriptor: the identity goes on a subclass
                    defense.__class__ = type(cls.__name__, (type(defense),), {hook: _identity(hook), "__slots__": ()})
            target = build_target(probe.stack, probe.indexes[corpus], defense, ctx=probe.stack.context(PROBE_SEED))
            pipeline = target.pipeline
            captured: list = []
            real_retrieve = pipeline.retrieve

            def retrieve(*args, _real=real_retrieve, _into=captured, **kwargs):
                result = _real(*args, **kwargs)
                _into.append(result)
                return result

            pipeline.retrieve = retrieve  # records the Retrieval the pipeline computes (the selected top-k)
            wrapper = None
            if probe.answers is not None:
                wrapper = DeferringGenerator(probe.answers, lambda d=defense: _reads_no_answer(d))
                pipeline.generator = wrapper
            for i in positions:
                captured.clear()
                if wrapper is not None:
                    wrapper.keys.clear()
                    wrapper.deferred.clear()
                try:
                    response = pipeline.answer(probe.inputs[i].query)
                except Exception as exc:  # the defense's failure on this input is recorded, not fatal
                    out[i] = _Observation(None, {}, f"{type(exc).__name__}: {exc}")
                    continue
                selected = captured[-1].selected if captured else []
                context = captured[-1].context if captured else []
                trace = response.trace
                # the answer is a stand-in (identity postprocess: the answer is the draft as generated)
                key = wrapper.keys[-1] if wrapper is not None and wrapper.keys and wrapper.deferred[-1] else None
                key = key if key is not None and norm_text(response.answer) == norm_text(stand_in(key)) else None
                out[i] = _Observation(
                    {"retrieval": retrieval_key(selected), "context": text_key(trace.prompt),
                     "output": text_key(response.answer),
                     # order-insensitive: the same passages in another order
                     "retrieval_set": retrieval_set_key(selected), "context_set": context_set_key(context)},
                    {r.hook: len(r.released) for r in trace.hooks}, answer_key=key)
            for hook in without:
                if getattr(getattr(defense, hook, None), "__func__", None) is not _identity(hook):
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
    the other hooks are measured with it replaced in both runs.

    The stack probe (answers deferred) measures in two stages: first on the neutral inputs only; a
    hook active there is active (a change on a neutral input is what active means) and is not run
    again; the others - inactive, pattern-limited, undetermined, releasing context - are measured
    on every input, the pairs with personal data included. A defense whose answer hooks change
    every prompt so pays for the neutral inputs' answers, not for every pair's."""
    stage = _first_stage(probe)
    if stage is None:
        return _measure(probe, cls)
    first = _measure(stage, cls, first_stage=True)
    settled = {h.hook: _settled(h, stage, len(probe.inputs)) for h in first.hooks
               if h.overridden and h.verdict == "active" and not h.releases}
    if settled and all(h.hook in settled for h in first.hooks if h.overridden):
        return first.model_copy(update={"hooks": [settled.get(h.hook, h) for h in first.hooks]})
    return _measure(probe, cls, settled)


def _first_stage(probe: Probe) -> Probe | None:
    """The stack probe on its neutral inputs (None: one stage - the scripted probe, or no pairs)."""
    if not probe.staged:
        return None
    neutral = [i for i in probe.inputs if i.side == "neutral"]
    return dataclasses.replace(probe, inputs=neutral, staged=False) if 0 < len(neutral) < len(probe.inputs) else None


def _settled(effect: HookEffect, stage: Probe, inputs: int) -> HookEffect:
    return effect.model_copy(update={"sensitivity": [*effect.sensitivity, (
        f"stack probe, first stage: active on the {len(stage.inputs)} neutral inputs, so the other "
        f"{inputs - len(stage.inputs)} inputs (the sides with personal data) were not run for it: its triggers are "
        "not listed and its release of context was checked on the neutral inputs only")]})


def _measure(probe: Probe, cls: type[Defense], settled: dict[str, HookEffect] | None = None,
             first_stage: bool = False) -> DefenseEffect:
    """``measure`` on every input of ``probe``; ``settled``: hooks measured already (kept as they
    are, not run again); ``first_stage``: a first pass, whose hooks not active are measured again
    on every input (the long run of ``audit.stateful`` is left to that pass)."""
    settled = settled or {}
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
    if probe.answers is not None and hooks:
        probe.answers.check_determinism()  # once per probe: what comparing answers by key rests on
    effects = []
    for hook in HOOK_NAMES:
        if hook not in hooks:
            effects.append(HookEffect(hook=hook, verdict="not-overridden", overridden=False,
                                      reason="Python resolves it to the base identity"))
        elif hook in settled and hook not in fixed:
            effects.append(settled[hook])
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
            # state across calls and the clock: the passes above use fresh instances and few calls
            measured = _hook_effect(probe, cls, hook, base, control, fixed)
            effects.append(measured if first_stage else revisit(
                probe, cls, hook, measured, Harness(_instantiate, _seed_globals, PROBE_SEED)))
    return DefenseEffect(defense=name, cls=cls.__qualname__, probe=probe.kind, declared_hooks=declared,
                         hooks=effects, inputs=len(probe.inputs), errors=_fmt_errors(base))


def _hook_effect(probe: Probe, cls: type[Defense], hook: HookName, base: list[_Observation],
                 control: list[_Observation], fixed: frozenset[str] = frozenset()) -> HookEffect:
    without, notes = _run(probe, cls, fixed | {hook})
    if fixed:
        notes = [*notes, f"measured with {', '.join(sorted(fixed))} as the identity in both runs (the probe cannot run it)"]
    noisy = [i for i, (a, b) in enumerate(zip(base, control)) if _observations_differ(probe, a, b)]
    without_again = _run(probe, cls, fixed | {hook})[0] if noisy else without
    counts = {c: [0, 0, 0, 0] for c in CHANNELS}  # changed, inputs, nondeterministic, not generated
    changed_inputs: list[int] = []
    undecided = 0
    # a decoding that is not deterministic makes two generations differ by themselves: only a
    # postprocess change (on one memoised draft) is still the hook's own
    unsound_answers = probe.answers is not None and probe.answers.deterministic is False and hook != "postprocess"
    for i, (a, b) in enumerate(zip(base, without)):
        if a.channels is None or b.channels is None:
            continue
        hit = False
        for c in CHANNELS:
            if c == "output" and (_differs(probe, a, b, c) is None or (
                    i in noisy and control[i].channels is not None and _differs(probe, control[i], a, c) is None)):
                counts[c][3] += 1  # the prompts differ: the prompt channel decides, the answers are not generated
                continue
            counts[c][1] += 1
            if i in noisy and control[i].channels is not None and _differs(probe, control[i], a, c) is not False:
                # the defense is nondeterministic here: the hook is credited only if the run
                # without it is deterministic (then the randomness is the hook's own)
                b2 = without_again[i]
                if b2.channels is not None and _differs(probe, b2, b, c) is False and not (c == "output" and unsound_answers):
                    counts[c][0] += 1
                    hit = True
                else:
                    counts[c][2] += 1
                continue
            if _differs(probe, a, b, c):
                if c == "output" and unsound_answers:
                    counts[c][2] += 1  # the stack's decoding was not deterministic: an answer change is not credited
                    continue
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
                  channels={c: ChannelEffect(changed=v[0], inputs=v[1], nondeterministic=v[2], not_generated=v[3])
                            for c, v in counts.items()},
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
            # a change with the same prompt (a decoding setting the hook set) is no re-ordering
            and base[i].channels["context"] != without[i].channels["context"]  # type: ignore[index]
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


def _differs(probe: Probe, a: _Observation, b: _Observation, channel: str) -> bool | None:
    """Whether ``channel`` differs between two observations (both ran). On the answer channel
    with a stand-in on either side (``probe_answers``): equal keys are equal answers; where the
    prompts differ, None (not generated: the prompt channel decides); where only the settings
    differ, the answers are generated now and compared."""
    assert a.channels is not None and b.channels is not None
    if channel != "output" or (a.answer_key is None and b.answer_key is None):
        return a.channels[channel] != b.channels[channel]
    if a.answer_key == b.answer_key:
        return False
    if a.channels["context"] != b.channels["context"]:
        return None
    assert probe.answers is not None
    a_out, b_out = (text_key(probe.answers.resolve(o.answer_key)) if o.answer_key else o.channels["output"]  # type: ignore[index]
                    for o in (a, b))
    return a_out != b_out


def _observations_differ(probe: Probe, a: _Observation, b: _Observation) -> bool:
    """Whether two runs of one input differ anywhere (an answer not generated counts as differing)."""
    if a.channels is None or b.channels is None:
        return a.channels is not b.channels
    return any(_differs(probe, a, b, c) is not False for c in a.channels)


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
    if probe.answers is not None:
        out.append("answers generated only where they can decide: where a hook reads them, or where the same "
                   "prompt went out under other settings; where the prompts differ the prompt channel decides "
                   f"(greedy decoding; {probe.answers.determinism or 'decoding determinism not checked yet'})")
    if hook == "generate" and probe.kind == "scripted":
        out.append("scripted generator: replies follow the prompt and the effective decoding settings only; "
                   "token-level decoding (log-probabilities, voting, logit processing) is not exercised - "
                   "use --probe stack")
    per = max((sum(1 for i in probe.inputs if i.corpus == c) for c in probe.indexes), default=0)
    out.append(f"a fresh instance per corpus, at most {per} single-turn queries each, no principal; a hook "
               "measured inactive or pattern-limited whose state changes between calls is run longer on one "
               "instance (audit.stateful); query forms probed: " + ", ".join(QUERY_FORMS))
    return out
