"""Calls in the hook dataflow: builtins, methods of the input and of the generator, regex and
random generators, records rebuilt from fields, and functions followed into the class, its
bases, the module and readable imported modules (anything else is an unknown call)."""

from __future__ import annotations

import ast
import builtins
from dataclasses import replace

from ragleak.audit import markers
from ragleak.audit.absval import (
    Kind,
    CASE_METHODS,
    CONST_NONE,
    MAX_DEPTH,
    NON_CHANNEL_FIELDS,
    PURE_BUILTINS,
    RECORDS,
    _RNG_FACTORIES,
    STR_HOOKS,
    _body,
    classify,
    const_of,
    Fact,
    Finding,
    Frame,
    _hashable,
    kinds,
    Module,
    one,
    snippet,
    union,
    Val,
)


class CallsMixin:
    """The call half of ``astinterp.Interpreter``."""


    def e_Call(self, node: ast.Call, frame: Frame) -> Val:
        func = node.func
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "super":
            return one(Kind.OTHER)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and \
                isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            return self.call_super(func.attr, node, frame)
        if isinstance(func, ast.Attribute) and func.attr == "setitem" and isinstance(func.value, ast.Name) \
                and func.value.id == "operator" and len(node.args) == 3 and not node.keywords \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            # `operator.setitem(x, k, v)` is `x[k] = v`
            target = ast.copy_location(ast.Subscript(value=node.args[0], slice=node.args[1], ctx=ast.Store()), node)
            self.store_item(target, self.eval(node.args[2], frame), frame, node)
            return CONST_NONE
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
        return self.call_function(self.scope.mro[idx][0], func, args, kwargs, frame.env.get("self", one(Kind.SELF)),
                                  idx, node, frame)

    def call_value(self, callee: Val, label: str, args, kwargs, node, frame) -> Val:
        out: set[Fact] = set()
        for f in callee:
            if f.kind == Kind.FUNC:
                module, fdef, owner = f.value
                self_val = f.items[0] if f.items else None
                out |= self.call_function(module, fdef, args, kwargs, self_val, owner, node, frame)
            elif f.kind == Kind.CLASS:
                out |= self.construct(f, args, kwargs, node, frame)
            elif f.kind == Kind.LAMBDA:
                out |= self.call_lambda(f, args, kwargs, node, frame)
            elif f.kind == Kind.REGEX:
                out |= one(Kind.OTHER)
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
                    return one(Kind.CONST, value=(str if name == "str" else float)(c))
                except Exception:  # noqa: BLE001
                    return one(Kind.OTHER)
            return Val({replace(f, alias=False) for f in first})
        if name in {"sorted", "reversed"} and args:
            if any(f.kind == Kind.FLOW for f in first):
                if text_flow and any(f.kind == Kind.FLOW and f.flow == "in" for f in first):
                    return one(Kind.NEW, note=f"`{snippet(node)}` re-orders characters", where=frame.at(node))
                self.findings.append(Finding("order", f"`{snippet(node)}` re-orders", frame.at(node)))
                return Val({replace(f, alias=False) for f in first})
            return self.derived(first, f"`{snippet(node)}`", frame.at(node)) if first else one(Kind.OTHER)
        if name == "enumerate" and args:
            return one(Kind.ENUM, items=(first,))
        if name == "zip":
            return one(Kind.ZIP, items=tuple(args))
        if name in {"any", "all"}:
            matches = {f for f in first if f.kind == Kind.MATCH}
            return Val(matches) if matches else one(Kind.OTHER)
        if name in {"min", "max", "sum", "abs", "round", "int"}:
            if all(const_of(a)[0] for a in args) and args:
                try:
                    return one(Kind.CONST, value=_hashable(getattr(builtins, name)(*[const_of(a)[1] for a in args])))
                except Exception:  # noqa: BLE001
                    return one(Kind.OTHER)
            if name in {"min", "max"} and len(args) == 1 and not (kinds(first) & {Kind.FLOW, Kind.FIELD, Kind.RAND}):
                return one(Kind.OTHER)
            flowish = union(*args)
            if kinds(flowish) & {Kind.FIELD, Kind.FLOW, Kind.RAND, Kind.NEW, Kind.PAT, Kind.UNK}:
                return self.derived(union(flowish, one(Kind.NEW, note=f"`{snippet(node)}` changes the value",
                                                       where=frame.at(node))),
                                    f"`{snippet(node)}` changes the value", frame.at(node))
            return one(Kind.OTHER)
        if name in {"setattr"} and len(args) >= 2:
            return self.set_attribute(args[0], node, frame)
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and \
                node.args[0].id == "self" and isinstance(node.args[1], ast.Constant) and "self" in frame.env:
            return self.self_attr(str(node.args[1].value), frame, node)
        if name in PURE_BUILTINS:
            return one(Kind.OTHER, note=f"{name}(...)")
        callee = self.e_Name(ast.Name(id=name, ctx=ast.Load(), lineno=node.lineno), frame)
        return self.call_value(callee, name, args, kwargs, node, frame)

    def set_attribute(self, target: Val, node: ast.Call, frame: Frame) -> Val:
        """``setattr(x, ...)`` / ``object.__setattr__(x, ...)``: a change when ``x`` is an input
        record or the generator."""
        if kinds(target) & {Kind.ELEM, Kind.FIELD}:
            self.finding("changed", f"`{snippet(node)}` changes an input record in place", frame.at(node), frame)
        elif Kind.GEN in kinds(target):
            self.gen_changed = f"`{snippet(node)}` changes the generator's settings"
            self.finding("changed", self.gen_changed, frame.at(node), frame)
        return CONST_NONE

    def call_method(self, func: ast.Attribute, args, kwargs, node: ast.Call, frame: Frame) -> Val:
        attr = func.attr
        recv_node = func.value
        if isinstance(recv_node, ast.Name) and recv_node.id == "object" and attr == "__setattr__" and args:
            return self.set_attribute(args[0], node, frame)
        if isinstance(recv_node, ast.Name) and recv_node.id == "self" and "self" in frame.env and self.scope:
            found = self.scope.find(attr)
            if found is not None and f"self.{attr}" not in frame.env:
                idx, fdef = found
                return self.call_function(self.scope.mro[idx][0], fdef, args, kwargs, frame.env["self"], idx, node,
                                          frame)
        receiver = self.eval(recv_node, frame)
        if attr in {"append", "extend", "insert", "add"} and isinstance(recv_node, ast.Name) and args and \
                recv_node.id in frame.env and not any(f.kind == Kind.FLOW and f.alias for f in receiver) and \
                kinds(receiver) <= {Kind.CONST, Kind.FLOW, Kind.NEW, Kind.PAT, Kind.UNK, Kind.OTHER, Kind.RAND,
                                    Kind.CTXS, Kind.COLUMN}:
            item = args[-1]
            self.collect(recv_node.id, self.elements(item) if attr == "extend" else item, frame, node)
            return CONST_NONE
        recv_name = recv_node.id if isinstance(recv_node, ast.Name) else \
            recv_node.attr if isinstance(recv_node, ast.Attribute) else ""
        if attr in _RNG_FACTORIES and not (kinds(receiver) & {Kind.FLOW, Kind.ELEM, Kind.FIELD, Kind.GEN}):
            return one(Kind.RNG, note=f"`{snippet(node, 50)}`", where=frame.at(node))
        out: set[Fact] = set()
        regex_named = bool(recv_name) and bool(markers.PATTERN_NAME.search(recv_name))
        for f in receiver:
            out |= self.method_on(f, attr, args, kwargs, node, frame, regex_named, recv_node)
        return Val(out)

    def method_on(self, f: Fact, attr: str, args, kwargs, node, frame: Frame, regex_named: bool, recv_node) -> Val:
        where = frame.at(node)
        if f.kind == Kind.LOGGER or (f.kind == Kind.OTHER and isinstance(recv_node, ast.Name)
                                  and recv_node.id in markers.LOGGER_NAMES):
            return CONST_NONE
        if f.kind == Kind.REMOD or f.kind == Kind.MODULE and f.name in markers.REGEX_MODULES:
            return self.regex_call(attr, args, kwargs, node, frame, module_call=True)
        if f.kind == Kind.REGEX or \
                (regex_named and attr in markers.REGEX_METHODS and f.kind in {Kind.OTHER, Kind.CONST}):
            return self.regex_call(attr, args, kwargs, node, frame, module_call=False,
                                   name=f.name or snippet(recv_node))
        if f.kind == Kind.MODULE and f.name == "copy" and attr in {"copy", "deepcopy"} and len(args) == 1:
            return Val({replace(x, alias=False) for x in args[0]})
        if f.kind == Kind.MODULE:
            callee = self.imported(f.name, attr)
            return self.call_value(callee, f"{f.name}.{attr}", args, kwargs, node, frame)
        if f.kind == Kind.FUNC or f.kind == Kind.INST:
            callee = self.attr_of(f, ast.Attribute(value=recv_node, attr=attr, ctx=ast.Load()), frame) \
                if f.kind == Kind.INST else Val({f})
            return self.call_value(callee, attr, args, kwargs, node, frame)
        if f.kind == Kind.RNG:
            if attr == "shuffle" and args:
                self.mutate(node.args[0], "order", f"`{snippet(node)}` re-orders", frame, node)
                return CONST_NONE
            if attr == "permutation" and args and kinds(args[0]) & {Kind.FLOW}:
                return Val({replace(x, alias=False) for x in args[0]})
            return one(Kind.RAND, note=f"`{snippet(node, 60)}`", where=where)
        if f.kind == Kind.GEN:
            return self.generator_call(f, attr, args, kwargs, node, frame)
        if f.kind == Kind.MATCH:
            return one(Kind.MATCH, name=f.name)
        if f.kind in {Kind.FLOW, Kind.ELEM, Kind.FIELD, Kind.PARTS, Kind.PART, Kind.CTXS, Kind.CONST}:
            return self.value_method(f, attr, args, kwargs, node, frame)
        if f.kind in {Kind.PAT, Kind.NEW, Kind.RAND, Kind.UNK}:
            if attr in {"strip", "lstrip", "rstrip", "copy", "model_copy"} and not args:
                return Val({f})
            if attr in {"sub", "subn", "replace"}:
                return Val({f})
            return self.derived(union(Val({f}), *args, *kwargs.values()), f"`{snippet(node)}`", where)
        if attr in {"startswith", "endswith"} and args and all(x.kind == Kind.CONST for a in args[:1] for x in a):
            return one(Kind.MATCH, name=f"{attr}({', '.join(snippet(a, 30) for a in node.args)})")
        if f.kind == Kind.OTHER and \
                attr in {"append", "extend", "add", "insert", "update", "setdefault", "__setitem__"}:
            return CONST_NONE  # state of the defense, not the hook's channel
        return self.unknown(f"{snippet(recv_node, 40)}.{attr}", args, kwargs, node, frame, receiver=Val({f}))

    def regex_call(self, attr, args, kwargs, node, frame, module_call: bool, name: str = "") -> Val:
        where = frame.at(node)
        if module_call:
            if attr == "compile":
                ok, c = const_of(args[0]) if args else (False, None)
                return one(Kind.REGEX, name=repr(c) if ok else snippet(node, 50))
            pattern = args[0] if args else Val()
            ok, c = const_of(pattern)
            name = repr(c) if ok else snippet(node.args[0], 40) if node.args else "a pattern"
            args = args[1:]
        if attr in {"sub", "subn"}:
            target = args[1] if len(args) > 1 else kwargs.get("string", Val())
            if not (kinds(target) - {Kind.CONST}):
                return one(Kind.OTHER)
            if Kind.UNK in kinds(target) and not (kinds(target) & {Kind.FLOW, Kind.FIELD, Kind.PART}):
                return Val({f for f in target if f.kind == Kind.UNK})
            if Kind.CTXS in kinds(target):
                return Val({f for f in target if f.kind == Kind.CTXS})
            return one(Kind.PAT, name=name, note=f"`{snippet(node, 70)}` rewrites matches of {name}", where=where)
        if attr in markers.REGEX_METHODS:
            return one(Kind.MATCH, name=name)
        return one(Kind.OTHER)

    def value_method(self, f: Fact, attr: str, args, kwargs, node, frame) -> Val:
        where = frame.at(node)
        if f.kind == Kind.CONST:
            if attr == "join" and isinstance(f.value, str) and args:
                return self.join_call(f.value, args[0], node, frame)
            if attr == "format" and isinstance(f.value, str):
                if f.value == "{}" and len(args) == 1 and not kwargs:
                    return Val({replace(x, alias=False) for x in args[0]})
                return self.concat([Val({f}), *args, *kwargs.values()], node, frame)
            if all(const_of(a)[0] for a in args):
                try:
                    return one(Kind.CONST, value=_hashable(getattr(f.value, attr)(*[const_of(a)[1] for a in args])))
                except Exception:  # noqa: BLE001
                    return one(Kind.OTHER)
            return one(Kind.OTHER)
        if attr in {"copy"} and not args:
            return Val({replace(f, alias=False)})
        if attr == "model_copy":
            return self.model_copy(f, kwargs, node, frame)
        if attr in markers.MUTATING_METHODS and f.kind == Kind.FLOW:
            how = "order" if attr in {"sort", "reverse"} else "content"
            if attr in {"append", "extend", "insert"} and isinstance(node.func.value, ast.Name) and not f.alias:
                self.collect(node.func.value.id, args[0] if args else Val(), frame, node)
                return CONST_NONE
            self.mutate(node.func.value, how, f"`{snippet(node)}`", frame, node)
            return CONST_NONE
        if attr in {"index", "count", "find", "rfind", "isdigit", "isalpha", "isalnum", "isupper", "islower",
                    "isspace", "istitle", "keys", "values", "items", "get", "__len__"}:
            return one(Kind.OTHER)
        if attr in {"startswith", "endswith"}:
            return one(Kind.MATCH, name=f"{attr}({', '.join(snippet(a, 30) for a in node.args)})")
        if attr in {"strip", "lstrip", "rstrip"} and not args:
            return Val({replace(f, alias=False)})
        if attr in {"encode", "decode"} and not kwargs and all(const_of(a)[0] for a in args):
            return Val({replace(f, alias=False)})  # another representation of the same text
        if attr in CASE_METHODS or attr in {"strip", "lstrip", "rstrip", "center", "ljust", "rjust", "zfill",
                                             "encode", "decode", "expandtabs"}:
            return one(Kind.NEW, note=f"`{snippet(node)}` changes the text", where=where)
        if attr == "split":
            sep = const_of(args[0])[1] if args else None
            if args and not const_of(args[0])[0] or len(args) > 1 or kwargs:
                return one(Kind.NEW, note=f"`{snippet(node)}`", where=where)
            return one(Kind.PARTS, flow=f.flow if f.kind != Kind.CTXS else "ctx", name=repr(sep))
        if attr == "replace" and len(args) >= 2:
            old, new = args[0], args[1]
            if const_of(old)[0] and const_of(new)[0] and const_of(old)[1] == const_of(new)[1]:
                return Val({replace(f, alias=False)})
            if all(x.kind == Kind.CONST for x in old):
                return one(Kind.PAT, name=f"the literal(s) {sorted(repr(x.value) for x in old)[:4]}",
                           note=f"`{snippet(node, 70)}` rewrites fixed strings", where=where)
            if Kind.MATCH in kinds(old):
                return one(Kind.PAT, name=next(x.name for x in old if x.kind == Kind.MATCH),
                           note=f"`{snippet(node, 70)}` rewrites pattern matches", where=where)
            return self.derived(union(old, new, one(Kind.NEW)), f"`{snippet(node)}` replaces text", where)
        if attr == "join" and f.kind in {Kind.FLOW, Kind.FIELD} and args:
            return self.derived(union(args[0], one(Kind.NEW)), f"`{snippet(node)}`", where)
        return self.unknown(f"{snippet(node.func, 40)}", args, kwargs, node, frame, receiver=Val({f}))

    def join_call(self, sep: str, seq: Val, node, frame) -> Val:
        out: set[Fact] = set()
        for f in seq:
            if f.kind == Kind.FLOW and f.flow == "in" and self.hook in STR_HOOKS and sep == "":
                out.add(replace(f, alias=False))
            elif f.kind == Kind.PARTS and (repr(sep) == f.name or f.name == "None" and sep == " "):
                out.add(Fact(Kind.FLOW, flow=f.flow) if f.flow == "in" else Fact(Kind.FIELD, flow=f.flow, name="text"))
            elif f.kind == Kind.TUPLE and len(f.items) == 1 and sep == "":
                out |= f.items[0]
            elif f.kind == Kind.TUPLE:
                out |= self.concat(list(f.items), node, frame)
            else:
                out.add(f)
        identity = {f for f in out if f.kind == Kind.FLOW or f.kind == Kind.FIELD and f.flow != "ctx"}
        pieces = Val(out) - identity
        if not pieces:
            return Val(out)
        return Val(identity) | self.rejoin(pieces, node, frame)

    def model_copy(self, f: Fact, kwargs, node, frame) -> Val:
        where = frame.at(node)
        update = kwargs.get("update")
        if update is None:
            return Val({replace(f, alias=False)})
        if f.kind not in {Kind.ELEM, Kind.FIELD, Kind.FLOW}:
            return self.derived(union(Val({f}), update), f"`{snippet(node)}`", where)
        dict_node = next((k.value for k in node.keywords if k.arg == "update"), None)
        if not isinstance(dict_node, ast.Dict) or any(k is None for k in dict_node.keys):
            return self.unknown_or_derived(update, f"`{snippet(node)}` updates fields the analysis cannot see", where)
        prefix = "" if f.kind in {Kind.ELEM, Kind.FLOW} else f.name + "."
        changed = []
        for key, value_node in zip(dict_node.keys, dict_node.values):
            ok, k = const_of(self.eval(key, frame))
            if not ok:
                return one(Kind.UNK, note=f"`{snippet(node)}`: a computed field name", where=where)
            if k in NON_CHANNEL_FIELDS:
                continue
            value = self.eval(value_node, frame)
            if not self.is_field(value, f.flow, prefix + k):
                changed.append(value)
        if not changed:
            return Val({replace(f, alias=False)})
        return self.field_change(union(*changed), f"`{snippet(node, 80)}` changes a field", where)

    def is_field(self, value: Val, flow: str, path: str) -> bool:
        return bool(value) and all(x.kind == Kind.FIELD and x.flow == flow and x.name == path for x in value)

    def field_change(self, values: Val, note: str, where: str) -> Val:
        ks = kinds(values)
        if Kind.CTXS in ks:
            return one(Kind.CTXS, note=note, where=where)
        if ks & {Kind.RAND, Kind.NEW, Kind.OTHER, Kind.CONST, Kind.ELEM, Kind.FIELD, Kind.TUPLE, Kind.PART}:
            return self.derived(Val({x for x in values if x.kind not in {Kind.FIELD, Kind.ELEM, Kind.PART}}) or
                                one(Kind.NEW, note=note, where=where), note, where)
        if Kind.PAT in ks:
            return Val({next(x for x in values if x.kind == Kind.PAT)})
        if Kind.UNK in ks:
            return Val({next(x for x in values if x.kind == Kind.UNK)})
        return one(Kind.NEW, note=note, where=where)

    def unknown_or_derived(self, value: Val, note: str, where: str) -> Val:
        if Kind.UNK in kinds(value):
            return one(Kind.UNK, note=note, where=where)
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
                          for v in values.values() for x in v if x.kind == Kind.FIELD}
            for flow, prefix in candidates:
                pre = f"{prefix}." if prefix else ""
                if len(values) == len(fields) and all(self.is_field(values[k], flow, pre + k) for k in fields):
                    return one(Kind.ELEM, flow=flow) if not prefix else one(Kind.FIELD, flow=flow, name=prefix)
            return self.field_change(union(*values.values()) if values else one(Kind.NEW),
                                     f"`{snippet(node, 80)}` builds a new record", where)
        if name == "DecodingParams":
            return one(Kind.NEW, note=f"`{snippet(node, 80)}` sets decoding parameters of its own", where=where)
        if f.value is not None:
            module, cls = f.value
            fields = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            given = dict(zip(fields, args)) | kwargs
            return one(Kind.INST, name=name, value=(module, cls), items=tuple(sorted(given.items())))
        return self.unknown(name, args, kwargs, node, frame)

    def generator_call(self, f: Fact, attr: str, args, kwargs, node, frame) -> Val:
        where = frame.at(node)
        method = f.name or attr
        if f.name:  # a bound method value called: generator.generate stored in a local
            attr = f.name
        if attr == "render":
            return one(Kind.OTHER, note="a rendered prompt")
        if attr != "generate":
            return self.unknown(f"generator.{method}", args, kwargs, node, frame, receiver=Val({f}))
        messages = args[0] if args else kwargs.get("messages", Val())
        params = args[1] if len(args) > 1 else kwargs.get("params", CONST_NONE)
        if self.gen_changed:
            return one(Kind.NEW, note=self.gen_changed, where=where)
        msg_ks = kinds(messages)
        if msg_ks == {Kind.FLOW} and all(x.flow == "msgs" for x in messages):
            params_ok = all(x.kind == Kind.FLOW and x.flow == "genp" or x.kind == Kind.CONST and x.value is None
                            for x in params)
            if params_ok:
                return one(Kind.PLAIN, note="the plain generation")
            if Kind.UNK in kinds(params):
                return one(Kind.UNK, note=f"`{snippet(node, 70)}`: decoding parameters the analysis cannot see",
                           where=where)
            return one(Kind.NEW, note=f"`{snippet(node, 80)}` changes the decoding parameters", where=where)
        if Kind.UNK in msg_ks:
            return one(Kind.UNK, note=f"`{snippet(node, 70)}`: messages the analysis cannot see", where=where)
        return one(Kind.NEW, note=f"`{snippet(node, 80)}` generates from changed messages", where=where)

    def unknown(self, label: str, args, kwargs, node, frame, receiver: Val = Val()) -> Val:
        everything = union(receiver, *args, *kwargs.values())
        where = frame.at(node)
        ks = kinds(everything)
        # the hand-off is recorded before anything returns: `operator.setitem(candidates, i, noisy)`
        # hands the input to a call with a random draw in its arguments, and may change it in place
        for a in args:
            if any(x.kind == Kind.FLOW and x.alias and x.flow == "in" for x in a) and self.hook not in STR_HOOKS:
                self.findings.append(Finding("unknown", f"the input is handed to `{label}`, which may change it in "
                                                        "place (not followed)", where))
        if ks & {Kind.RNG, Kind.RAND}:
            return one(Kind.RAND, note=f"`{snippet(node, 60)}` draws from a random generator", where=where)
        if ks & {Kind.FLOW, Kind.ELEM, Kind.FIELD, Kind.PART, Kind.PARTS, Kind.PLAIN, Kind.GEN, Kind.CTXS, Kind.PAT,
                 Kind.UNK, Kind.MATCH}:
            return one(Kind.UNK, note=f"`{snippet(node, 60)}`: `{label}` is not followed (its source is outside the "
                                   "class, its bases and the modules the audit can read)", where=where)
        return one(Kind.OTHER, note=f"`{snippet(node, 50)}`", where=where)

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
            env["self"] = self_val if self_val is not None else one(Kind.SELF)
            params = params[1:]
        defaults = fdef.args.defaults
        for i, p in enumerate(params):
            if i < len(args):
                env[p] = args[i]
            elif p in kwargs:
                env[p] = kwargs[p]
            else:
                d = len(params) - len(defaults)
                env[p] = self.eval(defaults[i - d], Frame(module, owner, {}, self.scope)) if i >= d else one(Kind.OTHER)
        for a in fdef.args.kwonlyargs:
            env[a.arg] = kwargs.get(a.arg, one(Kind.OTHER))
        if fdef.args.vararg:
            env[fdef.args.vararg.arg] = one(Kind.TUPLE, items=tuple(args[len(params):]))
        if fdef.args.kwarg:
            env[fdef.args.kwarg.arg] = one(Kind.OTHER)
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
