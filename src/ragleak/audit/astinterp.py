"""Statements and expressions of the hook dataflow: flow-sensitive, branches joined
(``absval.join_envs``), loops run to a fixpoint with their ``break``/``continue``/``else`` paths
(``absval.loop_fixpoint``), constant conditions folded, pattern guards tracked (calls are in
``astcalls``)."""

from __future__ import annotations

import ast
from dataclasses import replace

from ragleak.audit import markers
from ragleak.audit.absval import (
    Env,
    join_envs,
    Kind,
    loop_exit,
    loop_fixpoint,
    widen,
    CONST_NONE,
    MAX_DEPTH,
    MAX_STEPS,
    NON_CHANNEL_FIELDS,
    RECORDS,
    STR_HOOKS,
    _Budget,
    _compare,
    const_of,
    _decorator_name,
    Fact,
    Finding,
    _fold,
    Frame,
    _hashable,
    kinds,
    Module,
    one,
    Scope,
    snippet,
    union,
    Val,
)
from ragleak.audit.astcalls import CallsMixin
from ragleak.audit.source import module_source


class Interpreter(CallsMixin):
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
            if f.kind in {Kind.NEW, Kind.RAND, Kind.OTHER, Kind.CONST}:
                out.add(Fact(Kind.PAT, name=pattern, note=f"{f.note or 'a change'} only where `{pattern}` matches",
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
                value = Val(Fact(Kind.FLOW, flow=next(iter(frame.empty)))
                            if f.kind == Kind.CONST and f.value in ((), "") else f for f in value)
            frame.returns.append(self.guarded(value, frame))
            return True
        if isinstance(stmt, (ast.Break, ast.Continue)):
            # the state goes on after the loop (a break, its `else` skipped) or round again (a
            # continue); behind a pattern test it does so only where the pattern matches
            state = {k: self.guarded(v, frame) for k, v in frame.env.items()}
            (frame.breaks if isinstance(stmt, ast.Break) else frame.continues).append(state)
            return True
        if isinstance(stmt, ast.Raise):
            if stmt.exc is not None:
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
            frame.env = join_envs(frame.env, *envs)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            frame.env[stmt.name] = one(Kind.OTHER, note=f"local {stmt.name}")
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
            frame.env = join_envs(*live)
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
        flows = {f.flow for f in frame.env.get(subject.id, ()) if f.kind == Kind.FLOW}
        return "in" if flows == {"in"} else None

    def branch_guard(self, frame: Frame, test: ast.expr, pattern: str | None) -> str:
        if frame.guard and frame.guard.startswith("pattern:"):
            return frame.guard
        return f"pattern:{pattern}" if pattern else f"cond:{snippet(test, 50)}"

    def run_loop(self, stmt, frame: Frame) -> None:
        """``for``/``while``: the body run to a fixpoint of the loop head (``loop_fixpoint``), then the
        ``else`` clause from the normal exit, then the states at a ``break`` joined in."""
        pre = dict(frame.env)
        if isinstance(stmt, ast.While):
            truth, pattern = self.test(stmt.test, frame)
            if truth is False:
                self.run_block(stmt.orelse, frame)
                return
            mentioned = {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
            full = any(f.kind == Kind.FLOW and f.flow == "in" for n in mentioned for f in frame.env.get(n, ()))
            guard = frame.guard if not pattern else self.branch_guard(frame, stmt.test, pattern)
            elements = None
        else:
            it = self.eval(stmt.iter, frame)
            full = self.is_full(it)
            elements = self.elements(it)
            pattern = next((f.name for f in it if f.kind == Kind.MATCH), None)
            guard = self.branch_guard(frame, stmt.iter, pattern) if pattern else frame.guard

        def one_pass(head: Env) -> tuple[list[Env], list[Env]]:
            body = frame.child(env=head, guard=guard, full_loop=full or frame.full_loop, breaks=[], continues=[])
            body.returns = frame.returns
            if elements is not None:
                self.assign(stmt.target, elements, body, stmt)
            ends = self.run_block(stmt.body, body)
            return ([] if ends else [body.env]) + body.continues, body.breaks

        states = loop_fixpoint(one_pass, pre)
        note = f"still changes after {states.rounds} passes of the loop at line {stmt.lineno}"
        frame.env = widen(loop_exit(pre, states.ends, full), states.unsettled, note, frame.at(stmt))
        ends_else = self.run_block(stmt.orelse, frame)
        if states.breaks:
            breaks = [widen(b, states.unsettled, note, frame.at(stmt)) for b in states.breaks]
            frame.env = join_envs(*([] if ends_else else [frame.env]), *breaks)

    def run_try(self, stmt: ast.Try, frame: Frame) -> bool:
        pre = dict(frame.env)
        ends = self.run_block(stmt.body, frame)
        envs = [] if ends else [frame.env]
        for handler in stmt.handlers:
            sub = frame.child(env=dict(pre))
            sub.returns = frame.returns
            if handler.name:
                sub.env[handler.name] = one(Kind.OTHER, note="exception")
            if not self.run_block(handler.body, sub):
                envs.append(sub.env)
        if not ends:
            self.run_block(stmt.orelse, frame)
        frame.env = join_envs(*envs) if envs else frame.env
        if stmt.finalbody:
            self.run_block(stmt.finalbody, frame)
        return not envs

    # ---- assignment and mutation

    def assign(self, target: ast.expr, value: Val, frame: Frame, stmt: ast.AST) -> None:
        value = self.guarded(value, frame)
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            ok, c = const_of(value)
            if ok and isinstance(c, tuple) and len(c) == len(target.elts):
                value = one(Kind.TUPLE, items=tuple(one(Kind.CONST, value=x) for x in c))
            tuples = [f for f in value if f.kind == Kind.TUPLE and len(f.items) == len(target.elts)]
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self.assign(elt.value, one(Kind.OTHER), frame, stmt)
                elif tuples and len(tuples) == len(value):
                    self.assign(elt, union(*(t.items[i] for t in tuples)), frame, stmt)
                else:
                    self.assign(elt, self.elements(value), frame, stmt)
        elif isinstance(target, ast.Subscript):
            self.store_item(target, value, frame, stmt)
        elif isinstance(target, ast.Attribute):
            self.store_attr(target, value, frame, stmt)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, one(Kind.OTHER), frame, stmt)

    def store_item(self, target: ast.Subscript, value: Val, frame: Frame, stmt: ast.AST) -> None:
        base = self.eval(target.value, frame)
        is_slice = isinstance(target.slice, ast.Slice)
        if any(f.kind == Kind.FLOW for f in base):
            whole = is_slice and target.slice.lower is None and target.slice.upper is None and target.slice.step is None
            if whole:
                cls = self.classify_list(value)
                if cls != "same":
                    self.mutate(target.value, "content", f"`{snippet(stmt)}` replaces the list's content", frame,
                                stmt, value=value)
                elif isinstance(target.value, ast.Name):
                    frame.env[target.value.id] = Val({replace(f, alias=True) if f.kind == Kind.FLOW else f
                                                      for f in value})
                return
            flows = {f.flow for f in base if f.kind == Kind.FLOW}
            if not is_slice and all(f.kind == Kind.ELEM and f.flow in flows for f in value):
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
        if Kind.GEN in kinds(base):
            self.gen_changed = f"`{snippet(stmt)}` changes the generator's settings"
            self.finding("changed", self.gen_changed, frame.at(stmt), frame)
        elif kinds(base) & {Kind.ELEM, Kind.FIELD} and target.attr not in NON_CHANNEL_FIELDS:
            self.finding("changed", f"`{snippet(stmt)}` changes an input record in place", frame.at(stmt), frame)

    def aug_assign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        if isinstance(stmt.target, ast.Name):
            current = frame.env.get(stmt.target.id, self.eval(stmt.target, frame))
            rhs = self.eval(stmt.value, frame)
            if any(f.kind == Kind.FLOW and f.alias and f.flow == "in" for f in current) and self.hook not in STR_HOOKS:
                self.mutate(stmt.target, "content", f"`{snippet(stmt)}` extends the input in place", frame, stmt)
            frame.env[stmt.target.id] = self.guarded(self.binop(stmt.op, current, rhs, stmt, frame), frame)
        else:
            self.eval(stmt.value, frame)
            if isinstance(stmt.target, ast.Subscript):
                self.mutate(stmt.target.value, "content", f"`{snippet(stmt)}` changes the input in place", frame, stmt)
            elif isinstance(stmt.target, ast.Attribute):
                self.store_attr(stmt.target, one(Kind.NEW), frame, stmt)

    def mutate(self, node: ast.expr, how: str, note: str, frame: Frame, stmt: ast.AST, value: Val | None = None) -> None:
        """An in-place change of the value ``node`` names: the input itself, or a local copy."""
        current = self.eval(node, frame)
        flows = [f for f in current if f.kind == Kind.FLOW]
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
            frame.env[node.id] = self.guarded(one(Kind.NEW, note=note, where=frame.at(stmt)), frame)

    def collect(self, name: str, value: Val, frame: Frame, stmt: ast.AST) -> None:
        """An element added to a local container (``out.append(x)``, ``out[k] = x``)."""
        current = frame.env.get(name, Val())
        if not (kinds(current) <= {Kind.CONST, Kind.FLOW, Kind.NEW, Kind.PAT, Kind.UNK, Kind.OTHER, Kind.RAND,
                                   Kind.CTXS}):
            return
        if any(f.kind == Kind.FLOW and f.alias for f in current):
            return
        elem_flows = {f.flow for f in value if f.kind == Kind.ELEM}
        if value and all(f.kind == Kind.ELEM for f in value) and len(elem_flows) == 1:
            flow = elem_flows.pop()
            unguarded = frame.guard is None
            if frame.full_loop and unguarded:
                added = one(Kind.FLOW, flow=flow, note="rebuilt element by element")
            elif frame.guard and frame.guard.startswith("pattern:"):
                added = one(Kind.PAT, name=frame.guard.removeprefix("pattern:"),
                            note=f"keeps elements depending on `{frame.guard.removeprefix('pattern:')}`",
                            where=frame.at(stmt))
            else:
                added = one(Kind.NEW, note=f"`{snippet(stmt)}` collects a subset or re-arrangement",
                            where=frame.at(stmt))
        elif any(f.kind in {Kind.FIELD, Kind.CTXS} and f.flow == "ctx" or f.kind == Kind.CTXS for f in value):
            added = one(Kind.CTXS, note="collects retrieved passage text", where=frame.at(stmt))
        else:
            added = self.derived(value, f"`{snippet(stmt)}`", frame.at(stmt))
        kept = Val(f for f in current if not (f.kind == Kind.CONST and f.value in ((), None)))
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
        pattern = next((f.name for f in value if f.kind == Kind.MATCH), None)
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
            return one(Kind.OTHER, note=snippet(node), where=frame.at(node))
        return method(node, frame)

    def e_Constant(self, node: ast.Constant, frame: Frame) -> Val:
        return one(Kind.CONST, value=node.value, where=frame.at(node), note=f"the literal {snippet(node, 40)}")

    def e_Name(self, node: ast.Name, frame: Frame) -> Val:
        name = node.id
        if name in frame.env:
            return frame.env[name]
        module = frame.module
        if name in module.patterns:
            return one(Kind.REGEX, name=name)
        if name in module.constants:
            return self.module_constant(module, name)
        if name in module.functions:
            return one(Kind.FUNC, name=name, value=(module, module.functions[name], -1))
        if name in module.classes:
            return one(Kind.CLASS, name=name, value=(module, module.classes[name]))
        if name in module.aliases:
            return one(Kind.MODULE, name=module.aliases[name])
        if name in module.imports:
            return self.imported(*module.imports[name])
        if name in markers.LOGGER_NAMES:
            return one(Kind.LOGGER)
        return one(Kind.OTHER, note=f"`{name}`", where=frame.at(node))

    def module_constant(self, module: Module, name: str) -> Val:
        key = hash(("const", module.path, name))
        if key in self.stack:
            return one(Kind.OTHER, note=name)
        self.stack.append(key)
        try:
            value = self.eval(module.constants[name], Frame(module, -1, {}, None))
        finally:
            self.stack.pop()
        if kinds(value) <= {Kind.CONST, Kind.REGEX, Kind.TUPLE}:
            return Val({replace(f, note=f"the constant {name}") if f.kind == Kind.CONST else f for f in value})
        return one(Kind.OTHER, note=f"the module value {name}")

    def imported(self, mod: str, attr: str) -> Val:
        if attr in RECORDS or attr == "DecodingParams":
            return one(Kind.CLASS, name=attr)
        source = module_source(mod)
        if source is not None:
            if attr in source.functions:
                return one(Kind.FUNC, name=attr, value=(source, source.functions[attr], -1))
            if attr in source.patterns:
                return one(Kind.REGEX, name=attr)
            if attr in source.constants:
                return self.module_constant(source, attr)
            if attr in source.classes:
                return one(Kind.CLASS, name=attr, value=(source, source.classes[attr]))
        return one(Kind.OTHER, name=f"{mod}.{attr}", note=f"`{attr}` imported from {mod}")

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
        if f.kind in {Kind.FLOW, Kind.ELEM, Kind.FIELD}:
            if f.kind == Kind.FLOW and f.flow != "genp":
                return one(Kind.OTHER, note=f".{attr} of the input")
            if attr in NON_CHANNEL_FIELDS:
                return one(Kind.OTHER, note=f".{attr}")
            path = attr if f.kind in {Kind.ELEM, Kind.FLOW} else f"{f.name}.{attr}"
            return one(Kind.FIELD, flow=f.flow, name=path)
        if f.kind == Kind.GEN:
            if attr == "params":
                if self.gen_changed:
                    return one(Kind.NEW, note=self.gen_changed)
                return one(Kind.FLOW, flow="genp", note="the generator's own settings")
            return one(Kind.GEN, name=attr)  # a bound method of the generator
        if f.kind == Kind.PLAIN:
            if attr == "text":
                return one(Kind.FLOW, flow="in", note="the plain generation")
            return one(Kind.OTHER, note=f"generation.{attr}")
        if f.kind == Kind.MODULE:
            source = module_source(f.name)
            if f.name in markers.REGEX_MODULES:
                return one(Kind.REMOD, name=attr)
            if attr in ("getLogger",) or f.name in {"logging", "warnings"}:
                return one(Kind.LOGGER)
            if source is not None:
                return self.imported(f.name, attr)
            return one(Kind.OTHER, note=f"{f.name}.{attr}")
        if f.kind == Kind.INST:
            module, cls = f.value
            for meth in cls.body:
                if isinstance(meth, ast.FunctionDef) and meth.name == attr:
                    if any(_decorator_name(d) == "property" for d in meth.decorator_list):
                        return self.call_function(module, meth, [], {}, Val({f}), -1, node, frame)
                    return one(Kind.FUNC, name=attr, value=(module, meth, -1), items=(Val({f}),))
            given = dict(f.items)
            if attr in given:
                return given[attr]
            return one(Kind.UNK, note=f"`{snippet(node, 50)}`: an attribute of a {f.name} the analysis cannot see",
                       where=frame.at(node))
        if f.kind == Kind.MATCH:
            return one(Kind.MATCH, name=f.name)
        if f.kind in {Kind.RAND, Kind.RNG}:
            return Val({f})
        if f.kind == Kind.CTXS:
            return one(Kind.OTHER)
        return one(Kind.OTHER, note=f"`{snippet(node, 50)}`", where=frame.at(node))

    def self_attr(self, attr: str, frame: Frame, node: ast.AST) -> Val:
        key = f"self.{attr}"
        if key in frame.env:
            return frame.env[key]
        scope = self.scope
        if scope is None:
            return one(Kind.OTHER, note=f"self.{attr}")
        found = scope.find(attr)
        if found is not None:
            idx, func = found
            if any(_decorator_name(d) in {"property", "cached_property"} for d in func.decorator_list):
                return self.call_function(scope.mro[idx][0], func, [], {}, frame.env["self"], idx, node, frame)
            return one(Kind.FUNC, name=attr, value=(scope.mro[idx][0], func, idx), items=(frame.env["self"],))
        on_self = scope.assigned_on_self(attr)
        declared = scope.class_attr(attr)
        if declared is not None and not on_self:
            idx, expr = declared
            value = self.eval(expr, Frame(scope.mro[idx][0], idx, {}, scope))
            if kinds(value) <= {Kind.CONST, Kind.REGEX, Kind.TUPLE}:
                return Val({replace(f, note=f"the class constant {attr}") if f.kind == Kind.CONST else f
                            for f in value})
        inits = [(i, v) for i, meth, v in on_self if meth == "__init__" and v is not None]
        if len(on_self) == 1 and len(inits) == 1:
            idx, expr = inits[0]
            value = self.eval(expr, Frame(scope.mro[idx][0], idx, {"self": one(Kind.SELF)}, scope))
            if kinds(value) <= {Kind.INST, Kind.REGEX, Kind.CONST, Kind.TUPLE}:
                return value
        if attr == "log":
            return one(Kind.OTHER, note="self.log")
        return one(Kind.OTHER, note=f"the state self.{attr}", where=frame.at(node))

    def e_Subscript(self, node: ast.Subscript, frame: Frame) -> Val:
        base = self.eval(node.value, frame)
        index = self.eval(node.slice, frame) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(node.slice, ast.Slice):
            for part in (node.slice.lower, node.slice.upper, node.slice.step):
                if part is not None:
                    self.eval(part, frame)
        out: set[Fact] = set()
        for f in base:
            if f.kind in {Kind.FLOW, Kind.PARTS}:
                s = node.slice
                if isinstance(s, ast.Slice):
                    whole = s.lower is None and s.upper is None
                    step_ok, step = (True, None) if s.step is None else const_of(self.eval(s.step, frame))
                    text = f.flow == "in" and self.hook in STR_HOOKS and f.kind == Kind.FLOW
                    if whole and step_ok and step in (None, 1):
                        out.add(replace(f, alias=False))
                    elif whole and step_ok and step == -1 and not text:
                        out.add(replace(f, alias=False, note="reversed"))
                        self.findings.append(Finding("order", f"`{snippet(node)}` re-orders", frame.at(node)))
                    else:
                        out.add(Fact(Kind.NEW, name=f"slice:{f.flow}",
                                     note=f"`{snippet(node)}` keeps a part of the input", where=frame.at(node)))
                else:
                    out.add(Fact(Kind.ELEM if f.kind == Kind.FLOW else Kind.PART, flow=f.flow, name=f.name))
            elif f.kind == Kind.TUPLE and index is not None:
                ok, i = const_of(index)
                if ok and isinstance(i, int) and -len(f.items) <= i < len(f.items):
                    out |= f.items[i]
                else:
                    out |= union(*f.items) if f.items else {Fact(Kind.OTHER)}
            elif f.kind == Kind.CONST:
                ok, i = const_of(index) if index is not None else (False, None)
                try:
                    out.add(Fact(Kind.CONST, value=_hashable(f.value[i]))) if ok else out.add(Fact(Kind.OTHER))
                except Exception:  # noqa: BLE001 - not subscriptable as folded
                    out.add(Fact(Kind.OTHER))
            elif f.kind == Kind.MATCH:
                out.add(f)
            elif f.kind in {Kind.NEW, Kind.PAT, Kind.UNK, Kind.RAND, Kind.CTXS}:
                out.add(f)
            elif f.kind == Kind.FIELD:
                out.add(Fact(Kind.NEW, note=f"`{snippet(node)}` keeps a part of a field", where=frame.at(node)))
            else:
                out.add(Fact(Kind.OTHER, note=snippet(node, 50)))
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
            return one(Kind.CONST, value=tuple(const_of(v)[1] for v in items), where=frame.at(node),
                       note=f"the literal `{snippet(node, 60)}`")
        return one(Kind.TUPLE, items=tuple(items), where=frame.at(node))

    def e_Dict(self, node: ast.Dict, frame: Frame) -> Val:
        values = [self.eval(v, frame) for v in node.values]
        for k in node.keys:
            if k is not None:
                self.eval(k, frame)
        if not node.keys:
            return one(Kind.CONST, value=(), note="an empty dict")
        return one(Kind.OTHER, items=tuple(values), note="a dict")

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
            return one(Kind.CONST, value="")
        if len(parts) == 1:
            return Val({replace(f, alias=False) for f in parts[0]})
        if all(const_of(p)[0] and isinstance(const_of(p)[1], str) for p in parts):
            return one(Kind.CONST, value="".join(const_of(p)[1] for p in parts))
        return self.rejoin(union(*parts), node, frame)

    def rejoin(self, value: Val, node: ast.AST, frame: Frame) -> Val:
        """Pieces put together into one text. Slices of the input joined with each other (or with
        what the analysis cannot see) may give the input back: undetermined, unless another piece
        is new content."""
        slices = {f for f in value if f.kind == Kind.NEW and f.name.startswith("slice:")}
        rest = value - slices
        if slices and not (kinds(rest) & {Kind.NEW, Kind.OTHER, Kind.RAND, Kind.RNG, Kind.CTXS} or
                           any(f.kind == Kind.CONST and f.value not in ("", None) for f in rest)):
            return one(Kind.UNK, note=f"`{snippet(node)}` puts pieces of the input back together (the same text "
                                   "or not, depending on the bounds)", where=frame.at(node))
        return self.derived(rest if slices and rest else value, f"`{snippet(node)}` builds a new text", frame.at(node))

    def derived(self, value: Val, note: str, where: str) -> Val:
        """A value computed from ``value``: the worst of what it is made of."""
        ks = kinds(value)
        if Kind.RAND in ks or Kind.RNG in ks:
            r = next(f for f in value if f.kind in {Kind.RAND, Kind.RNG})
            return one(Kind.RAND, note=f"{note} from a random draw ({r.note or 'an rng'})", where=where)
        if any(f.kind == Kind.CTXS or (f.kind == Kind.FIELD and f.flow == "ctx" and f.name.endswith("text"))
               for f in value):
            return one(Kind.CTXS, note=f"{note} with retrieved passage text", where=where)
        if ks & {Kind.NEW, Kind.OTHER, Kind.CONST}:
            src = next((f for f in value if f.kind == Kind.NEW), None)
            return one(Kind.NEW, note=src.note if src and src.note else note,
                       where=src.where if src and src.where else where)
        if Kind.PAT in ks:
            p = next(f for f in value if f.kind == Kind.PAT)
            return Val({p})
        if Kind.UNK in ks:
            return Val({next(f for f in value if f.kind == Kind.UNK)})
        return one(Kind.NEW, note=note, where=where)

    def e_BinOp(self, node: ast.BinOp, frame: Frame) -> Val:
        left, right = self.eval(node.left, frame), self.eval(node.right, frame)
        return self.binop(node.op, left, right, node, frame)

    def binop(self, op: ast.operator, left: Val, right: Val, node: ast.AST, frame: Frame) -> Val:
        lc, lv = const_of(left)
        rc, rv = const_of(right)
        if lc and rc:
            try:
                return one(Kind.CONST, value=_hashable(_fold(op, lv, rv)))
            except Exception:  # noqa: BLE001 - not foldable
                return one(Kind.OTHER)
        if isinstance(op, ast.Mod) and lc and lv == "%s":
            items = [f for f in right if f.kind == Kind.TUPLE]
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
        return any(f.kind == Kind.FLOW and f.flow == "in" and self.hook in STR_HOOKS or f.kind == Kind.CTXS
                   or (f.kind == Kind.FIELD and f.name.endswith(("text", "content"))) for f in v)

    def e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Val:
        v = self.eval(node.operand, frame)
        ok, c = const_of(v)
        if ok:
            try:
                return one(Kind.CONST, value={ast.Not: lambda x: not x, ast.USub: lambda x: -x,
                                           ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(node.op)](c))
            except Exception:  # noqa: BLE001
                return one(Kind.OTHER)
        if isinstance(node.op, ast.Not):
            return Val({f for f in v if f.kind == Kind.MATCH}) or one(Kind.OTHER)
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
            return one(Kind.CONST, value=isinstance(node.op, ast.And))
        return union(*values)

    def e_Compare(self, node: ast.Compare, frame: Frame) -> Val:
        operands = [self.eval(node.left, frame)] + [self.eval(c, frame) for c in node.comparators]
        consts = [const_of(v) for v in operands]
        if all(ok for ok, _ in consts):
            try:
                result, values = True, [c for _, c in consts]
                for op, a, b in zip(node.ops, values, values[1:]):
                    result = result and _compare(op, a, b)
                return one(Kind.CONST, value=bool(result))
            except Exception:  # noqa: BLE001
                return one(Kind.OTHER)
        matches = [f for v in operands for f in v if f.kind == Kind.MATCH]
        if matches:
            return Val({matches[0]})
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if isinstance(op, (ast.In, ast.NotIn)):
                lok, lval = const_of(left)
                rok, rval = const_of(right)
                if lok and isinstance(lval, str) or \
                        all(f.kind == Kind.CONST and isinstance(f.value, str) for f in left):
                    return one(Kind.MATCH, name=f"the literal(s) {sorted(f.value for f in left)[:4]}")
                if rok and isinstance(rval, (tuple, frozenset)):
                    return one(Kind.MATCH, name=f"the fixed list {list(rval)[:4]}")
        return one(Kind.OTHER, note=snippet(node, 50))

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
        return one(Kind.LAMBDA, name=snippet(node, 40), value=(frame.module, node, frame.owner), items=closure)

    def call_lambda(self, f: Fact, args, kwargs, node, frame) -> Val:
        module, lam, owner = f.value
        env = dict(f.items)
        params = [a.arg for a in lam.args.posonlyargs + lam.args.args]
        for i, p in enumerate(params):
            env[p] = args[i] if i < len(args) else kwargs.get(p, one(Kind.OTHER))
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
                    return one(Kind.CONST, value=(), note=f"`if {snippet(cond)}` is always false")
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
            if f.kind == Kind.TUPLE:
                elements |= {x for item in f.items for x in item}
        unchanged = bool(elt) and elt <= elements and not (kinds(elt) - {Kind.ELEM, Kind.PART, Kind.CONST}) and \
            not (kinds(elt) == {Kind.CONST})
        if full and not filters and len(elt) == 1 and next(iter(elt)).kind == Kind.FIELD and \
                next(iter(elt)).flow != "ctx" and \
                {f.flow for f in it if f.kind == Kind.FLOW} == {next(iter(elt)).flow}:
            column = next(iter(elt))
            return one(Kind.COLUMN, flow=column.flow, name=column.name, note=f"`{snippet(node)}`", where=where)
        if unchanged:
            if not filters:
                if full or kinds(it) <= {Kind.PARTS, Kind.FLOW}:
                    sources = [f for f in it if f.kind in {Kind.FLOW, Kind.PARTS}] + \
                        [x for f in it if f.kind in {Kind.ENUM, Kind.ZIP} for item in f.items for x in item
                         if x.kind in {Kind.FLOW, Kind.PARTS} and self.elements(Val({x})) & elt]
                    return Val({replace(f, alias=False) for f in sources}) or \
                        one(Kind.NEW, note="selects elements", where=where)
                return one(Kind.NEW, note=f"`{snippet(node)}` selects or re-arranges elements", where=where)
            pattern = next((p for _, p in filters if p), None)
            if all(p for _, p in filters):
                return one(Kind.PAT, name=pattern, note=f"keeps elements depending on `{pattern}`", where=where)
            cond = next(c for c, p in filters if not p)
            return one(Kind.NEW, note=f"`{snippet(node)}` drops elements where not `{snippet(cond, 50)}`", where=where)
        if any(f.kind == Kind.FIELD and f.flow == "ctx" or f.kind == Kind.CTXS
               or f.kind == Kind.ELEM and f.flow == "ctx" for f in elt):
            return one(Kind.CTXS, note=f"`{snippet(node)}` collects retrieved passages", where=where)
        if kinds(elt) <= {Kind.MATCH, Kind.CONST, Kind.OTHER} and Kind.MATCH in kinds(elt):
            return Val({f for f in elt if f.kind == Kind.MATCH})
        ks = kinds(elt)
        if ks & {Kind.RAND, Kind.NEW, Kind.OTHER, Kind.CONST, Kind.FIELD, Kind.TUPLE, Kind.PART,
                 Kind.ELEM} - {Kind.PAT} and \
                not (ks <= {Kind.ELEM, Kind.FIELD, Kind.PART} and not self.elements(it)):
            return self.derived(elt - {f for f in elt if f.kind in {Kind.ELEM, Kind.FIELD, Kind.PART}} or
                                one(Kind.NEW, note=f"`{snippet(node)}` changes elements", where=where),
                                f"`{snippet(node)}` changes elements", where)
        if Kind.PAT in ks:
            return Val({next(f for f in elt if f.kind == Kind.PAT)})
        if Kind.UNK in ks:
            return Val({next(f for f in elt if f.kind == Kind.UNK)})
        return one(Kind.NEW, note=f"`{snippet(node)}`", where=where)

    def is_full(self, it: Val) -> bool:
        """Iterating ``it`` visits every element of a hook input exactly once."""
        if not it:
            return False
        for f in it:
            if f.kind in {Kind.FLOW, Kind.COLUMN}:
                continue
            if f.kind in {Kind.ENUM, Kind.ZIP} and f.items and any(self.is_full(i) for i in f.items):
                continue
            return False
        return True

    def elements(self, it: Val) -> Val:
        out: set[Fact] = set()
        for f in it:
            if f.kind == Kind.FLOW:
                out.add(Fact(Kind.ELEM, flow=f.flow))
            elif f.kind == Kind.PARTS:
                out.add(Fact(Kind.PART, flow=f.flow, name=f.name))
            elif f.kind == Kind.COLUMN:
                out.add(Fact(Kind.FIELD, flow=f.flow, name=f.name))
            elif f.kind == Kind.ENUM:
                out.add(Fact(Kind.TUPLE, items=(one(Kind.OTHER, note="an index"), self.elements(f.items[0]))))
            elif f.kind == Kind.ZIP:
                out.add(Fact(Kind.TUPLE, items=tuple(self.elements(i) for i in f.items)))
            elif f.kind == Kind.CONST and isinstance(f.value, (tuple, frozenset, str)) and f.value:
                out |= {Fact(Kind.CONST, value=v) for v in f.value}
            elif f.kind == Kind.CONST:
                out.add(Fact(Kind.OTHER))
            elif f.kind == Kind.TUPLE:
                for item in f.items:
                    out |= item
            elif f.kind in {Kind.MATCH, Kind.NEW, Kind.PAT, Kind.UNK, Kind.RAND, Kind.CTXS, Kind.ELEM}:
                out.add(f if f.kind != Kind.ELEM else Fact(Kind.OTHER))
            else:
                out.add(Fact(Kind.OTHER, note=f.note))
        return Val(out)
