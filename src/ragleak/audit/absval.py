"""Abstract values of the hook dataflow (``astflow``): facts, scopes, frames and findings.

A value is a frozenset of ``Fact``s, the alternatives of what it may be at run time: the hook's
input (``Kind.FLOW``) or a copy of it, one of its elements (``ELEM``) or fields (``FIELD``), a
constant, new content (``NEW``), a pattern rewrite (``PAT``), a random draw (``RAND``),
something the analysis cannot see (``UNK``), retrieved text (``CTXS``), and so on.

The lattice: values are ordered by inclusion and joined by ``union`` (more alternatives, less
known); an environment (variable -> value) is joined pointwise by ``join_envs``, a name bound on
one side only keeping that side's value. A loop is run to a fixpoint of its head state
(``loop_head``, ``loop_exit``), at most ``MAX_LOOP_ROUNDS`` rounds.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Iterable, Mapping

from ragleak.audit.source import Module

STR_HOOKS = frozenset({"generate", "postprocess"})
#: (flow name of each positional parameter after ``self``) per hook.
HOOK_PARAMS = {
    "score_retrieval": ("query", "in"),
    "rewrite_context": ("query", "in"),
    "generate": ("msgs", "ctx", "gen"),
    "postprocess": ("query", "in", "ctx"),
}
RECORDS = {"Scored": ("passage", "score"), "Passage": ("id", "doc_id", "text"), "ChatMessage": ("role", "content")}
NON_CHANNEL_FIELDS = frozenset({"metadata"})
CASE_METHODS = frozenset({"upper", "lower", "casefold", "title", "capitalize", "swapcase"})
PURE_BUILTINS = frozenset({"len", "isinstance", "id", "type", "bool", "hash", "repr", "print", "getattr", "hasattr",
                           "range", "callable", "issubclass", "iter", "next", "dict", "set", "frozenset", "super"})
MAX_DEPTH = 6
#: Expressions evaluated per hook before the analysis gives up (undetermined): loops run to a
#: fixpoint and calls are followed, so a large body can cost more than it is worth.
MAX_STEPS = 60_000
#: Passes over a loop body: at least ``MIN_LOOP_ROUNDS``, then until the state at the loop head
#: stops growing; a value still growing after ``MAX_LOOP_ROUNDS`` passes (nested one level deeper
#: per pass, say) may also be something the analysis cannot see (``widen``).
MIN_LOOP_ROUNDS = 2
MAX_LOOP_ROUNDS = 8


class _Budget(Exception):
    """The analysis of one hook ran past ``MAX_STEPS``."""
_RNG_FACTORIES = frozenset({"rng", "default_rng", "Random", "RandomState", "Generator"})


class Kind(StrEnum):
    """What one alternative of an abstract value is. A ``StrEnum``: a member equals its name as a
    string, so facts and findings read the same in notes and test output."""

    # the hook's input and what is taken from it
    FLOW = "FLOW"  # an input itself or a copy with the same content (``flow`` says which)
    ELEM = "ELEM"  # one element of an input list
    FIELD = "FIELD"  # a field of an input record (``name`` is the path)
    COLUMN = "COLUMN"  # one field of every element, in order (``[p.text for p in passages]``)
    PARTS = "PARTS"  # an input text split on a separator (``name``)
    PART = "PART"  # one piece of ``PARTS``
    PLAIN = "PLAIN"  # the result of the plain ``generator.generate(messages)``
    CTXS = "CTXS"  # text made from the retrieved passages
    # what the hook passes on instead
    CONST = "CONST"  # a constant (``value``)
    NEW = "NEW"  # new content computed by the hook
    PAT = "PAT"  # a change made only where a pattern (``name``) matches
    RAND = "RAND"  # a value drawn from a random generator
    UNK = "UNK"  # the result of code the analysis cannot see
    OTHER = "OTHER"  # something not derived from the input (state, an index, a builtin's result)
    # values the interpreter follows but a hook never passes on as content
    MATCH = "MATCH"  # the result of a pattern test (regex search, ``"x" in s``, ``startswith``)
    REGEX = "REGEX"  # a compiled pattern
    REMOD = "REMOD"  # a function of the ``re`` module
    RNG = "RNG"  # a random generator
    SELF = "SELF"  # the defense instance
    GEN = "GEN"  # the generator handed to ``generate`` (``name``: a bound method of it)
    INST = "INST"  # an instance of a class whose source is read (``value``: module, class)
    CLASS = "CLASS"  # a class (a record type, or one whose source is read)
    FUNC = "FUNC"  # a function or bound method whose source is read
    LAMBDA = "LAMBDA"  # a lambda with its closure
    MODULE = "MODULE"  # an imported module (``name``)
    LOGGER = "LOGGER"  # a logger: calls on it change nothing
    TUPLE = "TUPLE"  # a fixed-length sequence (``items``)
    ENUM = "ENUM"  # ``enumerate(x)`` (``items``: x)
    ZIP = "ZIP"  # ``zip(...)`` (``items``: its arguments)


@dataclass(frozen=True)
class Fact:
    """One alternative of an abstract value."""

    kind: Kind
    flow: str = ""  # which input a FLOW/ELEM/FIELD/PARTS/PART derives from: in, msgs, ctx, genp
    name: str = ""  # FIELD path, PARTS separator, PAT/REGEX pattern, INST/FUNC/MODULE key
    note: str = ""
    where: str = ""
    value: Any = None  # CONST value (hashable) or INST/FUNC/MODULE payload
    items: tuple = ()  # TUPLE/ENUM/ZIP members (each a frozenset of Facts)
    alias: bool = False  # FLOW: the very object the hook received

    def __post_init__(self) -> None:
        if type(self.kind) is not Kind:  # a misspelt kind fails here, not as a silent miss
            object.__setattr__(self, "kind", Kind(self.kind))


Val = frozenset

CONST_NONE = Val({Fact(Kind.CONST, value=None)})


def one(kind: Kind, **kw) -> Val:
    return Val({Fact(kind, **kw)})


def union(*vals: Iterable[Fact]) -> Val:
    """The join of abstract values: every alternative of each (the empty value is the bottom)."""
    out: set[Fact] = set()
    for v in vals:
        out |= set(v)
    return Val(out)


Env = dict[str, Val]


def join_envs(*envs: Mapping[str, Val]) -> Env:
    """The join of abstract states where control flow merges (if/else, match cases, try/except,
    a loop's head and exit): pointwise ``union``. A name bound on some of the paths only keeps
    those paths' alternatives: reading it after a path that did not bind it fails at run time,
    so that path adds nothing to what a successful read gives."""
    out: Env = {}
    for env in envs:
        for k, v in env.items():
            out[k] = union(out.get(k, Val()), v)
    return out


@dataclass(frozen=True)
class LoopStates:
    """What the passes over a loop body reached: the states at the end of a pass (falling off the
    body or at a ``continue``), the states at a ``break``, the passes run, and the names whose
    value still grew in the last pass (empty when the head state settled)."""

    ends: tuple[Env, ...]
    breaks: tuple[Env, ...]
    rounds: int
    unsettled: frozenset[str] = frozenset()


def loop_head(pre: Mapping[str, Val], ends: Iterable[Mapping[str, Val]]) -> Env:
    """The state at the head of a loop: before the first pass, or after any pass that goes round again."""
    return join_envs(pre, *ends)


def loop_fixpoint(one_pass: Callable[[Env], tuple[list[Env], list[Env]]], pre: Mapping[str, Val],
                  min_rounds: int = MIN_LOOP_ROUNDS, max_rounds: int = MAX_LOOP_ROUNDS) -> LoopStates:
    """Run ``one_pass`` (the body from a head state: the states it ends in, and at its breaks)
    from ``pre`` until the head state stops growing (a fixpoint of ``loop_head``), at least
    ``min_rounds`` and at most ``max_rounds`` passes. Values only grow from pass to pass, but a
    value may grow without end (``acc = [acc, p]`` nests one level deeper each time): the names
    still growing after ``max_rounds`` are reported in ``unsettled``."""
    head, ends, breaks = dict(pre), [], []
    for rounds in range(1, max_rounds + 1):
        pass_ends, pass_breaks = one_pass(dict(head))
        ends += pass_ends
        breaks += pass_breaks
        nxt = loop_head(pre, ends)
        if nxt == head and rounds >= min_rounds:
            return LoopStates(tuple(ends), tuple(breaks), rounds)
        head, last = nxt, head
    unsettled = frozenset(k for k in head if head[k] != last.get(k))
    return LoopStates(tuple(ends), tuple(breaks), max_rounds, unsettled)


def widen(env: Mapping[str, Val], names: Iterable[str], note: str, where: str) -> Env:
    """``env`` with an unknown alternative added to each of ``names`` (values a loop did not settle)."""
    out = dict(env)
    for k in names:
        if k in out:
            out[k] = union(out[k], one(Kind.UNK, note=f"`{k}` {note}", where=where))
    return out


def loop_exit(pre: Mapping[str, Val], ends: Iterable[Mapping[str, Val]], full: bool) -> Env:
    """The state when a loop ends normally (before its ``else``; breaks are joined after that):
    the end of any pass, or the state before the loop (no pass at all). A loop that visits every
    element of a hook input (``full``) leaves out the no-pass state: for an empty input the
    element-by-element rebuild (``out = []; for p in passages: out.append(p)``) is the input
    itself, so ``[]`` there is no change. Without any pass that ends normally, only the no-pass
    state is left."""
    ends = list(ends)
    return join_envs(*ends) if full and ends else join_envs(pre, *ends)


def kinds(v: Val) -> set[Kind]:
    return {f.kind for f in v}


def const_of(v: Val) -> tuple[bool, Any]:
    """(True, value) when ``v`` is exactly one constant."""
    if len(v) == 1:
        (f,) = v
        if f.kind == Kind.CONST:
            return True, f.value
    return False, None


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return ("<dict>",) + tuple(sorted((repr(k), repr(v)) for k, v in value.items()))
    return value


def snippet(node: ast.AST, limit: int = 90) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------- scope


@dataclass
class Scope:
    """The audited class in method-resolution order: (module, class node) pairs, base ``Defense`` last."""

    mro: list[tuple[Module, ast.ClassDef]]

    def find(self, name: str, start: int = 0) -> tuple[int, ast.FunctionDef] | None:
        for i in range(max(start, 0), len(self.mro)):
            for node in self.mro[i][1].body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return i, node
        return None

    def assigned_on_self(self, name: str) -> list[tuple[int, str, ast.expr]]:
        """Every ``self.name = value`` in any method of the class and its bases: (index, method, value)."""
        out = []
        for i, (_, cls) in enumerate(self.mro):
            for meth in cls.body:
                if not isinstance(meth, ast.FunctionDef):
                    continue
                for node in ast.walk(meth):
                    targets = node.targets if isinstance(node, ast.Assign) else \
                        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                    for t in targets:
                        if isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name) \
                                and t.value.id == "self":
                            out.append((i, meth.name, getattr(node, "value", None)))
        return out

    def class_attr(self, name: str) -> tuple[int, ast.expr] | None:
        for i, (_, cls) in enumerate(self.mro):
            for node in cls.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    return i, node.value
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                        and node.value is not None:
                    return i, node.value
        return None


@dataclass
class Frame:
    module: Module
    owner: int  # index in the scope of the class defining the running function; -1: a module function
    env: dict[str, Val]
    scope: Scope | None
    guard: str | None = None  # None | "pattern:<text>" | "cond:<text>"
    full_loop: bool = False
    returns: list[Val] = field(default_factory=list)
    empty: frozenset[str] = frozenset()  # inputs this branch has established to be empty
    breaks: list[Env] = field(default_factory=list)  # states at a `break` of the innermost loop
    continues: list[Env] = field(default_factory=list)  # states at a `continue` of the innermost loop

    def child(self, **kw) -> "Frame":
        """A frame for a branch: a copy of the state; breaks and continues go to the same loop."""
        data = {"module": self.module, "owner": self.owner, "env": dict(self.env), "scope": self.scope,
                "guard": self.guard, "full_loop": self.full_loop, "empty": self.empty,
                "breaks": self.breaks, "continues": self.continues}
        data.update(kw)
        return Frame(**data)

    def at(self, node: ast.AST) -> str:
        return f"{self.module.path}:{getattr(node, 'lineno', 0)}"


@dataclass(frozen=True)
class Finding:
    cls: str  # changed | pattern | unknown | order | dead | generator
    note: str
    where: str
    pattern: str = ""


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _body(fdef: ast.FunctionDef) -> list[ast.stmt]:
    return strip_docstring(fdef.body)


def _fold(op: ast.operator, a, b):
    import operator

    table = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
             ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
    if isinstance(op, ast.Pow) and isinstance(b, (int, float)) and abs(b) > 64:
        raise ValueError("too large to fold")
    return table[type(op)](a, b)


def _compare(op: ast.cmpop, a, b) -> bool:
    import operator

    table = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
             ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
             ast.In: lambda x, y: x in y, ast.NotIn: lambda x, y: x not in y}
    return bool(table[type(op)](a, b))


def classify(value: Val, hook: str) -> tuple[str, Fact | None]:
    """The worst class among the alternatives a hook may pass on: ctx > changed > pattern > unknown
    > same (the empty value is "same"), with the first fact of that class (none for "same")."""
    order = {"changed": 4, "ctx": 5, "pattern": 2, "unknown": 1, "same": 0}
    worst, worst_fact = "same", None
    for f in value:
        if f.kind == Kind.FLOW and f.flow == "in":
            cls = "same"
        elif f.kind == Kind.CONST and f.value is None and hook in STR_HOOKS:
            cls = "changed"
        elif hook in STR_HOOKS and (f.kind == Kind.CTXS or f.kind == Kind.FIELD and f.flow == "ctx"):
            cls = "ctx"
        elif f.kind == Kind.PAT:
            cls = "pattern"
        elif f.kind == Kind.UNK:
            cls = "unknown"
        else:
            cls = "changed"
        if order[cls] > order[worst] or worst_fact is None and cls == worst and cls != "same":
            worst, worst_fact = cls, f
    return worst, worst_fact


def strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body
