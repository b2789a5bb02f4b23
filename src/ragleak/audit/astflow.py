"""Static dataflow of one hook: can what it passes on differ in content from what it received?

A small abstract interpreter over the hook's AST. Every expression evaluates to a set of
``Fact``s (the alternatives of what the value may be); statements run flow-sensitively, branches
are joined, loops run to a fixpoint. Calls are followed into the class, its bases (``self.m()``,
``super().m()``, properties), module functions, instances created in ``__init__`` and functions
imported from modules whose source can be found; anything else is an unknown call. This module
turns what the interpreter found into a verdict; the abstract values are in ``absval``, the
interpreter in ``astinterp`` (statements, expressions) and ``astcalls`` (calls).

What counts:

* **same content.** The input itself and its copies (``list``, slices ``[:]``, ``copy``,
  ``model_copy`` without a change, records rebuilt from their own fields), content-preserving
  re-orderings of a list (``sorted``, ``reversed``, ``[::-1]``, ``sort``, ``shuffle``), identity
  formatting (``f"{x}"``, ``"{}".format(x)``, ``"%s" % x``, ``x + ""``, ``"".join(x)``,
  whitespace-only ``strip``/``split``+``join``), logging, calls whose results are discarded, and
  branches whose condition folds to a constant (``if False``, module and class constants).
  For ``generate`` the input is the plain ``generator.generate(messages)`` with the generator's
  own settings.
* **a change.** New content (literals, other arguments, state), element or score changes, drops,
  truncations, random draws, in-place mutation of the input (``pop``, item stores, ``del``,
  ``object.__setattr__``), changed messages or decoding parameters, or a change to the
  generator's settings.
* **pattern-limited.** A change made only by a pattern rewrite (regex ``sub``, ``replace`` of a
  literal or of a regex match) or only behind a pattern test (regex ``search``/``finditer``/...,
  ``"literal" in x``, membership in a fixed list, ``startswith``): reported with the pattern.
* **releases context.** For ``generate``/``postprocess``: the output carries the retrieved
  passages' text verbatim; such a hook is never a privacy transform.
* **undetermined.** The input goes through code the analysis cannot see (an unknown function or
  method); the reason is kept and the dynamic trace decides. Nothing defaults to "active".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ragleak.audit.absval import (
    Kind,
    CONST_NONE,
    HOOK_PARAMS,
    MAX_STEPS,
    _body,
    _Budget,
    classify,
    Fact,
    Frame,
    one,
    Scope,
    snippet,
    strip_docstring,
    union,
    Val,
)
from ragleak.audit.astinterp import Interpreter
from ragleak.audit.source import Module

__all__ = ["BodyVerdict", "Fact", "Kind", "Scope", "analyse_function", "classify_body", "strip_docstring"]


@dataclass(frozen=True)
class BodyVerdict:
    """The static verdict of one hook body."""

    status: str  # "inactive" | "pattern-limited" | "active" | "undetermined"
    form: str | None
    evidence: str
    line: int
    where: str = ""
    pattern: str | None = None
    releases_context: bool = False


def _trivial_form(func: ast.FunctionDef) -> tuple[str, int] | None:
    body = func.body
    rest = strip_docstring(body)
    if not rest:
        return "docstring-only", body[0].lineno
    if all(isinstance(s, ast.Pass) for s in rest):
        return "pass", rest[0].lineno
    if all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis for s in rest):
        return "ellipsis", rest[0].lineno
    if len(rest) == 1 and isinstance(rest[0], ast.Raise) and rest[0].exc is not None:
        exc = rest[0].exc.func if isinstance(rest[0].exc, ast.Call) else rest[0].exc
        if isinstance(exc, ast.Name) and exc.id in {"NotImplementedError", "NotImplemented"}:
            return "not-implemented", rest[0].lineno
    return None


def _line(where: str, default: int) -> int:
    try:
        return int(where.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return default


def analyse_function(module: Module, func: ast.FunctionDef, hook: str, scope: Scope | None = None,
                     owner: int = -1) -> BodyVerdict:
    """The static verdict of ``func`` as the implementation of ``hook``."""
    trivial = _trivial_form(func)
    if trivial is not None:
        form, line = trivial
        return BodyVerdict("inactive", form, f"the body is only {form.replace('-', ' ')}", line,
                           f"{module.path}:{line}")
    interp = Interpreter(hook, scope)
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    env: dict[str, Val] = {}
    if params:
        env[params[0]] = one(Kind.SELF)
    for name, flow in zip(params[1:], HOOK_PARAMS[hook]):
        if flow == "in":
            env[name] = one(Kind.FLOW, flow="in", alias=True, note=f"the argument {name}")
        elif flow in {"msgs", "ctx"}:
            env[name] = one(Kind.FLOW, flow=flow, alias=True, note=f"the argument {name}")
        elif flow == "gen":
            env[name] = one(Kind.GEN, note=f"the argument {name}")
        else:
            env[name] = one(Kind.OTHER, note=f"the argument {name}")
    frame = Frame(module, owner, env, scope)
    interp.stack.append(id(func))
    try:
        ends = interp.run_block(_body(func), frame)
    except _Budget:
        return BodyVerdict("undetermined", None, f"the body is too large to analyse (over {MAX_STEPS} expression "
                                                 "evaluations with the calls it makes)", func.lineno,
                           f"{module.path}:{func.lineno}")
    except RecursionError:
        return BodyVerdict("undetermined", None, "the body nests too deeply to analyse", func.lineno,
                           f"{module.path}:{func.lineno}")
    returns = list(frame.returns)
    if not ends:
        returns.append(CONST_NONE)
    value = union(*returns)
    return _verdict(interp, value, hook, func, module)


def _verdict(interp: Interpreter, value: Val, hook: str, func: ast.FunctionDef, module: Module) -> BodyVerdict:
    cls, fact = classify(value, hook)
    findings = interp.findings
    mutation = next((f for f in findings if f.cls == "changed"), None)
    first_return = next((n for n in ast.walk(func) if isinstance(n, ast.Return)), None)
    ret_where = f"{module.path}:{first_return.lineno if first_return else func.lineno}"
    ret_text = f"`{snippet(first_return)}`" if first_return else "falls off the end"
    if cls == "ctx":
        return BodyVerdict("inactive", "releases-context",
                           f"releases retrieved passages verbatim: {fact.note or 'passage text in the output'}",
                           _line(fact.where, func.lineno), fact.where or ret_where, releases_context=True)
    if cls == "changed" or mutation is not None:
        if cls == "changed" and fact:
            where = fact.where
            lead = {Kind.RAND: "passes on a value computed from a random draw",
                    Kind.OTHER: "passes on a value not derived from its input",
                    Kind.CONST: "passes on a constant"}.get(fact.kind, "passes on changed content")
            note = f"{lead}: {fact.note}" if fact.note else lead
        else:
            where, note = mutation.where, f"changes its input in place: {mutation.note}"
        return BodyVerdict("active", None, note, _line(where, func.lineno), where or ret_where)
    pattern = next((f for f in findings if f.cls == "pattern"), None)
    if cls == "pattern" or pattern is not None:
        name = fact.name if cls == "pattern" and fact else pattern.pattern
        note = fact.note if cls == "pattern" and fact else pattern.note
        where = (fact.where if cls == "pattern" and fact else pattern.where) or ret_where
        return BodyVerdict("pattern-limited", None, f"changes only where a pattern matches: {note}",
                           _line(where, func.lineno), where, pattern=name)
    unknown = next((f for f in findings if f.cls == "unknown"), None)
    if cls == "unknown" or unknown is not None:
        note, where = (fact.note, fact.where) if cls == "unknown" and fact else (unknown.note, unknown.where)
        return BodyVerdict("undetermined", None, f"cannot decide statically: {note}", _line(where, func.lineno),
                           where or ret_where)
    notes = [f.note for f in findings if f.cls in {"order", "dead"}]
    form = "plain-generation" if hook == "generate" else "returns-argument"
    if any(f.cls == "order" for f in findings):
        form = "order-only"
    elif any(f.cls == "dead" for f in findings):
        form = "dead-branch"
    what = "the plain generation" if hook == "generate" else "its input"
    evidence = f"every path passes on {what} with the same content: {ret_text}"
    if notes:
        evidence += "; " + "; ".join(dict.fromkeys(notes))
    return BodyVerdict("inactive", form, evidence, first_return.lineno if first_return else func.lineno, ret_where)


def classify_body(func: ast.FunctionDef, hook: str, patterns: frozenset[str] = frozenset(),
                  methods: dict | None = None, module: Module | None = None) -> BodyVerdict:
    """Classify a free-standing hook body (no class around it): for tests and quick checks."""
    if module is None:
        module = Module("<ast>", [], ast.Module(body=[func], type_ignores=[]), frozenset(patterns), {}, {})
    return analyse_function(module, func, hook)
