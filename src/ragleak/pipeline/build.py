"""The one place a target is built: the built-in pipeline over an index, or a user's endpoint.

``build_target(stack, source, defense)`` is what a grid cell, ``ragleak attack``, ``ask`` and
``serve``, the tour and ``verify`` call. ``source`` is either

* a built ``PassageIndex``: the audited ``RAGPipeline`` (the stack's ``target`` generator, its
  config's top-k, candidate-k and system prompt) around ``defense``'s hooks, as a
  ``PipelineTarget``; or
* an endpoint's ``TargetConfig`` (``http`` or ``callable``): the user's service, which runs its own
  defense, so ``defense`` may only be one with no hooks (``external``, ``none``); no stack is needed.

This package sits below ``stack``: the stack is named here for type checking only, and used for
what it hands out (the target generator and its config).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from ragleak.config import TargetConfig
from ragleak.context import RunContext
from ragleak.defenses.base import Defense
from ragleak.errors import ConfigError
from ragleak.pipeline.rag import AuditPolicy, RAGPipeline
from ragleak.pipeline.target import CallableTarget, HttpTarget, PipelineTarget, StopRule, Target, load_callable
from ragleak.rag.index import PassageIndex
from ragleak.records import HOOK_NAMES

if TYPE_CHECKING:
    from ragleak.stack import Stack

#: What a target is built from: an index for the built-in pipeline, or an endpoint's config.
Source = Union[PassageIndex, TargetConfig]


def build_target(stack: "Stack | None", source: Source, defense: Defense | None = None, *,
                 ctx: RunContext | None = None, audit: AuditPolicy | None = None,
                 principal: str | None = None) -> Target:
    """The target an attack queries. For an index: ``ctx`` is the run context the defense is
    prepared with (None: the stack's, with fresh DP noise, as ``Stack.context()`` gives it: a
    target built without one serves users), ``audit`` says which queries get
    the reference generation of a defense that replaces ``generate`` (all by default) and
    ``principal`` is the client id told to the defense on every query (None: none)."""
    if isinstance(source, TargetConfig):
        return _endpoint(source, defense)
    if stack is None:
        raise ConfigError("the built-in pipeline needs a stack: its target generator and settings")
    c = stack.config
    pipeline = RAGPipeline(index=source, generator=stack.generator("target"), defense=defense, top_k=c.top_k,
                           candidate_k=c.candidate_k, system_prompt=c.system_prompt,
                           ctx=ctx or RunContext(seed=c.seed, stack=stack, noise="fresh"), audit=audit)
    return PipelineTarget(pipeline, principal)


def _endpoint(config: TargetConfig, defense: Defense | None) -> HttpTarget | CallableTarget:
    """The adapter for an endpoint config, with its stop rule."""
    if defense is not None and any(defense.overrides(hook) for hook in HOOK_NAMES):
        # no hook of ours runs inside the user's service: a record must not claim one did
        raise ConfigError(f"defense {defense.name!r} has hooks, but an endpoint runs its own defense; "
                          "use external (or none)")
    rule = StopRule(config.stop_after_failures, config.error_window, config.max_error_rate)
    if config.kind == "http":
        return HttpTarget(config.url, request_template=config.request_template,  # type: ignore[arg-type]
                          answer_path=config.answer_path, retrieved_ids_path=config.retrieved_ids_path,
                          timeout_s=config.timeout_s, retries=config.retries, backoff_s=config.backoff_s,
                          headers=dict(config.headers), shape=config.shape, api_model=config.api_model,
                          system_prompt=config.system_prompt, stop_rule=rule)
    if config.kind == "callable":
        return CallableTarget(load_callable(config.callable), exposes_retrieved_ids=config.exposes_retrieved_ids,  # type: ignore[arg-type]
                              stop_rule=rule, name=f"callable:{config.callable}")
    raise ConfigError("the built-in stack's target is built from its index, not from a target config")
