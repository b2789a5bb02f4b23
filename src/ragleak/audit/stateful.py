"""State across calls: a hook that acts only after many calls, or only at some time of day.

The probe's passes give every corpus a fresh instance and ask each probe input once, so a budget,
a rate limit, a rolling window, a refusal of repeated questions or a warm-up period acts after more
calls than they make, and a gate on the clock acts at hours they may not run in. ``revisit``
takes a hook those passes measured inactive or pattern-limited and:

1. runs every probe input through the real pipeline once more (a fresh instance per corpus)
   recording the hook's inputs, the digests of the state the defense can keep (``state``: its
   instance, its classes, its modules) after the first and after the last call of each corpus, and
   the wall-clock reads of the defense's own code;
2. where the state changed, calls the hook on one fresh instance per corpus many times over that
   corpus's recorded inputs (``LONG_CALLS`` on the corpus with most inputs, ``OTHER_CALLS`` on each
   other; no new retrieval or generation for ``score_retrieval``, ``rewrite_context`` and
   ``postprocess``; ``generate`` under the scripted probe only), and compares each call's effect on
   its channel with the identity's on the same input: the top-k the pipeline would select, the
   passages the prompt would carry, the answer.

Verdicts (issue 38's definitions: a verdict says which users a hook acts on, not when): a hook
that changes a channel on a neutral input after N calls acts on every user once the deployment has
served N: **active**, with "acts after N calls on one instance" in its reason; on inputs with data
only: **pattern-limited**. A stateful hook that never acts in the long run keeps its verdict and its
``sensitivity`` says "stateful: N calls exercised, no effect". A hook that reads the clock and
changed nothing is **undetermined**: the probe cannot move the clock, so inactive is not shown.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ragleak.audit.state import changed, clock_reads, state_digests
from ragleak.pipeline.channel_keys import norm_text

if TYPE_CHECKING:
    from ragleak.audit.probe import HookEffect, Probe
    from ragleak.records import HookName

LONG_CALLS = 400  # a budget, quota or window up to this many calls on one instance is reached
OTHER_CALLS = 12  # each other corpus: repeats of its one or two inputs (a repeat refusal, a short warm-up)
LONG_SECONDS = 30.0  # wall-clock cap per hook: a slow hook is exercised fewer times (stated)
REVISITED = frozenset({"inactive", "pattern-limited"})


@dataclass(frozen=True)
class Harness:
    """How the probe builds what it runs (``probe`` hands its own in: this module does not import it)."""

    instantiate: Callable[[type], Any]  # the defense class -> an instance (its failure an AuditError)
    reseed: Callable[[], None]  # the global generators back to the probe's seed
    seed: int


@dataclass
class _Recording:
    inputs: dict[str, list[tuple[int, tuple]]] = field(default_factory=dict)  # corpus -> (input position, args)
    state: set[str] = field(default_factory=set)  # names whose state changed between calls
    clock: set[str] = field(default_factory=set)
    calls: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class _LongRun:
    calls: int = 0
    neutral: int = 0
    neutral_changed: int = 0
    with_calls: int = 0
    with_changed: int = 0
    reordered: int = 0
    first: int | str | None = None  # on the instance where a change came first: that call's number
    triggers: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    capped: bool = False


def _args_copy(hook: str, args: tuple) -> tuple:
    # the generator a generate hook is handed is the probe's, not an input to copy
    return copy.deepcopy(args[:2]) if hook == "generate" else copy.deepcopy(args)


def _record(probe: Probe, cls: type, hook: HookName, h: Harness) -> _Recording:
    from ragleak.defenses.base import Defense
    from ragleak.pipeline import build_target

    rec = _Recording()
    generator = probe.stack.generator("target")
    inner = getattr(generator, "inner", generator)
    saved = copy.deepcopy(getattr(inner, "params", None))
    by_corpus: dict[str, list[int]] = {}
    for i, item in enumerate(probe.inputs):
        by_corpus.setdefault(item.corpus, []).append(i)
    try:
        for corpus, positions in by_corpus.items():
            h.reseed()
            defense = h.instantiate(cls)
            real = getattr(defense, hook)
            current = [positions[0]]
            seen: list[dict[str, str]] = []
            recorded = rec.inputs.setdefault(corpus, [])

            def recorder(*args, _real=real, _into=recorded, _cur=current, _seen=seen, _d=defense, **kwargs):
                _into.append((_cur[0], _args_copy(hook, args)))
                with clock_reads(rec.clock):
                    out = _real(*args, **kwargs)
                if not _seen:
                    _seen.append(state_digests(_d, Defense))  # after the first call: lazy set-up is not state
                return out

            try:
                setattr(defense, hook, recorder)
            except AttributeError:  # a property or another data descriptor: the recorder goes on a subclass
                try:
                    defense.__class__ = type(cls.__name__, (type(defense),), {
                        hook: lambda self, *a, _rec=recorder, **k: _rec(*a, **k), "__slots__": ()})
                except TypeError as exc:
                    rec.errors.append(f"cannot wrap {hook}: {type(exc).__name__}: {exc}")
                    return rec
            target = build_target(probe.stack, probe.indexes[corpus], defense, ctx=probe.stack.context(h.seed))
            for i in positions:
                current[0] = i
                try:
                    # the retrieval-side hooks need no answer: nothing is generated for them
                    retrieval_side = hook in ("score_retrieval", "rewrite_context")
                    (target.pipeline.retrieve if retrieval_side else target.pipeline.answer)(probe.inputs[i].query)
                except Exception:  # noqa: BLE001 - the probe's passes already report the defense's errors
                    continue
            rec.calls += len(recorded)
            if seen and len(recorded) > 1:
                rec.state.update(changed(seen[0], state_digests(defense, Defense)))
    finally:
        if saved is not None and hasattr(inner, "params"):
            inner.params = saved
    return rec


def _texts(items: Any, key: Callable[[Any], str]) -> list[str]:
    return [norm_text(key(x)) for x in items]


def _compare(a: list[str], b: list[str]) -> str | None:
    if a == b:
        return None
    return "reordered" if sorted(a) == sorted(b) else "changed"


def _effect(probe: Probe, hook: str, args: tuple, out: Any, reference: Callable[[], str]) -> str | None:
    """``changed``, ``reordered`` or None: the call's effect on the hook's channel against the identity."""
    if hook in ("postprocess", "generate"):
        return "changed" if norm_text(str(out)) != norm_text(reference()) else None
    if hook == "rewrite_context":
        return _compare(_texts(args[1], lambda p: p.text), _texts(list(out), lambda p: p.text))

    def top(xs: list) -> list[str]:
        # the pipeline's selection: a stable sort by score, the first top-k
        return _texts(sorted(xs, key=lambda s: -s.score)[: probe.top_k], lambda s: s.passage.text)

    return _compare(top(list(args[1])), top(list(out)))


def _fresh_instances(probe: Probe, cls: type, rec: _Recording, h: Harness) -> Iterator[tuple[str, list, Any]]:
    """Per corpus with recorded inputs: (corpus, its inputs, a fresh prepared instance of ``cls``,
    reseeded so each corpus's run starts from the same noise)."""
    for corpus, items in rec.inputs.items():
        if not items:
            continue
        h.reseed()
        defense = h.instantiate(cls)
        defense.prepare(probe.stack.context(h.seed))
        yield corpus, items, defense


def _long_run(probe: Probe, cls: type, hook: HookName, rec: _Recording, h: Harness) -> _LongRun:
    run = _LongRun()
    main = max(rec.inputs, key=lambda c: len(rec.inputs[c]))
    generator = probe.stack.generator("target")
    inner = getattr(generator, "inner", generator)
    saved = copy.deepcopy(getattr(inner, "params", None))
    references: dict[int, str] = {}
    deadline = time.perf_counter() + LONG_SECONDS
    try:
        for corpus, items, defense in _fresh_instances(probe, cls, rec, h):
            for k in range(LONG_CALLS if corpus == main else OTHER_CALLS):
                if time.perf_counter() > deadline:
                    run.capped = True
                    return run
                position, args = items[k % len(items)]
                item = probe.inputs[position]
                call = copy.deepcopy(args)
                defense.begin_query(probe.indexes[corpus], (), None)
                try:
                    fn = getattr(defense, hook)
                    out = fn(*call, generator) if hook == "generate" else fn(*call)
                    if hook in ("score_retrieval", "rewrite_context"):
                        out = list(out)

                    def reference(_p=position, _a=args) -> str:
                        if hook == "postprocess":
                            return _a[1]
                        if _p not in references:
                            if saved is not None:
                                inner.params = copy.deepcopy(saved)
                            references[_p] = generator.generate(list(_a[0])).text
                        return references[_p]

                    effect = _effect(probe, hook, args, out, reference)
                except Exception as exc:  # noqa: BLE001 - a refusal by exception withholds the answer: an effect
                    msg = f"{type(exc).__name__}: {exc}"[:160]
                    run.errors[msg] = run.errors.get(msg, 0) + 1
                    effect = "changed"
                finally:
                    if saved is not None and hasattr(inner, "params"):
                        inner.params = copy.deepcopy(saved)
                run.calls += 1
                neutral = item.side == "neutral"
                run.neutral += neutral
                run.with_calls += not neutral
                if effect == "reordered":
                    run.reordered += 1
                elif effect == "changed":
                    if neutral:
                        run.neutral_changed += 1
                    else:
                        run.with_changed += 1
                        run.triggers.add(item.pattern or "?")
                    if run.first is None:
                        run.first = k + 1
    finally:
        if saved is not None and hasattr(inner, "params"):
            inner.params = saved
    return run


def _counter_slot(defense: Any, name: str) -> tuple[Any, str] | None:
    """(the object holding the state ``name`` of ``state_digests``, the attribute), for a top-level one."""
    import sys

    kind, _, rest = name.partition(" ")
    if name.startswith("instance."):
        return defense, name.removeprefix("instance.")
    owner_name, _, attr = rest.rpartition(".")
    if kind == "class":
        owner = next((k for k in type(defense).__mro__ if k.__qualname__ == owner_name), None)
    elif kind == "module":
        owner = sys.modules.get(owner_name)
    else:
        return None
    return (owner, attr) if owner is not None and attr else None


def _fast_forward(probe: Probe, cls: type, hook: HookName, rec: _Recording,
                  h: Harness) -> tuple[_LongRun, list[str], int]:
    """Integer counters that grew over the calls (a budget, a quota, a warm-up) advanced by 10^3 to
    10^6 at once, and each corpus's inputs asked again on a fresh instance: a budget beyond what the
    long run reaches by calling. Returns the calls (an exception is not counted as an effect here: an
    advanced counter may break what a real count would not), the counters advanced, and the
    smallest advance that acted (0: none)."""
    run = _LongRun()
    advanced: set[str] = set()
    acted = 0
    for corpus, items, defense in _fresh_instances(probe, cls, rec, h):
        slots = {n: _counter_slot(defense, n) for n in sorted(rec.state)}
        slots = {n: s for n, s in slots.items() if s is not None}

        def ask_all(_d=defense, _items=items, _corpus=corpus) -> list[tuple[Any, str | None]]:
            out = []
            for position, args in _items:
                _d.begin_query(probe.indexes[_corpus], (), None)
                try:
                    res = getattr(_d, hook)(*copy.deepcopy(args))
                    res = list(res) if hook in ("score_retrieval", "rewrite_context") else res
                    out.append((probe.inputs[position], _effect(probe, hook, args, res, lambda _a=args: _a[1])))
                except Exception as exc:  # noqa: BLE001 - see the doc: not an effect here
                    msg = f"{type(exc).__name__}: {exc}"[:160]
                    run.errors[msg] = run.errors.get(msg, 0) + 1
            return out

        start = {n: getattr(*s, None) for n, s in slots.items()}
        ask_all()
        grown = [n for n, s in slots.items()
                 if _is_count(start[n]) and _is_count(getattr(*s, None)) and getattr(*s, None) > start[n]]
        saved = {n: getattr(*slots[n], None) for n in grown}
        advanced.update(grown)
        try:
            for jump in (10**3, 10**4, 10**5, 10**6) if grown else ():
                for n in grown:
                    setattr(*slots[n], saved[n] + jump)
                hit = False
                for item, effect in ask_all():
                    run.calls += 1
                    neutral = item.side == "neutral"
                    run.neutral += neutral
                    run.with_calls += not neutral
                    if effect == "changed":
                        hit = True
                        run.neutral_changed += neutral
                        run.with_changed += not neutral
                        if not neutral:
                            run.triggers.add(item.pattern or "?")
                if hit:
                    acted = min(acted or jump, jump)
                    break
        finally:
            for n in grown:  # class and module state go back to what they were
                setattr(*slots[n], saved[n])
    return run, sorted(advanced), acted


def _is_count(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _state_text(rec: _Recording) -> str:
    names = sorted(rec.state)
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def revisit(probe: Probe, cls: type, hook: HookName, effect: HookEffect, h: Harness) -> HookEffect:
    """``effect`` as the passes measured it, revised by state across calls and by the clock (see the
    module's doc); hooks measured active, undetermined or releasing context are returned as they are."""
    if effect.verdict not in REVISITED or effect.releases or not effect.overridden \
            or effect.reason.startswith("raises NotImplementedError"):
        return effect
    rec = _record(probe, cls, hook, h)
    sens = list(effect.sensitivity)
    if rec.errors:
        return effect.model_copy(update={"sensitivity": [*sens, "state across calls not checked: " + rec.errors[0]]})
    clock = sorted(rec.clock)
    if not rec.state:
        note = f"state: {rec.calls} calls, a fresh instance per corpus: no instance, class or module state changed"
        if clock and effect.verdict == "inactive":
            return effect.model_copy(update={
                "verdict": "undetermined", "sensitivity": [*sens, note, f"reads the wall clock ({clock[0]})"],
                "reason": f"changed no channel, but reads the wall clock ({', '.join(clock[:2])}): a gate on the "
                          "time the probe cannot move, so inactive is not shown"})
        return effect.model_copy(update={"sensitivity": [*sens, note] + ([f"reads the wall clock ({clock[0]})"]
                                                                         if clock else [])})
    if hook == "generate" and probe.kind != "scripted":
        return effect.model_copy(update={"sensitivity": [
            *sens, f"stateful ({_state_text(rec)}): the long run of generate is made under --probe scripted only"]})
    run = _long_run(probe, cls, hook, rec, h)
    cap = f", stopped at the {LONG_SECONDS:.0f} s cap" if run.capped else ""
    stated = (f"stateful ({_state_text(rec)}): {run.calls} calls exercised on one instance per corpus{cap}, "
              + (f"first effect at call {run.first}" if run.first else "no effect"))
    how = f"after {run.first} calls on one instance"
    errors = [f"{n}x {e} (long run)" for e, n in run.errors.items()]
    if not run.neutral_changed and hook != "generate":
        ahead, counters, jump = _fast_forward(probe, cls, hook, rec, h)
        if counters:
            stated += (f"; counters {', '.join(counters[:3])} advanced by 10^3 to 10^6 at once: "
                       + (f"acts once advanced by {jump}" if jump else "no effect"))
        if jump and (ahead.neutral_changed or not run.with_changed):
            how = (f"once its counters ({', '.join(counters[:3])}) are advanced by {jump} calls (the {run.calls} "
                   "calls of the long run did not reach it)")
            run = ahead
    update: dict[str, Any] = {"sensitivity": [*sens, stated], "errors": [*effect.errors, *errors]}
    counts = (f"{run.neutral_changed} of {run.neutral} neutral calls and {run.with_changed} of {run.with_calls} "
              f"with data changed the {_channel(hook)}")
    if run.neutral_changed:
        update.update(verdict="active", triggers=sorted(set(effect.triggers) | run.triggers),
                      reason=f"acts {how}: {counts} (state that changed: {_state_text(rec)}); the probe's fresh "
                             f"instances showed nothing ({effect.reason})")
    elif run.with_changed:
        triggers = sorted(set(effect.triggers) | run.triggers)
        update.update(verdict="pattern-limited", triggers=triggers,
                      reason=f"acts on inputs with {', '.join(triggers)} {how}: {counts} (state that changed: "
                             f"{_state_text(rec)})" if effect.verdict == "inactive"
                      else f"{effect.reason}; {how}: {counts}")
    elif clock and effect.verdict == "inactive":
        update.update(verdict="undetermined",
                      reason=f"changed no channel in {run.calls} calls, but reads the wall clock "
                             f"({', '.join(clock[:2])}): a gate on the time the probe cannot move")
    return effect.model_copy(update=update)


def _channel(hook: str) -> str:
    return {"score_retrieval": "selected top-k", "rewrite_context": "prompt's passages"}.get(hook, "answer")
