"""Classify one hook body from its AST: pass-through, pattern-limited or active.

The analysis is flow-insensitive and deliberately small:

* **identity values.** Per hook, the value that flows through (``candidates``, ``passages``,
  ``answer``; for ``generate`` the plain ``generator.generate(messages).text``) and its copies
  (``list(x)``, ``x[:]``, ``x.copy()``, ``[c for c in x]``, ``f"{x}"``), followed through local
  names whose every assignment is itself an identity value.
* **pass-through.** Every ``return`` yields an identity value and nothing mutates the flowing value
  in place (mutating methods, item/attribute stores, or handing it to an unknown function).
  Bodies that are only ``pass``/``...``/a docstring, that raise ``NotImplementedError`` or that sit
  under a stub-marker comment are pass-throughs too (the markers live in ``markers.py``).
* **pattern-limited.** Some ``return`` yields a changed value, but every such change is either
  guarded by a pattern test (a regex call, a ``match`` statement, ``"literal" in text``,
  ``startswith``/``endswith``) or computed only from pattern rewrites (``PAT.sub``,
  ``text.replace("literal", ...)``), possibly through ``self`` helpers of the same class.
* **active.** Anything else.

``super().hook(...)`` with the hook's own arguments is reported as a delegation; the caller
resolves it to the parent implementation's status.

Limits, chosen to err towards "active" (a missed stub is caught by the dynamic trace, a false
alarm would fail a real defense): functions outside the class are not followed, so a change made
by an imported helper counts as active even when that helper is a regex; handing the flowing
value to an unknown function counts as a possible in-place change.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from ragleak.audit import markers

#: Positional index (after ``self``) of the value each hook passes on.
FLOW_INDEX = {"score_retrieval": 1, "rewrite_context": 1, "postprocess": 1}
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_BENIGN_CALLS = markers.PURE_CALLS | {"enumerate", "zip", "range", "any", "all", "getattr", "dict",
                                      "set", "frozenset", "int", "float", "min", "max"}
_STR_METHODS = frozenset({"strip", "lstrip", "rstrip", "lower", "upper", "casefold", "join", "format", "split",
                          "splitlines", "startswith", "endswith", "model_copy", "copy", "get", "items", "keys",
                          "values"})


@dataclass(frozen=True)
class BodyVerdict:
    """The classification of one function body."""

    status: str  # "pass-through" | "pattern-limited" | "active" | "delegates"
    form: str | None
    evidence: str
    line: int


@dataclass
class _Ctx:
    func: ast.FunctionDef
    hook: str
    patterns: frozenset[str]
    methods: dict[str, ast.FunctionDef]
    params: list[str] = field(default_factory=list)
    assigned: dict[str, list[ast.expr | None]] = field(default_factory=dict)


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not descend into nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, _NESTED):
            stack.extend(ast.iter_child_nodes(current))


def strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _is_ellipsis(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis


def _is_not_implemented(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id in {"NotImplementedError", "NotImplemented"}


def _name(node: ast.AST) -> str | None:
    """The last identifier of a Name or Attribute chain."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _collect_assignments(func: ast.FunctionDef) -> dict[str, list[ast.expr | None]]:
    """Every local binding of each name: the assigned expression, or None when not a plain assignment."""
    out: dict[str, list[ast.expr | None]] = {}
    for node in walk_local(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
                else:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            out.setdefault(sub.id, []).append(None)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = [node.target] if isinstance(node, (ast.AugAssign, ast.For, ast.NamedExpr)) else \
                [item.optional_vars for item in node.items if item.optional_vars is not None]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        value = node.value if isinstance(node, ast.NamedExpr) else None
                        out.setdefault(sub.id, []).append(value)
    return out


def _kind(expr: ast.expr | None, ctx: _Ctx, seen: frozenset[str] = frozenset()) -> str | None:
    """Identity kind of ``expr``: 'flow', 'messages', 'generator', 'gen', 'gentext', 'delegate' or None."""
    if expr is None:
        return None
    if isinstance(expr, ast.Name):
        return _name_kind(expr.id, ctx, seen)
    if isinstance(expr, ast.Call):
        return _call_kind(expr, ctx, seen)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice) and \
            expr.slice.lower is None and expr.slice.upper is None and expr.slice.step is None:
        return "flow" if _kind(expr.value, ctx, seen) == "flow" else None
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)) and len(expr.generators) == 1:
        gen = expr.generators[0]
        if not gen.ifs and isinstance(gen.target, ast.Name) and isinstance(expr.elt, ast.Name) \
                and expr.elt.id == gen.target.id and _kind(gen.iter, ctx, seen) == "flow":
            return "flow"
        return None
    if isinstance(expr, ast.JoinedStr) and len(expr.values) == 1 and isinstance(expr.values[0], ast.FormattedValue):
        value = expr.values[0]
        if value.conversion == -1 and value.format_spec is None:
            return "flow" if _kind(value.value, ctx, seen) == "flow" else None
        return None
    if isinstance(expr, ast.IfExp):
        left, right = _kind(expr.body, ctx, seen), _kind(expr.orelse, ctx, seen)
        return left if left == right else None
    if isinstance(expr, ast.Attribute) and expr.attr == "text" and _kind(expr.value, ctx, seen) == "gen":
        return "gentext"
    return None


def _name_kind(name: str, ctx: _Ctx, seen: frozenset[str]) -> str | None:
    if name in seen:  # a self-reference such as `x = list(x)`: the parameter's own kind
        return _param_kind(ctx.params.index(name), ctx.hook) if name in ctx.params else None
    kinds: set[str | None] = set()
    if name in ctx.params:
        kinds.add(_param_kind(ctx.params.index(name), ctx.hook))
    for value in ctx.assigned.get(name, []):
        kinds.add(_kind(value, ctx, seen | {name}))
    if len(kinds) == 1:
        return kinds.pop()
    return None


def _param_kind(index: int, hook: str) -> str | None:
    if hook == "generate":
        return {0: "messages", 2: "generator"}.get(index)
    return "flow" if FLOW_INDEX.get(hook) == index else None


def _call_kind(call: ast.Call, ctx: _Ctx, seen: frozenset[str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in markers.COPY_CALLS or \
            isinstance(func, ast.Attribute) and func.attr in {"copy", "deepcopy"} and _name(func.value) == "copy":
        if len(call.args) == 1 and not call.keywords:
            return "flow" if _kind(call.args[0], ctx, seen) == "flow" else None
        return None
    if isinstance(func, ast.Attribute) and func.attr in markers.COPY_METHODS and not call.args and not call.keywords:
        return "flow" if _kind(func.value, ctx, seen) == "flow" else None
    if isinstance(func, ast.Attribute) and func.attr == "generate" and _kind(func.value, ctx, seen) == "generator":
        if len(call.args) == 1 and not call.keywords and _kind(call.args[0], ctx, seen) == "messages":
            return "gen"
        return None
    if _is_delegation(call, ctx):
        return "delegate"
    return None


def _is_delegation(call: ast.Call, ctx: _Ctx) -> bool:
    """``super().hook(*params)`` or ``Base.hook(self, *params)`` with the hook's own arguments."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != ctx.hook or call.keywords:
        return False
    args = list(call.args)
    if isinstance(func.value, ast.Call) and _name(func.value.func) == "super":
        pass
    elif isinstance(func.value, (ast.Name, ast.Attribute)) and args and isinstance(args[0], ast.Name) \
            and args[0].id == ctx.func.args.args[0].arg:
        args = args[1:]
    else:
        return False
    return len(args) == len(ctx.params) and all(
        isinstance(a, ast.Name) and a.id == p and p not in ctx.assigned for a, p in zip(args, ctx.params))


def is_pattern_call(node: ast.AST, patterns: frozenset[str]) -> bool:
    """A regex match/rewrite call, or a literal ``str.replace``/``startswith``/``endswith``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    attr, receiver = node.func.attr, node.func.value
    if attr in {"replace", "startswith", "endswith"}:
        return bool(node.args) and isinstance(node.args[0], (ast.Constant, ast.Tuple))
    if attr not in markers.REGEX_METHODS:
        return False
    name = _name(receiver)
    if isinstance(receiver, ast.Name) and name in markers.REGEX_MODULES:
        return True
    return name is not None and (name in patterns or bool(markers.PATTERN_NAME.search(name)))


def _is_pattern_test(test: ast.expr, patterns: frozenset[str]) -> bool:
    for node in ast.walk(test):
        if is_pattern_call(node, patterns):
            return True
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and \
                isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return True
    return False


def _guarded_returns(body: list[ast.stmt], patterns: frozenset[str], guarded: bool = False
                     ) -> Iterator[tuple[ast.Return, bool]]:
    """Each ``return`` with whether it only runs behind a pattern test.

    A statement is behind a pattern test when it sits in a branch of a pattern ``if``/``match``,
    or follows (in the same block) a pattern ``if`` whose body always returns.
    """
    for stmt in body:
        if isinstance(stmt, ast.Return):
            yield stmt, guarded
        elif isinstance(stmt, (ast.If, ast.While)):
            test = _is_pattern_test(stmt.test, patterns)
            yield from _guarded_returns(stmt.body, patterns, guarded or test)
            yield from _guarded_returns(stmt.orelse, patterns, guarded or test)
            if test and stmt.body and isinstance(stmt.body[-1], ast.Return):
                guarded = True
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                yield from _guarded_returns(case.body, patterns, True)
        elif isinstance(stmt, (ast.For, ast.With, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                yield from _guarded_returns(getattr(stmt, block, []), patterns, guarded)
            for handler in getattr(stmt, "handlers", []):
                yield from _guarded_returns(handler.body, patterns, guarded)


def _closure(expr: ast.expr, ctx: _Ctx) -> list[ast.AST]:
    """``expr`` plus every local assignment (transitively) its names read from."""
    nodes, todo, seen = [expr], [expr], set()
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                for value in ctx.assigned.get(node.id, []):
                    if value is not None:
                        nodes.append(value)
                        todo.append(value)
                for loop in walk_local(ctx.func):
                    if isinstance(loop, (ast.For, ast.AugAssign)) and any(
                            isinstance(t, ast.Name) and t.id == node.id for t in ast.walk(loop.target)):
                        part = loop.iter if isinstance(loop, ast.For) else loop.value
                        nodes.append(part)
                        todo.append(part)
    return nodes


def _pattern_only(nodes: list[ast.AST], ctx: _Ctx, depth: int = 0) -> bool:
    """True when ``nodes`` contain a pattern call and no other source of change."""
    found = False
    for root in nodes:
        for node in ast.walk(root):
            if not isinstance(node, ast.Call):
                continue
            if is_pattern_call(node, ctx.patterns):
                found = True
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                    and func.attr in ctx.methods and depth < 2:
                helper = ctx.methods[func.attr]
                if _pattern_only([helper], ctx, depth + 1):
                    found = True
                    continue
                return False
            if _benign_call(node):
                continue
            return False
    return found


def _benign_call(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in _BENIGN_CALLS or func.id[:1].isupper()  # a record constructor
    if isinstance(func, ast.Attribute):
        return func.attr in _STR_METHODS or _name(func.value) in markers.LOGGER_NAMES
    return False


def _mutation(ctx: _Ctx) -> ast.AST | None:
    """The first statement that may change the flowing value in place, if any."""
    flow_kinds = {"flow", "messages"}
    names = {n for n in set(ctx.params) | set(ctx.assigned) if _name_kind(n, ctx, frozenset()) in flow_kinds}
    for node in walk_local(ctx.func):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, (ast.Subscript, ast.Attribute)) and _name(_root(target)) in names:
                    return node
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names \
                    and func.attr in markers.MUTATING_METHODS:
                return node
            passed = [a for a in node.args if isinstance(a, ast.Name) and a.id in names] + \
                [k.value for k in node.keywords if isinstance(k.value, ast.Name) and k.value.id in names]
            if passed and _kind(node, ctx) is None and not _is_pattern_call_or_benign(node, ctx):
                return node
    return None


def _is_pattern_call_or_benign(call: ast.Call, ctx: _Ctx) -> bool:
    return is_pattern_call(call, ctx.patterns) or _benign_call(call) or (
        isinstance(call.func, ast.Attribute) and call.func.attr == "generate")


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node


def classify_body(func: ast.FunctionDef, hook: str, patterns: frozenset[str],
                  methods: dict[str, ast.FunctionDef]) -> BodyVerdict:
    """Classify ``func`` (the hook's ``def``) by its code alone; comments are checked elsewhere."""
    body = strip_docstring(func.body)
    if not body:
        return BodyVerdict("pass-through", "docstring-only", "the body is only a docstring", func.lineno)
    if all(isinstance(s, ast.Pass) for s in body):
        return BodyVerdict("pass-through", "pass", "the body is `pass`", body[0].lineno)
    if all(_is_ellipsis(s) or isinstance(s, ast.Pass) for s in body):
        return BodyVerdict("pass-through", "ellipsis", "the body is `...`", body[0].lineno)
    for stmt in body:
        if _is_not_implemented(stmt):
            return BodyVerdict("pass-through", "not-implemented", f"`{ast.unparse(stmt)}`", stmt.lineno)
    ctx = _Ctx(func, hook, patterns, methods, params=[a.arg for a in func.args.args[1:]],
               assigned=_collect_assignments(func))
    returns = list(_guarded_returns(body, patterns))
    valued = [(r, g) for r, g in returns if r.value is not None]
    if not valued:
        return BodyVerdict("pass-through", "no-return", "no `return` passes a value on", func.lineno)
    identity = "gentext" if hook == "generate" else "flow"
    kinds = [_kind(r.value, ctx) for r, _ in valued]
    mutation = _mutation(ctx)
    if all(k in (identity, "delegate") for k in kinds):
        if mutation is not None:
            return BodyVerdict("active", None, f"may change its input in place: `{_snippet(mutation)}`",
                               mutation.lineno)
        if "delegate" in kinds:
            r = valued[kinds.index("delegate")][0]
            return BodyVerdict("delegates", "delegates", f"`{ast.unparse(r)}`", r.lineno)
        r = valued[0][0]
        form = "plain-generation" if hook == "generate" else "returns-argument"
        what = "the plain generator's text" if hook == "generate" else "its input"
        return BodyVerdict("pass-through", form, f"every return passes {what} on unchanged: `{ast.unparse(r)}`",
                           r.lineno)
    changed = [(r, g) for (r, g), k in zip(valued, kinds) if k not in (identity, "delegate")]
    unguarded = [r for r, g in changed if not (g or _pattern_only(_closure(r.value, ctx), ctx))]
    if not unguarded and mutation is None:
        r = changed[0][0]
        call = _pattern_in([func], patterns)
        via = f" (pattern: `{_snippet(call, 60)}`)" if call is not None else ""
        return BodyVerdict("pattern-limited", None,
                           f"the change is limited to pattern matches: `{_snippet(r)}`{via}", r.lineno)
    r = unguarded[0] if unguarded else changed[0][0]
    return BodyVerdict("active", None, f"returns a changed value: `{_snippet(r)}`", r.lineno)


def _pattern_in(nodes: list[ast.AST], patterns: frozenset[str]) -> ast.AST | None:
    """The first pattern call or pattern test inside ``nodes`` (for the evidence line)."""
    for root in nodes:
        for node in ast.walk(root):
            if is_pattern_call(node, patterns) or isinstance(node, ast.Match):
                return node.subject if isinstance(node, ast.Match) else node
            if isinstance(node, ast.Compare) and _is_pattern_test(node, patterns):
                return node
    return None


def _snippet(node: ast.AST, limit: int = 90) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
