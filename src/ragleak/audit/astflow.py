"""Static dataflow of one hook: can what it passes on differ in content from what it received?

A small abstract interpreter over the hook's AST. Every expression evaluates to a set of
``Fact``s (the alternatives of what the value may be); statements run flow-sensitively, branches
are joined, loops run twice. Calls are followed into the class, its bases (``self.m()``,
``super().m()``, properties), module functions, instances created in ``__init__`` and functions
imported from modules whose source can be found; anything else is an unknown call.

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
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from ragleak.audit import markers
from ragleak.audit.source import Module, module_source

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


# ----------------------------------------------------------------------------------- interpreter


class Interpreter:
    """Evaluates one hook (and whatever it calls) over abstract values."""

    def __init__(self, hook: str, scope: Scope | None):
        self.hook = hook
        self.scope = scope
        self.findings: list[Finding] = []
        self.stack: list[int] = []
        self.gen_changed: str | None = None
        self.memo: dict[tuple, tuple[Val, list[Finding], str | None]] = {}
        self.steps = 0

    # ---- guards

    def guarded(self, v: Val, frame: Frame) -> Val:
        if not frame.guard or not frame.guard.startswith("pattern:"):
            return v
        pattern = frame.guard.removeprefix("pattern:")
        out = set()
        for f in v:
            if f.kind in {"NEW", "RAND", "OTHER", "CONST"}:
                out.add(Fact("PAT", name=pattern, note=f"{f.note or 'a change'} only where `{pattern}` matches",
                             where=f.where))
            else:
                out.add(f)
        return Val(out)

    def finding(self, cls: str, note: str, where: str, frame: Frame, pattern: str = "") -> None:
        if cls == "changed" and frame.guard and frame.guard.startswith("pattern:"):
            cls, pattern = "pattern", frame.guard.removeprefix("pattern:")
        self.findings.append(Finding(cls, note, where, pattern))

    # ---- statements

    def run_block(self, stmts: list[ast.stmt], frame: Frame) -> bool:
        """Run ``stmts``; True when every path through them ends (return, raise, continue, break)."""
        saved = frame.guard
        try:
            for stmt in stmts:
                if self.run_stmt(stmt, frame):
                    return True
            return False
        finally:
            frame.guard = saved

    def run_stmt(self, stmt: ast.stmt, frame: Frame) -> bool:
        if isinstance(stmt, ast.Return):
            value = self.eval(stmt.value, frame) if stmt.value is not None else CONST_NONE
            if frame.empty:  # an empty literal where the input is known to be empty is the input
                value = Val(Fact("FLOW", flow=next(iter(frame.empty))) if f.kind == "CONST" and f.value in ((), "")
                            else f for f in value)
            frame.returns.append(self.guarded(value, frame))
            return True
        if isinstance(stmt, (ast.Raise, ast.Continue, ast.Break)):
            if isinstance(stmt, ast.Raise) and stmt.exc is not None:
                self.eval(stmt.exc, frame)
            return True
        if isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, frame)
            for target in stmt.targets:
                self.assign(target, value, frame, stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame, stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.aug_assign(stmt, frame)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    self.mutate(target.value, "content", f"`{snippet(stmt)}` deletes elements", frame, stmt)
        elif isinstance(stmt, ast.If):
            return self.run_if(stmt, frame)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.run_loop(stmt, frame)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                value = self.eval(item.context_expr, frame)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value, frame, stmt)
            return self.run_block(stmt.body, frame)
        elif isinstance(stmt, ast.Try):
            return self.run_try(stmt, frame)
        elif isinstance(stmt, ast.Match):
            self.eval(stmt.subject, frame)
            envs, ends = [], True
            for case in stmt.cases:
                sub = frame.child(guard=f"pattern:match {snippet(case.pattern, 40)}")
                sub.returns = frame.returns
                ends = self.run_block(case.body, sub) and ends
                envs.append(sub.env)
            frame.env = self.join(frame.env, *envs)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            frame.env[stmt.name] = one("OTHER", note=f"local {stmt.name}")
        return False

    def run_if(self, stmt: ast.If, frame: Frame) -> bool:
        truth, pattern = self.test(stmt.test, frame)
        if truth is not None:
            taken, skipped = (stmt.body, stmt.orelse) if truth else (stmt.orelse, stmt.body)
            if skipped:
                self.findings.append(Finding("dead", f"`if {snippet(stmt.test, 50)}` is always {truth}: "
                                                     f"the branch at line {skipped[0].lineno} never runs",
                                             frame.at(stmt)))
            return self.run_block(taken, frame)
        guard = self.branch_guard(frame, stmt.test, pattern)
        body, orelse = frame.child(guard=guard), frame.child(guard=guard)
        empty = self.emptiness(stmt.test, frame)
        if empty:
            body.empty = frame.empty | {empty}
        body.returns = orelse.returns = frame.returns
        ends_body = self.run_block(stmt.body, body)
        ends_else = self.run_block(stmt.orelse, orelse)
        live = [f.env for f, ends in ((body, ends_body), (orelse, ends_else)) if not ends]
        if live:
            frame.env = self.join(*live)
        if ends_body and ends_else:
            return True
        if ends_body or ends_else:  # what follows runs only when the other branch was taken
            frame.guard = guard
        return False

    def emptiness(self, test: ast.expr, frame: Frame) -> str | None:
        """The input flow that ``test`` being true proves empty: ``not x``, ``len(x) == 0``, ``x == []``."""
        subject = None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            subject = test.operand
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" and \
                    len(left.args) == 1 and isinstance(right, ast.Constant) and right.value == 0:
                subject = left.args[0]
            elif isinstance(right, (ast.List, ast.Tuple)) and not right.elts or \
                    isinstance(right, ast.Constant) and right.value == "":
                subject = left
        if not isinstance(subject, ast.Name):
            return None
        flows = {f.flow for f in frame.env.get(subject.id, ()) if f.kind == "FLOW"}
        return "in" if flows == {"in"} else None

    def branch_guard(self, frame: Frame, test: ast.expr, pattern: str | None) -> str:
        if frame.guard and frame.guard.startswith("pattern:"):
            return frame.guard
        return f"pattern:{pattern}" if pattern else f"cond:{snippet(test, 50)}"

    def run_loop(self, stmt, frame: Frame) -> None:
        pre = dict(frame.env)
        if isinstance(stmt, ast.While):
            truth, pattern = self.test(stmt.test, frame)
            if truth is False:
                self.run_block(stmt.orelse, frame)
                return
            mentioned = {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
            full = any(f.kind == "FLOW" and f.flow == "in" for n in mentioned for f in frame.env.get(n, ()))
            guard = frame.guard if not pattern else self.branch_guard(frame, stmt.test, pattern)
            elements = None
        else:
            it = self.eval(stmt.iter, frame)
            full = self.is_full(it)
            elements = self.elements(it)
            pattern = next((f.name for f in it if f.kind == "MATCH"), None)
            guard = self.branch_guard(frame, stmt.iter, pattern) if pattern else frame.guard
        body = frame.child(guard=guard, full_loop=full or frame.full_loop)
        body.returns = frame.returns
        envs = []
        for _ in range(2):
            if elements is not None:
                self.assign(stmt.target, elements, body, stmt)
            self.run_block(stmt.body, body)
            envs.append(dict(body.env))
        frame.env = self.join(*envs) if full else self.join(pre, *envs)
        self.run_block(stmt.orelse, frame)

    def run_try(self, stmt: ast.Try, frame: Frame) -> bool:
        pre = dict(frame.env)
        ends = self.run_block(stmt.body, frame)
        envs = [] if ends else [frame.env]
        for handler in stmt.handlers:
            sub = frame.child(env=dict(pre))
            sub.returns = frame.returns
            if handler.name:
                sub.env[handler.name] = one("OTHER", note="exception")
            if not self.run_block(handler.body, sub):
                envs.append(sub.env)
        if not ends:
            self.run_block(stmt.orelse, frame)
        frame.env = self.join(*envs) if envs else frame.env
        if stmt.finalbody:
            self.run_block(stmt.finalbody, frame)
        return not envs

    @staticmethod
    def join(*envs: dict[str, Val]) -> dict[str, Val]:
        out: dict[str, Val] = {}
        for env in envs:
            for k, v in env.items():
                out[k] = union(out.get(k, Val()), v)
        return out

    # ---- assignment and mutation

    def assign(self, target: ast.expr, value: Val, frame: Frame, stmt: ast.AST) -> None:
        value = self.guarded(value, frame)
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            ok, c = const_of(value)
            if ok and isinstance(c, tuple) and len(c) == len(target.elts):
                value = one("TUPLE", items=tuple(one("CONST", value=x) for x in c))
            tuples = [f for f in value if f.kind == "TUPLE" and len(f.items) == len(target.elts)]
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self.assign(elt.value, one("OTHER"), frame, stmt)
                elif tuples and len(tuples) == len(value):
                    self.assign(elt, union(*(t.items[i] for t in tuples)), frame, stmt)
                else:
                    self.assign(elt, self.elements(value), frame, stmt)
        elif isinstance(target, ast.Subscript):
            self.store_item(target, value, frame, stmt)
        elif isinstance(target, ast.Attribute):
            self.store_attr(target, value, frame, stmt)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, one("OTHER"), frame, stmt)

    def store_item(self, target: ast.Subscript, value: Val, frame: Frame, stmt: ast.AST) -> None:
        base = self.eval(target.value, frame)
        is_slice = isinstance(target.slice, ast.Slice)
        if any(f.kind == "FLOW" for f in base):
            whole = is_slice and target.slice.lower is None and target.slice.upper is None and target.slice.step is None
            if whole:
                cls = self.classify_list(value)
                if cls != "same":
                    self.mutate(target.value, "content", f"`{snippet(stmt)}` replaces the list's content", frame,
                                stmt, value=value)
                elif isinstance(target.value, ast.Name):
                    frame.env[target.value.id] = Val({replace(f, alias=True) if f.kind == "FLOW" else f for f in value})
                return
            flows = {f.flow for f in base if f.kind == "FLOW"}
            if not is_slice and all(f.kind == "ELEM" and f.flow in flows for f in value):
                return  # an element of the same list stored back: a re-ordering at most
            self.mutate(target.value, "content", f"`{snippet(stmt)}` stores into the input in place", frame,
                        stmt, value=value)
        elif isinstance(target.value, ast.Name) and target.value.id in frame.env:
            self.collect(target.value.id, value, frame, stmt)

    def store_attr(self, target: ast.Attribute, value: Val, frame: Frame, stmt: ast.AST) -> None:
        if isinstance(target.value, ast.Name) and target.value.id == "self":
            frame.env[f"self.{target.attr}"] = value
            return
        base = self.eval(target.value, frame)
        if "GEN" in kinds(base):
            self.gen_changed = f"`{snippet(stmt)}` changes the generator's settings"
            self.finding("changed", self.gen_changed, frame.at(stmt), frame)
        elif kinds(base) & {"ELEM", "FIELD"} and target.attr not in NON_CHANNEL_FIELDS:
            self.finding("changed", f"`{snippet(stmt)}` changes an input record in place", frame.at(stmt), frame)

    def aug_assign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        if isinstance(stmt.target, ast.Name):
            current = frame.env.get(stmt.target.id, self.eval(stmt.target, frame))
            rhs = self.eval(stmt.value, frame)
            if any(f.kind == "FLOW" and f.alias and f.flow == "in" for f in current) and self.hook not in STR_HOOKS:
                self.mutate(stmt.target, "content", f"`{snippet(stmt)}` extends the input in place", frame, stmt)
            frame.env[stmt.target.id] = self.guarded(self.binop(stmt.op, current, rhs, stmt, frame), frame)
        else:
            self.eval(stmt.value, frame)
            if isinstance(stmt.target, ast.Subscript):
                self.mutate(stmt.target.value, "content", f"`{snippet(stmt)}` changes the input in place", frame, stmt)
            elif isinstance(stmt.target, ast.Attribute):
                self.store_attr(stmt.target, one("NEW"), frame, stmt)

    def mutate(self, node: ast.expr, how: str, note: str, frame: Frame, stmt: ast.AST, value: Val | None = None) -> None:
        """An in-place change of the value ``node`` names: the input itself, or a local copy."""
        current = self.eval(node, frame)
        flows = [f for f in current if f.kind == "FLOW"]
        if not flows:
            return
        if how == "order":
            self.findings.append(Finding("order", note, frame.at(stmt)))
            return
        if any(f.alias for f in flows):
            cls = "changed" if value is None else self.classify_list(value)
            cls = {"same": "changed", "ctx": "changed"}.get(cls, cls)
            self.finding(cls, note, frame.at(stmt), frame)
        if isinstance(node, ast.Name):
            frame.env[node.id] = self.guarded(one("NEW", note=note, where=frame.at(stmt)), frame)

    def collect(self, name: str, value: Val, frame: Frame, stmt: ast.AST) -> None:
        """An element added to a local container (``out.append(x)``, ``out[k] = x``)."""
        current = frame.env.get(name, Val())
        if not (kinds(current) <= {"CONST", "FLOW", "NEW", "PAT", "UNK", "OTHER", "RAND", "CTXS"}):
            return
        if any(f.kind == "FLOW" and f.alias for f in current):
            return
        elem_flows = {f.flow for f in value if f.kind == "ELEM"}
        if value and all(f.kind == "ELEM" for f in value) and len(elem_flows) == 1:
            flow = elem_flows.pop()
            unguarded = frame.guard is None
            if frame.full_loop and unguarded:
                added = one("FLOW", flow=flow, note="rebuilt element by element")
            elif frame.guard and frame.guard.startswith("pattern:"):
                added = one("PAT", name=frame.guard.removeprefix("pattern:"),
                            note=f"keeps elements depending on `{frame.guard.removeprefix('pattern:')}`",
                            where=frame.at(stmt))
            else:
                added = one("NEW", note=f"`{snippet(stmt)}` collects a subset or re-arrangement", where=frame.at(stmt))
        elif any(f.kind in {"FIELD", "CTXS"} and f.flow == "ctx" or f.kind == "CTXS" for f in value):
            added = one("CTXS", note="collects retrieved passage text", where=frame.at(stmt))
        else:
            added = self.derived(value, f"`{snippet(stmt)}`", frame.at(stmt))
        kept = Val(f for f in current if not (f.kind == "CONST" and f.value in ((), None)))
        frame.env[name] = self.guarded(union(kept, added), frame)

    # ---- tests

    def test(self, node: ast.expr, frame: Frame) -> tuple[bool | None, str | None]:
        """(constant truth or None, the pattern when the test is a pattern match)."""
        value = self.eval(node, frame)
        is_const, c = const_of(value)
        if is_const:
            try:
                return bool(c), None
            except Exception:  # noqa: BLE001 - a constant without a truth value
                return None, None
        pattern = next((f.name for f in value if f.kind == "MATCH"), None)
        return None, pattern

    # ---- expressions

    def eval(self, node: ast.expr | None, frame: Frame) -> Val:
        if node is None:
            return CONST_NONE
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Budget()
        method = getattr(self, f"e_{type(node).__name__}", None)
        if method is None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.eval(child, frame)
            return one("OTHER", note=snippet(node), where=frame.at(node))
        return method(node, frame)

    def e_Constant(self, node: ast.Constant, frame: Frame) -> Val:
        return one("CONST", value=node.value, where=frame.at(node), note=f"the literal {snippet(node, 40)}")

    def e_Name(self, node: ast.Name, frame: Frame) -> Val:
        name = node.id
        if name in frame.env:
            return frame.env[name]
        module = frame.module
        if name in module.patterns:
            return one("REGEX", name=name)
        if name in module.constants:
            return self.module_constant(module, name)
        if name in module.functions:
            return one("FUNC", name=name, value=(module, module.functions[name], -1))
        if name in module.classes:
            return one("CLASS", name=name, value=(module, module.classes[name]))
        if name in module.aliases:
            return one("MODULE", name=module.aliases[name])
        if name in module.imports:
            return self.imported(*module.imports[name])
        if name in markers.LOGGER_NAMES:
            return one("LOGGER")
        return one("OTHER", note=f"`{name}`", where=frame.at(node))

    def module_constant(self, module: Module, name: str) -> Val:
        key = hash(("const", module.path, name))
        if key in self.stack:
            return one("OTHER", note=name)
        self.stack.append(key)
        try:
            value = self.eval(module.constants[name], Frame(module, -1, {}, None))
        finally:
            self.stack.pop()
        if kinds(value) <= {"CONST", "REGEX", "TUPLE"}:
            return Val({replace(f, note=f"the constant {name}") if f.kind == "CONST" else f for f in value})
        return one("OTHER", note=f"the module value {name}")

    def imported(self, mod: str, attr: str) -> Val:
        if attr in RECORDS or attr == "DecodingParams":
            return one("CLASS", name=attr)
        source = module_source(mod)
        if source is not None:
            if attr in source.functions:
                return one("FUNC", name=attr, value=(source, source.functions[attr], -1))
            if attr in source.patterns:
                return one("REGEX", name=attr)
            if attr in source.constants:
                return self.module_constant(source, attr)
            if attr in source.classes:
                return one("CLASS", name=attr, value=(source, source.classes[attr]))
        return one("OTHER", name=f"{mod}.{attr}", note=f"`{attr}` imported from {mod}")

    def e_Attribute(self, node: ast.Attribute, frame: Frame) -> Val:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and "self" in frame.env:
            return self.self_attr(node.attr, frame, node)
        base = self.eval(node.value, frame)
        out: set[Fact] = set()
        for f in base:
            out |= self.attr_of(f, node, frame)
        return Val(out)

    def attr_of(self, f: Fact, node: ast.Attribute, frame: Frame) -> Val:
        attr = node.attr
        if f.kind in {"FLOW", "ELEM", "FIELD"}:
            if f.kind == "FLOW" and f.flow != "genp":
                return one("OTHER", note=f".{attr} of the input")
            if attr in NON_CHANNEL_FIELDS:
                return one("OTHER", note=f".{attr}")
            path = attr if f.kind in {"ELEM", "FLOW"} else f"{f.name}.{attr}"
            return one("FIELD", flow=f.flow, name=path)
        if f.kind == "GEN":
            if attr == "params":
                if self.gen_changed:
                    return one("NEW", note=self.gen_changed)
                return one("FLOW", flow="genp", note="the generator's own settings")
            return one("GEN", name=attr)  # a bound method of the generator
        if f.kind == "PLAIN":
            if attr == "text":
                return one("FLOW", flow="in", note="the plain generation")
            return one("OTHER", note=f"generation.{attr}")
        if f.kind == "MODULE":
            source = module_source(f.name)
            if f.name in markers.REGEX_MODULES:
                return one("REMOD", name=attr)
            if attr in ("getLogger",) or f.name in {"logging", "warnings"}:
                return one("LOGGER")
            if source is not None:
                return self.imported(f.name, attr)
            return one("OTHER", note=f"{f.name}.{attr}")
        if f.kind == "INST":
            module, cls = f.value
            for meth in cls.body:
                if isinstance(meth, ast.FunctionDef) and meth.name == attr:
                    if any(_decorator_name(d) == "property" for d in meth.decorator_list):
                        return self.call_function(module, meth, [], {}, Val({f}), -1, node, frame)
                    return one("FUNC", name=attr, value=(module, meth, -1), items=(Val({f}),))
            given = dict(f.items)
            if attr in given:
                return given[attr]
            return one("UNK", note=f"`{snippet(node, 50)}`: an attribute of a {f.name} the analysis cannot see",
                       where=frame.at(node))
        if f.kind == "MATCH":
            return one("MATCH", name=f.name)
        if f.kind in {"RAND", "RNG"}:
            return Val({f})
        if f.kind == "CTXS":
            return one("OTHER")
        return one("OTHER", note=f"`{snippet(node, 50)}`", where=frame.at(node))

    def self_attr(self, attr: str, frame: Frame, node: ast.AST) -> Val:
        key = f"self.{attr}"
        if key in frame.env:
            return frame.env[key]
        scope = self.scope
        if scope is None:
            return one("OTHER", note=f"self.{attr}")
        found = scope.find(attr)
        if found is not None:
            idx, func = found
            if any(_decorator_name(d) in {"property", "cached_property"} for d in func.decorator_list):
                return self.call_function(scope.mro[idx][0], func, [], {}, frame.env["self"], idx, node, frame)
            return one("FUNC", name=attr, value=(scope.mro[idx][0], func, idx), items=(frame.env["self"],))
        on_self = scope.assigned_on_self(attr)
        declared = scope.class_attr(attr)
        if declared is not None and not on_self:
            idx, expr = declared
            value = self.eval(expr, Frame(scope.mro[idx][0], idx, {}, scope))
            if kinds(value) <= {"CONST", "REGEX", "TUPLE"}:
                return Val({replace(f, note=f"the class constant {attr}") if f.kind == "CONST" else f for f in value})
        inits = [(i, v) for i, meth, v in on_self if meth == "__init__" and v is not None]
        if len(on_self) == 1 and len(inits) == 1:
            idx, expr = inits[0]
            value = self.eval(expr, Frame(scope.mro[idx][0], idx, {"self": one("SELF")}, scope))
            if kinds(value) <= {"INST", "REGEX", "CONST", "TUPLE"}:
                return value
        if attr == "log":
            return one("OTHER", note="self.log")
        return one("OTHER", note=f"the state self.{attr}", where=frame.at(node))

    def e_Subscript(self, node: ast.Subscript, frame: Frame) -> Val:
        base = self.eval(node.value, frame)
        index = self.eval(node.slice, frame) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(node.slice, ast.Slice):
            for part in (node.slice.lower, node.slice.upper, node.slice.step):
                if part is not None:
                    self.eval(part, frame)
        out: set[Fact] = set()
        for f in base:
            if f.kind in {"FLOW", "PARTS"}:
                s = node.slice
                if isinstance(s, ast.Slice):
                    whole = s.lower is None and s.upper is None
                    step_ok, step = (True, None) if s.step is None else const_of(self.eval(s.step, frame))
                    text = f.flow == "in" and self.hook in STR_HOOKS and f.kind == "FLOW"
                    if whole and step_ok and step in (None, 1):
                        out.add(replace(f, alias=False))
                    elif whole and step_ok and step == -1 and not text:
                        out.add(replace(f, alias=False, note="reversed"))
                        self.findings.append(Finding("order", f"`{snippet(node)}` re-orders", frame.at(node)))
                    else:
                        out.add(Fact("NEW", name=f"slice:{f.flow}", note=f"`{snippet(node)}` keeps a part of the input",
                                     where=frame.at(node)))
                else:
                    out.add(Fact("ELEM" if f.kind == "FLOW" else "PART", flow=f.flow, name=f.name))
            elif f.kind == "TUPLE" and index is not None:
                ok, i = const_of(index)
                if ok and isinstance(i, int) and -len(f.items) <= i < len(f.items):
                    out |= f.items[i]
                else:
                    out |= union(*f.items) if f.items else {Fact("OTHER")}
            elif f.kind == "CONST":
                ok, i = const_of(index) if index is not None else (False, None)
                try:
                    out.add(Fact("CONST", value=_hashable(f.value[i]))) if ok else out.add(Fact("OTHER"))
                except Exception:  # noqa: BLE001 - not subscriptable as folded
                    out.add(Fact("OTHER"))
            elif f.kind == "MATCH":
                out.add(f)
            elif f.kind in {"NEW", "PAT", "UNK", "RAND", "CTXS"}:
                out.add(f)
            elif f.kind == "FIELD":
                out.add(Fact("NEW", note=f"`{snippet(node)}` keeps a part of a field", where=frame.at(node)))
            else:
                out.add(Fact("OTHER", note=snippet(node, 50)))
        return Val(out)

    def e_List(self, node, frame: Frame) -> Val:
        return self.sequence(node.elts, frame, node)

    e_Tuple = e_List
    e_Set = e_List

    def sequence(self, elts: list[ast.expr], frame: Frame, node: ast.AST) -> Val:
        if len(elts) == 1 and isinstance(elts[0], ast.Starred):
            inner = self.eval(elts[0].value, frame)
            return Val({replace(f, alias=False) for f in inner})
        items = []
        for elt in elts:
            if isinstance(elt, ast.Starred):
                items.append(self.elements(self.eval(elt.value, frame)))
            else:
                items.append(self.eval(elt, frame))
        if all(const_of(v)[0] for v in items):
            return one("CONST", value=tuple(const_of(v)[1] for v in items), where=frame.at(node),
                       note=f"the literal `{snippet(node, 60)}`")
        return one("TUPLE", items=tuple(items), where=frame.at(node))

    def e_Dict(self, node: ast.Dict, frame: Frame) -> Val:
        values = [self.eval(v, frame) for v in node.values]
        for k in node.keys:
            if k is not None:
                self.eval(k, frame)
        if not node.keys:
            return one("CONST", value=(), note="an empty dict")
        return one("OTHER", items=tuple(values), note="a dict")

    def e_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Val:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                if v.value != "":
                    parts.append(self.e_Constant(v, frame))
            elif isinstance(v, ast.FormattedValue):
                inner = self.eval(v.value, frame)
                if v.format_spec is not None or v.conversion not in (-1, ord("s")):
                    inner = self.derived(inner, f"`{snippet(node)}` formats", frame.at(node))
                parts.append(inner)
        return self.concat(parts, node, frame)

    def concat(self, parts: list[Val], node: ast.AST, frame: Frame) -> Val:
        parts = [p for p in parts if const_of(p) != (True, "")]
        if not parts:
            return one("CONST", value="")
        if len(parts) == 1:
            return Val({replace(f, alias=False) for f in parts[0]})
        if all(const_of(p)[0] and isinstance(const_of(p)[1], str) for p in parts):
            return one("CONST", value="".join(const_of(p)[1] for p in parts))
        return self.rejoin(union(*parts), node, frame)

    def rejoin(self, value: Val, node: ast.AST, frame: Frame) -> Val:
        """Pieces put together into one text. Slices of the input joined with each other (or with
        what the analysis cannot see) may give the input back: undetermined, unless another piece
        is new content."""
        slices = {f for f in value if f.kind == "NEW" and f.name.startswith("slice:")}
        rest = value - slices
        if slices and not (kinds(rest) & {"NEW", "OTHER", "RAND", "RNG", "CTXS"} or
                           any(f.kind == "CONST" and f.value not in ("", None) for f in rest)):
            return one("UNK", note=f"`{snippet(node)}` puts pieces of the input back together (the same text "
                                   "or not, depending on the bounds)", where=frame.at(node))
        return self.derived(rest if slices and rest else value, f"`{snippet(node)}` builds a new text", frame.at(node))

    def derived(self, value: Val, note: str, where: str) -> Val:
        """A value computed from ``value``: the worst of what it is made of."""
        ks = kinds(value)
        if "RAND" in ks or "RNG" in ks:
            r = next(f for f in value if f.kind in {"RAND", "RNG"})
            return one("RAND", note=f"{note} from a random draw ({r.note or 'an rng'})", where=where)
        if any(f.kind == "CTXS" or (f.kind == "FIELD" and f.flow == "ctx" and f.name.endswith("text")) for f in value):
            return one("CTXS", note=f"{note} with retrieved passage text", where=where)
        if ks & {"NEW", "OTHER", "CONST"}:
            src = next((f for f in value if f.kind == "NEW"), None)
            return one("NEW", note=src.note if src and src.note else note, where=src.where if src and src.where else where)
        if "PAT" in ks:
            p = next(f for f in value if f.kind == "PAT")
            return Val({p})
        if "UNK" in ks:
            return Val({next(f for f in value if f.kind == "UNK")})
        return one("NEW", note=note, where=where)

    def e_BinOp(self, node: ast.BinOp, frame: Frame) -> Val:
        left, right = self.eval(node.left, frame), self.eval(node.right, frame)
        return self.binop(node.op, left, right, node, frame)

    def binop(self, op: ast.operator, left: Val, right: Val, node: ast.AST, frame: Frame) -> Val:
        lc, lv = const_of(left)
        rc, rv = const_of(right)
        if lc and rc:
            try:
                return one("CONST", value=_hashable(_fold(op, lv, rv)))
            except Exception:  # noqa: BLE001 - not foldable
                return one("OTHER")
        if isinstance(op, ast.Mod) and lc and lv == "%s":
            items = [f for f in right if f.kind == "TUPLE"]
            inner = items[0].items[0] if items and len(items[0].items) == 1 and len(right) == 1 else right
            return Val({replace(f, alias=False) for f in inner})
        if isinstance(op, ast.Add):
            if self.is_text(left) or self.is_text(right) or all(f.name.startswith("slice:") for f in left | right) or (lc and isinstance(lv, str)) or (rc and isinstance(rv, str)):
                return self.concat([left, right], node, frame)
            if rc and rv == 0 or lc and lv == 0:
                return right if lc else left
        if isinstance(op, ast.Sub) and rc and rv == 0:
            return left
        if isinstance(op, (ast.Mult, ast.Div)) and rc and rv == 1:
            return left
        if isinstance(op, ast.Mult) and lc and lv == 1:
            return right
        return self.derived(union(left, right), f"`{snippet(node)}`", frame.at(node))

    def is_text(self, v: Val) -> bool:
        return any(f.kind == "FLOW" and f.flow == "in" and self.hook in STR_HOOKS or f.kind == "CTXS"
                   or (f.kind == "FIELD" and f.name.endswith(("text", "content"))) for f in v)

    def e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Val:
        v = self.eval(node.operand, frame)
        ok, c = const_of(v)
        if ok:
            try:
                return one("CONST", value={ast.Not: lambda x: not x, ast.USub: lambda x: -x,
                                           ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)](c))
            except Exception:  # noqa: BLE001
                return one("OTHER")
        if isinstance(node.op, ast.Not):
            return Val({f for f in v if f.kind == "MATCH"}) or one("OTHER")
        return self.derived(v, f"`{snippet(node)}`", frame.at(node))

    def e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Val:
        values = []
        for operand in node.values:
            v = self.eval(operand, frame)
            ok, c = const_of(v)
            if ok:
                try:
                    truth = bool(c)
                except Exception:  # noqa: BLE001
                    truth = None
                if truth is not None and truth == isinstance(node.op, ast.Or):
                    return v if not values else union(*values, v)  # short-circuit: later operands never run
                if truth is not None:
                    continue
            values.append(v)
        if not values:
            return one("CONST", value=isinstance(node.op, ast.And))
        return union(*values)

    def e_Compare(self, node: ast.Compare, frame: Frame) -> Val:
        operands = [self.eval(node.left, frame)] + [self.eval(c, frame) for c in node.comparators]
        consts = [const_of(v) for v in operands]
        if all(ok for ok, _ in consts):
            try:
                result, values = True, [c for _, c in consts]
                for op, a, b in zip(node.ops, values, values[1:]):
                    result = result and _compare(op, a, b)
                return one("CONST", value=bool(result))
            except Exception:  # noqa: BLE001
                return one("OTHER")
        matches = [f for v in operands for f in v if f.kind == "MATCH"]
        if matches:
            return Val({matches[0]})
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if isinstance(op, (ast.In, ast.NotIn)):
                lok, lval = const_of(left)
                rok, rval = const_of(right)
                if lok and isinstance(lval, str) or all(f.kind == "CONST" and isinstance(f.value, str) for f in left):
                    return one("MATCH", name=f"the literal(s) {sorted(f.value for f in left)[:4]}")
                if rok and isinstance(rval, (tuple, frozenset)):
                    return one("MATCH", name=f"the fixed list {list(rval)[:4]}")
        return one("OTHER", note=snippet(node, 50))

    def e_IfExp(self, node: ast.IfExp, frame: Frame) -> Val:
        truth, pattern = self.test(node.test, frame)
        if truth is not None:
            return self.eval(node.body if truth else node.orelse, frame)
        sub = frame.child(guard=self.branch_guard(frame, node.test, pattern))
        return union(self.guarded(self.eval(node.body, sub), sub), self.guarded(self.eval(node.orelse, sub), sub))

    def e_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Val:
        value = self.eval(node.value, frame)
        self.assign(node.target, value, frame, node)
        return value

    def e_Lambda(self, node: ast.Lambda, frame: Frame) -> Val:
        closure = tuple(sorted(frame.env.items()))
        return one("LAMBDA", name=snippet(node, 40), value=(frame.module, node, frame.owner), items=closure)

    def call_lambda(self, f: Fact, args, kwargs, node, frame) -> Val:
        module, lam, owner = f.value
        env = dict(f.items)
        params = [a.arg for a in lam.args.posonlyargs + lam.args.args]
        for i, p in enumerate(params):
            env[p] = args[i] if i < len(args) else kwargs.get(p, one("OTHER"))
        key = (id(lam), tuple(args))
        if key in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.unknown(f"lambda {f.name}", args, kwargs, node, frame)
        self.stack.append(key)
        try:
            return self.eval(lam.body, Frame(module, owner, env, self.scope, guard=frame.guard))
        finally:
            self.stack.pop()

    def e_Starred(self, node: ast.Starred, frame: Frame) -> Val:
        return self.elements(self.eval(node.value, frame))

    def e_Await(self, node: ast.Await, frame: Frame) -> Val:
        return self.eval(node.value, frame)

    # ---- comprehensions

    def e_ListComp(self, node, frame: Frame) -> Val:
        sub = frame.child()
        full, filters, first_iter = True, [], None
        for i, gen in enumerate(node.generators):
            it = self.eval(gen.iter, sub)
            if i == 0:
                first_iter = it
                full = self.is_full(it)
            else:
                full = False
            self.assign(gen.target, self.elements(it), sub, node)
            for cond in gen.ifs:
                truth, pattern = self.test(cond, sub)
                if truth is True:
                    continue
                if truth is False:
                    return one("CONST", value=(), note=f"`if {snippet(cond)}` is always false")
                filters.append((cond, pattern))
        if isinstance(node, ast.DictComp):
            self.eval(node.key, sub)
            elt = self.eval(node.value, sub)
        else:
            elt = self.eval(node.elt, sub)
        return self.comprehension(elt, first_iter or Val(), full, filters, node, frame)

    e_GeneratorExp = e_ListComp
    e_SetComp = e_ListComp
    e_DictComp = e_ListComp

    def comprehension(self, elt: Val, it: Val, full: bool, filters: list, node: ast.AST, frame: Frame) -> Val:
        where = frame.at(node)
        elements = set(self.elements(it))
        for f in list(elements):
            if f.kind == "TUPLE":
                elements |= {x for item in f.items for x in item}
        unchanged = bool(elt) and elt <= elements and not (kinds(elt) - {"ELEM", "PART", "CONST"}) and \
            not (kinds(elt) == {"CONST"})
        if full and not filters and len(elt) == 1 and next(iter(elt)).kind == "FIELD" and \
                next(iter(elt)).flow != "ctx" and \
                {f.flow for f in it if f.kind == "FLOW"} == {next(iter(elt)).flow}:
            column = next(iter(elt))
            return one("COLUMN", flow=column.flow, name=column.name, note=f"`{snippet(node)}`", where=where)
        if unchanged:
            if not filters:
                if full or kinds(it) <= {"PARTS", "FLOW"}:
                    sources = [f for f in it if f.kind in {"FLOW", "PARTS"}] + \
                        [x for f in it if f.kind in {"ENUM", "ZIP"} for item in f.items for x in item
                         if x.kind in {"FLOW", "PARTS"} and self.elements(Val({x})) & elt]
                    return Val({replace(f, alias=False) for f in sources}) or \
                        one("NEW", note="selects elements", where=where)
                return one("NEW", note=f"`{snippet(node)}` selects or re-arranges elements", where=where)
            pattern = next((p for _, p in filters if p), None)
            if all(p for _, p in filters):
                return one("PAT", name=pattern, note=f"keeps elements depending on `{pattern}`", where=where)
            cond = next(c for c, p in filters if not p)
            return one("NEW", note=f"`{snippet(node)}` drops elements where not `{snippet(cond, 50)}`", where=where)
        if any(f.kind == "FIELD" and f.flow == "ctx" or f.kind == "CTXS" or f.kind == "ELEM" and f.flow == "ctx"
               for f in elt):
            return one("CTXS", note=f"`{snippet(node)}` collects retrieved passages", where=where)
        if kinds(elt) <= {"MATCH", "CONST", "OTHER"} and "MATCH" in kinds(elt):
            return Val({f for f in elt if f.kind == "MATCH"})
        ks = kinds(elt)
        if ks & {"RAND", "NEW", "OTHER", "CONST", "FIELD", "TUPLE", "PART", "ELEM"} - {"PAT"} and \
                not (ks <= {"ELEM", "FIELD", "PART"} and not self.elements(it)):
            return self.derived(elt - {f for f in elt if f.kind in {"ELEM", "FIELD", "PART"}} or
                                one("NEW", note=f"`{snippet(node)}` changes elements", where=where),
                                f"`{snippet(node)}` changes elements", where)
        if "PAT" in ks:
            return Val({next(f for f in elt if f.kind == "PAT")})
        if "UNK" in ks:
            return Val({next(f for f in elt if f.kind == "UNK")})
        return one("NEW", note=f"`{snippet(node)}`", where=where)

    def is_full(self, it: Val) -> bool:
        """Iterating ``it`` visits every element of a hook input exactly once."""
        if not it:
            return False
        for f in it:
            if f.kind in {"FLOW", "COLUMN"}:
                continue
            if f.kind in {"ENUM", "ZIP"} and f.items and any(self.is_full(i) for i in f.items):
                continue
            return False
        return True

    def elements(self, it: Val) -> Val:
        out: set[Fact] = set()
        for f in it:
            if f.kind == "FLOW":
                out.add(Fact("ELEM", flow=f.flow))
            elif f.kind == "PARTS":
                out.add(Fact("PART", flow=f.flow, name=f.name))
            elif f.kind == "COLUMN":
                out.add(Fact("FIELD", flow=f.flow, name=f.name))
            elif f.kind == "ENUM":
                out.add(Fact("TUPLE", items=(one("OTHER", note="an index"), self.elements(f.items[0]))))
            elif f.kind == "ZIP":
                out.add(Fact("TUPLE", items=tuple(self.elements(i) for i in f.items)))
            elif f.kind == "CONST" and isinstance(f.value, (tuple, frozenset, str)) and f.value:
                out |= {Fact("CONST", value=v) for v in f.value}
            elif f.kind == "CONST":
                out.add(Fact("OTHER"))
            elif f.kind == "TUPLE":
                for item in f.items:
                    out |= item
            elif f.kind in {"MATCH", "NEW", "PAT", "UNK", "RAND", "CTXS", "ELEM"}:
                out.add(f if f.kind != "ELEM" else Fact("OTHER"))
            else:
                out.add(Fact("OTHER", note=f.note))
        return Val(out)

    # ---- calls

    def e_Call(self, node: ast.Call, frame: Frame) -> Val:
        func = node.func
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "super":
            return one("OTHER")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and \
                isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            return self.call_super(func.attr, node, frame)
        args = [self.eval(a.value if isinstance(a, ast.Starred) else a, frame) for a in node.args]
        kwargs = {k.arg: self.eval(k.value, frame) for k in node.keywords if k.arg}
        for k in node.keywords:
            if not k.arg:
                self.eval(k.value, frame)
        if isinstance(func, ast.Name):
            if func.id in frame.env:
                return self.call_value(frame.env[func.id], func.id, args, kwargs, node, frame)
            return self.call_name(func.id, args, kwargs, node, frame)
        if isinstance(func, ast.Attribute):
            return self.call_method(func, args, kwargs, node, frame)
        callee = self.eval(func, frame)
        return self.call_value(callee, snippet(func, 30), args, kwargs, node, frame)

    def call_super(self, name: str, node: ast.Call, frame: Frame) -> Val:
        args = [self.eval(a, frame) for a in node.args]
        kwargs = {k.arg: self.eval(k.value, frame) for k in node.keywords if k.arg}
        if self.scope is None or frame.owner < 0:
            return self.unknown(f"super().{name}", args, kwargs, node, frame)
        found = self.scope.find(name, frame.owner + 1)
        if found is None:
            if name == "__init__":
                return CONST_NONE
            return self.unknown(f"super().{name} (no parent source)", args, kwargs, node, frame)
        idx, func = found
        return self.call_function(self.scope.mro[idx][0], func, args, kwargs, frame.env.get("self", one("SELF")),
                                  idx, node, frame)

    def call_value(self, callee: Val, label: str, args, kwargs, node, frame) -> Val:
        out: set[Fact] = set()
        for f in callee:
            if f.kind == "FUNC":
                module, fdef, owner = f.value
                self_val = f.items[0] if f.items else None
                out |= self.call_function(module, fdef, args, kwargs, self_val, owner, node, frame)
            elif f.kind == "CLASS":
                out |= self.construct(f, args, kwargs, node, frame)
            elif f.kind == "LAMBDA":
                out |= self.call_lambda(f, args, kwargs, node, frame)
            elif f.kind == "REGEX":
                out |= one("OTHER")
            else:
                out |= self.unknown(label, args, kwargs, node, frame, receiver=Val({f}))
        return Val(out)

    def call_name(self, name: str, args: list[Val], kwargs: dict[str, Val], node: ast.Call, frame: Frame) -> Val:
        first = args[0] if args else Val()
        text_flow = self.hook in STR_HOOKS
        if name in {"list", "tuple", "copy", "deepcopy"} and len(args) == 1 and not kwargs:
            return Val({replace(f, alias=False) for f in first})
        if name in {"str", "float"} and len(args) == 1:
            ok, c = const_of(first)
            if ok:
                try:
                    return one("CONST", value=(str if name == "str" else float)(c))
                except Exception:  # noqa: BLE001
                    return one("OTHER")
            return Val({replace(f, alias=False) for f in first})
        if name in {"sorted", "reversed"} and args:
            if any(f.kind == "FLOW" for f in first):
                if text_flow and any(f.kind == "FLOW" and f.flow == "in" for f in first):
                    return one("NEW", note=f"`{snippet(node)}` re-orders characters", where=frame.at(node))
                self.findings.append(Finding("order", f"`{snippet(node)}` re-orders", frame.at(node)))
                return Val({replace(f, alias=False) for f in first})
            return self.derived(first, f"`{snippet(node)}`", frame.at(node)) if first else one("OTHER")
        if name == "enumerate" and args:
            return one("ENUM", items=(first,))
        if name == "zip":
            return one("ZIP", items=tuple(args))
        if name in {"any", "all"}:
            matches = {f for f in first if f.kind == "MATCH"}
            return Val(matches) if matches else one("OTHER")
        if name in {"min", "max", "sum", "abs", "round", "int"}:
            if all(const_of(a)[0] for a in args) and args:
                try:
                    return one("CONST", value=_hashable(__builtins__[name](*[const_of(a)[1] for a in args])
                                                        if isinstance(__builtins__, dict)
                                                        else getattr(__builtins__, name)(*[const_of(a)[1] for a in args])))
                except Exception:  # noqa: BLE001
                    return one("OTHER")
            if name in {"min", "max"} and len(args) == 1 and not (kinds(first) & {"FLOW", "FIELD", "RAND"}):
                return one("OTHER")
            flowish = union(*args)
            if kinds(flowish) & {"FIELD", "FLOW", "RAND", "NEW", "PAT", "UNK"}:
                return self.derived(union(flowish, one("NEW", note=f"`{snippet(node)}` changes the value",
                                                       where=frame.at(node))),
                                    f"`{snippet(node)}` changes the value", frame.at(node))
            return one("OTHER")
        if name in {"setattr"} and len(args) >= 2:
            if kinds(args[0]) & {"ELEM", "FIELD"}:
                self.finding("changed", f"`{snippet(node)}` changes an input record in place", frame.at(node), frame)
            elif "GEN" in kinds(args[0]):
                self.gen_changed = f"`{snippet(node)}` changes the generator's settings"
                self.finding("changed", self.gen_changed, frame.at(node), frame)
            return CONST_NONE
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and \
                node.args[0].id == "self" and isinstance(node.args[1], ast.Constant) and "self" in frame.env:
            return self.self_attr(str(node.args[1].value), frame, node)
        if name in PURE_BUILTINS:
            return one("OTHER", note=f"{name}(...)")
        callee = self.e_Name(ast.Name(id=name, ctx=ast.Load(), lineno=node.lineno), frame)
        return self.call_value(callee, name, args, kwargs, node, frame)

    def call_method(self, func: ast.Attribute, args, kwargs, node: ast.Call, frame: Frame) -> Val:
        attr = func.attr
        recv_node = func.value
        if isinstance(recv_node, ast.Name) and recv_node.id == "object" and attr == "__setattr__" and args:
            if kinds(args[0]) & {"ELEM", "FIELD"}:
                self.finding("changed", f"`{snippet(node)}` changes an input record in place", frame.at(node), frame)
            elif "GEN" in kinds(args[0]):
                self.gen_changed = f"`{snippet(node)}` changes the generator's settings"
                self.finding("changed", self.gen_changed, frame.at(node), frame)
            return CONST_NONE
        if isinstance(recv_node, ast.Name) and recv_node.id == "self" and "self" in frame.env and self.scope:
            found = self.scope.find(attr)
            if found is not None and f"self.{attr}" not in frame.env:
                idx, fdef = found
                return self.call_function(self.scope.mro[idx][0], fdef, args, kwargs, frame.env["self"], idx, node,
                                          frame)
        receiver = self.eval(recv_node, frame)
        if attr in {"append", "extend", "insert", "add"} and isinstance(recv_node, ast.Name) and args and \
                recv_node.id in frame.env and not any(f.kind == "FLOW" and f.alias for f in receiver) and \
                kinds(receiver) <= {"CONST", "FLOW", "NEW", "PAT", "UNK", "OTHER", "RAND", "CTXS", "COLUMN"}:
            item = args[-1]
            self.collect(recv_node.id, self.elements(item) if attr == "extend" else item, frame, node)
            return CONST_NONE
        recv_name = recv_node.id if isinstance(recv_node, ast.Name) else \
            recv_node.attr if isinstance(recv_node, ast.Attribute) else ""
        if attr in _RNG_FACTORIES and not (kinds(receiver) & {"FLOW", "ELEM", "FIELD", "GEN"}):
            return one("RNG", note=f"`{snippet(node, 50)}`", where=frame.at(node))
        out: set[Fact] = set()
        regex_named = bool(recv_name) and bool(markers.PATTERN_NAME.search(recv_name))
        for f in receiver:
            out |= self.method_on(f, attr, args, kwargs, node, frame, regex_named, recv_node)
        return Val(out)

    def method_on(self, f: Fact, attr: str, args, kwargs, node, frame: Frame, regex_named: bool, recv_node) -> Val:
        where = frame.at(node)
        if f.kind == "LOGGER" or (f.kind == "OTHER" and isinstance(recv_node, ast.Name)
                                  and recv_node.id in markers.LOGGER_NAMES):
            return CONST_NONE
        if f.kind == "REMOD" or f.kind == "MODULE" and f.name in markers.REGEX_MODULES:
            return self.regex_call(attr, args, kwargs, node, frame, module_call=True)
        if f.kind == "REGEX" or (regex_named and attr in markers.REGEX_METHODS and f.kind in {"OTHER", "CONST"}):
            return self.regex_call(attr, args, kwargs, node, frame, module_call=False, name=f.name or snippet(recv_node))
        if f.kind == "MODULE" and f.name == "copy" and attr in {"copy", "deepcopy"} and len(args) == 1:
            return Val({replace(x, alias=False) for x in args[0]})
        if f.kind == "MODULE":
            callee = self.imported(f.name, attr)
            return self.call_value(callee, f"{f.name}.{attr}", args, kwargs, node, frame)
        if f.kind == "FUNC" or f.kind == "INST":
            callee = self.attr_of(f, ast.Attribute(value=recv_node, attr=attr, ctx=ast.Load()), frame) \
                if f.kind == "INST" else Val({f})
            return self.call_value(callee, attr, args, kwargs, node, frame)
        if f.kind == "RNG":
            if attr == "shuffle" and args:
                self.mutate(node.args[0], "order", f"`{snippet(node)}` re-orders", frame, node)
                return CONST_NONE
            if attr == "permutation" and args and kinds(args[0]) & {"FLOW"}:
                return Val({replace(x, alias=False) for x in args[0]})
            return one("RAND", note=f"`{snippet(node, 60)}`", where=where)
        if f.kind == "GEN":
            return self.generator_call(f, attr, args, kwargs, node, frame)
        if f.kind == "MATCH":
            return one("MATCH", name=f.name)
        if f.kind in {"FLOW", "ELEM", "FIELD", "PARTS", "PART", "CTXS", "CONST"}:
            return self.value_method(f, attr, args, kwargs, node, frame)
        if f.kind in {"PAT", "NEW", "RAND", "UNK"}:
            if attr in {"strip", "lstrip", "rstrip", "copy", "model_copy"} and not args:
                return Val({f})
            if attr in {"sub", "subn", "replace"}:
                return Val({f})
            return self.derived(union(Val({f}), *args, *kwargs.values()), f"`{snippet(node)}`", where)
        if attr in {"startswith", "endswith"} and args and all(x.kind == "CONST" for a in args[:1] for x in a):
            return one("MATCH", name=f"{attr}({', '.join(snippet(a, 30) for a in node.args)})")
        if f.kind == "OTHER" and attr in {"append", "extend", "add", "insert", "update", "setdefault", "__setitem__"}:
            return CONST_NONE  # state of the defense, not the hook's channel
        return self.unknown(f"{snippet(recv_node, 40)}.{attr}", args, kwargs, node, frame, receiver=Val({f}))

    def regex_call(self, attr, args, kwargs, node, frame, module_call: bool, name: str = "") -> Val:
        where = frame.at(node)
        if module_call:
            if attr == "compile":
                ok, c = const_of(args[0]) if args else (False, None)
                return one("REGEX", name=repr(c) if ok else snippet(node, 50))
            pattern = args[0] if args else Val()
            ok, c = const_of(pattern)
            name = repr(c) if ok else snippet(node.args[0], 40) if node.args else "a pattern"
            args = args[1:]
        if attr in {"sub", "subn"}:
            target = args[1] if len(args) > 1 else kwargs.get("string", Val())
            if not (kinds(target) - {"CONST"}):
                return one("OTHER")
            if "UNK" in kinds(target) and not (kinds(target) & {"FLOW", "FIELD", "PART"}):
                return Val({f for f in target if f.kind == "UNK"})
            if "CTXS" in kinds(target):
                return Val({f for f in target if f.kind == "CTXS"})
            return one("PAT", name=name, note=f"`{snippet(node, 70)}` rewrites matches of {name}", where=where)
        if attr in markers.REGEX_METHODS:
            return one("MATCH", name=name)
        return one("OTHER")

    def value_method(self, f: Fact, attr: str, args, kwargs, node, frame) -> Val:
        where = frame.at(node)
        if f.kind == "CONST":
            if attr == "join" and isinstance(f.value, str) and args:
                return self.join_call(f.value, args[0], node, frame)
            if attr == "format" and isinstance(f.value, str):
                if f.value == "{}" and len(args) == 1 and not kwargs:
                    return Val({replace(x, alias=False) for x in args[0]})
                return self.concat([Val({f}), *args, *kwargs.values()], node, frame)
            if all(const_of(a)[0] for a in args):
                try:
                    return one("CONST", value=_hashable(getattr(f.value, attr)(*[const_of(a)[1] for a in args])))
                except Exception:  # noqa: BLE001
                    return one("OTHER")
            return one("OTHER")
        if attr in {"copy"} and not args:
            return Val({replace(f, alias=False)})
        if attr == "model_copy":
            return self.model_copy(f, kwargs, node, frame)
        if attr in markers.MUTATING_METHODS and f.kind == "FLOW":
            how = "order" if attr in {"sort", "reverse"} else "content"
            if attr in {"append", "extend", "insert"} and isinstance(node.func.value, ast.Name) and not f.alias:
                self.collect(node.func.value.id, args[0] if args else Val(), frame, node)
                return CONST_NONE
            self.mutate(node.func.value, how, f"`{snippet(node)}`", frame, node)
            return CONST_NONE
        if attr in {"index", "count", "find", "rfind", "isdigit", "isalpha", "isalnum", "isupper", "islower",
                    "isspace", "istitle", "keys", "values", "items", "get", "__len__"}:
            return one("OTHER")
        if attr in {"startswith", "endswith"}:
            return one("MATCH", name=f"{attr}({', '.join(snippet(a, 30) for a in node.args)})")
        if attr in {"strip", "lstrip", "rstrip"} and not args:
            return Val({replace(f, alias=False)})
        if attr in {"encode", "decode"} and not kwargs and all(const_of(a)[0] for a in args):
            return Val({replace(f, alias=False)})  # another representation of the same text
        if attr in CASE_METHODS or attr in {"strip", "lstrip", "rstrip", "center", "ljust", "rjust", "zfill",
                                             "encode", "decode", "expandtabs"}:
            return one("NEW", note=f"`{snippet(node)}` changes the text", where=where)
        if attr == "split":
            sep = const_of(args[0])[1] if args else None
            if args and not const_of(args[0])[0] or len(args) > 1 or kwargs:
                return one("NEW", note=f"`{snippet(node)}`", where=where)
            return one("PARTS", flow=f.flow if f.kind != "CTXS" else "ctx", name=repr(sep))
        if attr == "replace" and len(args) >= 2:
            old, new = args[0], args[1]
            if const_of(old)[0] and const_of(new)[0] and const_of(old)[1] == const_of(new)[1]:
                return Val({replace(f, alias=False)})
            if all(x.kind == "CONST" for x in old):
                return one("PAT", name=f"the literal(s) {sorted(repr(x.value) for x in old)[:4]}",
                           note=f"`{snippet(node, 70)}` rewrites fixed strings", where=where)
            if "MATCH" in kinds(old):
                return one("PAT", name=next(x.name for x in old if x.kind == "MATCH"),
                           note=f"`{snippet(node, 70)}` rewrites pattern matches", where=where)
            return self.derived(union(old, new, one("NEW")), f"`{snippet(node)}` replaces text", where)
        if attr == "join" and f.kind in {"FLOW", "FIELD"} and args:
            return self.derived(union(args[0], one("NEW")), f"`{snippet(node)}`", where)
        return self.unknown(f"{snippet(node.func, 40)}", args, kwargs, node, frame, receiver=Val({f}))

    def join_call(self, sep: str, seq: Val, node, frame) -> Val:
        out: set[Fact] = set()
        for f in seq:
            if f.kind == "FLOW" and f.flow == "in" and self.hook in STR_HOOKS and sep == "":
                out.add(replace(f, alias=False))
            elif f.kind == "PARTS" and (repr(sep) == f.name or f.name == "None" and sep == " "):
                out.add(Fact("FLOW", flow=f.flow) if f.flow == "in" else Fact("FIELD", flow=f.flow, name="text"))
            elif f.kind == "TUPLE" and len(f.items) == 1 and sep == "":
                out |= f.items[0]
            elif f.kind == "TUPLE":
                out |= self.concat(list(f.items), node, frame)
            else:
                out.add(f)
        identity = {f for f in out if f.kind == "FLOW" or f.kind == "FIELD" and f.flow != "ctx"}
        pieces = Val(out) - identity
        if not pieces:
            return Val(out)
        return Val(identity) | self.rejoin(pieces, node, frame)

    def model_copy(self, f: Fact, kwargs, node, frame) -> Val:
        where = frame.at(node)
        update = kwargs.get("update")
        if update is None:
            return Val({replace(f, alias=False)})
        if f.kind not in {"ELEM", "FIELD", "FLOW"}:
            return self.derived(union(Val({f}), update), f"`{snippet(node)}`", where)
        dict_node = next((k.value for k in node.keywords if k.arg == "update"), None)
        if not isinstance(dict_node, ast.Dict) or any(k is None for k in dict_node.keys):
            return self.unknown_or_derived(update, f"`{snippet(node)}` updates fields the analysis cannot see", where)
        prefix = "" if f.kind in {"ELEM", "FLOW"} else f.name + "."
        changed = []
        for key, value_node in zip(dict_node.keys, dict_node.values):
            ok, k = const_of(self.eval(key, frame))
            if not ok:
                return one("UNK", note=f"`{snippet(node)}`: a computed field name", where=where)
            if k in NON_CHANNEL_FIELDS:
                continue
            value = self.eval(value_node, frame)
            if not self.is_field(value, f.flow, prefix + k):
                changed.append(value)
        if not changed:
            return Val({replace(f, alias=False)})
        return self.field_change(union(*changed), f"`{snippet(node, 80)}` changes a field", where)

    def is_field(self, value: Val, flow: str, path: str) -> bool:
        return bool(value) and all(x.kind == "FIELD" and x.flow == flow and x.name == path for x in value)

    def field_change(self, values: Val, note: str, where: str) -> Val:
        ks = kinds(values)
        if "CTXS" in ks:
            return one("CTXS", note=note, where=where)
        if ks & {"RAND", "NEW", "OTHER", "CONST", "ELEM", "FIELD", "TUPLE", "PART"}:
            return self.derived(Val({x for x in values if x.kind not in {"FIELD", "ELEM", "PART"}}) or
                                one("NEW", note=note, where=where), note, where)
        if "PAT" in ks:
            return Val({next(x for x in values if x.kind == "PAT")})
        if "UNK" in ks:
            return Val({next(x for x in values if x.kind == "UNK")})
        return one("NEW", note=note, where=where)

    def unknown_or_derived(self, value: Val, note: str, where: str) -> Val:
        if "UNK" in kinds(value):
            return one("UNK", note=note, where=where)
        return self.derived(value, note, where)

    def construct(self, f: Fact, args, kwargs, node, frame) -> Val:
        name = f.name
        where = frame.at(node)
        if name in RECORDS:
            fields = RECORDS[name]
            values = {k: kwargs[k] for k in fields if k in kwargs}
            for k, v in zip(fields, args):
                values.setdefault(k, v)
            candidates = {(x.flow, x.name.rsplit(".", 1)[0] if "." in x.name else "")
                          for v in values.values() for x in v if x.kind == "FIELD"}
            for flow, prefix in candidates:
                pre = f"{prefix}." if prefix else ""
                if len(values) == len(fields) and all(self.is_field(values[k], flow, pre + k) for k in fields):
                    return one("ELEM", flow=flow) if not prefix else one("FIELD", flow=flow, name=prefix)
            return self.field_change(union(*values.values()) if values else one("NEW"),
                                     f"`{snippet(node, 80)}` builds a new record", where)
        if name == "DecodingParams":
            return one("NEW", note=f"`{snippet(node, 80)}` sets decoding parameters of its own", where=where)
        if f.value is not None:
            module, cls = f.value
            fields = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            given = dict(zip(fields, args)) | kwargs
            return one("INST", name=name, value=(module, cls), items=tuple(sorted(given.items())))
        return self.unknown(name, args, kwargs, node, frame)

    def generator_call(self, f: Fact, attr: str, args, kwargs, node, frame) -> Val:
        where = frame.at(node)
        method = f.name or attr
        if f.name:  # a bound method value called: generator.generate stored in a local
            attr = f.name
        if attr == "render":
            return one("OTHER", note="a rendered prompt")
        if attr != "generate":
            return self.unknown(f"generator.{method}", args, kwargs, node, frame, receiver=Val({f}))
        messages = args[0] if args else kwargs.get("messages", Val())
        params = args[1] if len(args) > 1 else kwargs.get("params", CONST_NONE)
        if self.gen_changed:
            return one("NEW", note=self.gen_changed, where=where)
        msg_ks = kinds(messages)
        if msg_ks == {"FLOW"} and all(x.flow == "msgs" for x in messages):
            params_ok = all(x.kind == "FLOW" and x.flow == "genp" or x.kind == "CONST" and x.value is None
                            for x in params)
            if params_ok:
                return one("PLAIN", note="the plain generation")
            if "UNK" in kinds(params):
                return one("UNK", note=f"`{snippet(node, 70)}`: decoding parameters the analysis cannot see", where=where)
            return one("NEW", note=f"`{snippet(node, 80)}` changes the decoding parameters", where=where)
        if "UNK" in msg_ks:
            return one("UNK", note=f"`{snippet(node, 70)}`: messages the analysis cannot see", where=where)
        return one("NEW", note=f"`{snippet(node, 80)}` generates from changed messages", where=where)

    def unknown(self, label: str, args, kwargs, node, frame, receiver: Val = Val()) -> Val:
        everything = union(receiver, *args, *kwargs.values())
        where = frame.at(node)
        ks = kinds(everything)
        if ks & {"RNG", "RAND"}:
            return one("RAND", note=f"`{snippet(node, 60)}` draws from a random generator", where=where)
        for a in args:
            if any(x.kind == "FLOW" and x.alias and x.flow == "in" for x in a) and self.hook not in STR_HOOKS:
                self.findings.append(Finding("unknown", f"the input is handed to `{label}`, which may change it in "
                                                        "place (not followed)", where))
        if ks & {"FLOW", "ELEM", "FIELD", "PART", "PARTS", "PLAIN", "GEN", "CTXS", "PAT", "UNK", "MATCH"}:
            return one("UNK", note=f"`{snippet(node, 60)}`: `{label}` is not followed (its source is outside the "
                                   "class, its bases and the modules the audit can read)", where=where)
        return one("OTHER", note=f"`{snippet(node, 50)}`", where=where)

    def call_function(self, module: Module, fdef: ast.FunctionDef, args, kwargs, self_val: Val | None, owner: int,
                      node: ast.AST, frame: Frame) -> Val:
        key = id(fdef)
        if key in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.unknown(f"{fdef.name} (recursion or call depth)", args, kwargs, node, frame)
        memo_key = (key, owner, tuple(args), tuple(sorted(kwargs.items())), self_val, self.gen_changed)
        if memo_key in self.memo:  # the same call with the same abstract arguments: same result, same findings
            value, findings, gen_changed = self.memo[memo_key]
            self.findings.extend(findings)
            self.gen_changed = gen_changed
            return value
        before = len(self.findings)
        value = self._call_function(module, fdef, args, kwargs, self_val, owner)
        self.memo[memo_key] = (value, self.findings[before:], self.gen_changed)
        return value

    def _call_function(self, module: Module, fdef: ast.FunctionDef, args, kwargs, self_val: Val | None,
                       owner: int) -> Val:
        key = id(fdef)
        params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
        env: dict[str, Val] = {}
        if params and self_val is not None and params[0] in {"self", "cls"}:
            env[params[0]] = self_val
            params = params[1:]
        elif owner >= 0 and params and params[0] == "self":
            env["self"] = self_val if self_val is not None else one("SELF")
            params = params[1:]
        defaults = fdef.args.defaults
        for i, p in enumerate(params):
            if i < len(args):
                env[p] = args[i]
            elif p in kwargs:
                env[p] = kwargs[p]
            else:
                d = len(params) - len(defaults)
                env[p] = self.eval(defaults[i - d], Frame(module, owner, {}, self.scope)) if i >= d else one("OTHER")
        for a in fdef.args.kwonlyargs:
            env[a.arg] = kwargs.get(a.arg, one("OTHER"))
        if fdef.args.vararg:
            env[fdef.args.vararg.arg] = one("TUPLE", items=tuple(args[len(params):]))
        if fdef.args.kwarg:
            env[fdef.args.kwarg.arg] = one("OTHER")
        callee = Frame(module, owner, env, self.scope)
        self.stack.append(key)
        try:
            ends = self.run_block(_body(fdef), callee)
        finally:
            self.stack.pop()
        returns = list(callee.returns)
        if not ends or not returns:
            returns.append(CONST_NONE)
        return union(*returns)

    def classify_list(self, value: Val) -> str:
        return classify(value, self.hook)[0]


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


# ----------------------------------------------------------------------------------- verdict


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


def strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


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
        env[params[0]] = one("SELF")
    for name, flow in zip(params[1:], HOOK_PARAMS[hook]):
        if flow == "in":
            env[name] = one("FLOW", flow="in", alias=True, note=f"the argument {name}")
        elif flow in {"msgs", "ctx"}:
            env[name] = one("FLOW", flow=flow, alias=True, note=f"the argument {name}")
        elif flow == "gen":
            env[name] = one("GEN", note=f"the argument {name}")
        else:
            env[name] = one("OTHER", note=f"the argument {name}")
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
            lead = {"RAND": "passes on a value computed from a random draw",
                    "OTHER": "passes on a value not derived from its input",
                    "CONST": "passes on a constant"}.get(fact.kind, "passes on changed content")
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
