"""Abstract values of the hook dataflow (``astflow``): facts, scopes, frames and findings.

A value is a frozenset of ``Fact``s, the alternatives of what it may be at run time: the hook's
input (``FLOW``) or a copy of it, one of its elements (``ELEM``) or fields (``FIELD``), a
constant, new content (``NEW``), a pattern rewrite (``PAT``), a random draw (``RAND``),
something the analysis cannot see (``UNK``), retrieved text (``CTXS``), and so on.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterable

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
#: Expressions evaluated per hook before the analysis gives up (undetermined): loops run twice
#: and calls are followed, so a large body can cost more than it is worth.
MAX_STEPS = 60_000


class _Budget(Exception):
    """The analysis of one hook ran past ``MAX_STEPS``."""
_RNG_FACTORIES = frozenset({"rng", "default_rng", "Random", "RandomState", "Generator"})


@dataclass(frozen=True)
class Fact:
    """One alternative of an abstract value."""

    kind: str  # FLOW ELEM FIELD PARTS PART CONST NEW PAT UNK OTHER RAND RNG MATCH REGEX SELF INST GEN PLAIN CTXS TUPLE ENUM ZIP MODULE LOGGER FUNC
    flow: str = ""  # which input a FLOW/ELEM/FIELD/PARTS/PART derives from: in, msgs, ctx, genp
    name: str = ""  # FIELD path, PARTS separator, PAT/REGEX pattern, INST/FUNC/MODULE key
    note: str = ""
    where: str = ""
    value: Any = None  # CONST value (hashable) or INST/FUNC/MODULE payload
    items: tuple = ()  # TUPLE/ENUM/ZIP members (each a frozenset of Facts)
    alias: bool = False  # FLOW: the very object the hook received


Val = frozenset

CONST_NONE = Val({Fact("CONST", value=None)})


def one(kind: str, **kw) -> Val:
    return Val({Fact(kind, **kw)})


def union(*vals: Iterable[Fact]) -> Val:
    out: set[Fact] = set()
    for v in vals:
        out |= set(v)
    return Val(out)


def kinds(v: Val) -> set[str]:
    return {f.kind for f in v}


def const_of(v: Val) -> tuple[bool, Any]:
    """(True, value) when ``v`` is exactly one constant."""
    if len(v) == 1:
        (f,) = v
        if f.kind == "CONST":
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

    def child(self, **kw) -> "Frame":
        data = {"module": self.module, "owner": self.owner, "env": dict(self.env), "scope": self.scope,
                "guard": self.guard, "full_loop": self.full_loop, "empty": self.empty}
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
    """The worst class among the alternatives a hook may pass on: changed > ctx > pattern > unknown > same."""
    order = {"changed": 4, "ctx": 5, "pattern": 2, "unknown": 1, "same": 0}
    worst, worst_fact = "same", None
    for f in value:
        if f.kind == "FLOW" and f.flow == "in":
            cls = "same"
        elif f.kind == "CONST" and f.value is None and hook in STR_HOOKS:
            cls = "changed"
        elif hook in STR_HOOKS and (f.kind == "CTXS" or f.kind == "FIELD" and f.flow == "ctx"):
            cls = "ctx"
        elif f.kind == "PAT":
            cls = "pattern"
        elif f.kind == "UNK":
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
