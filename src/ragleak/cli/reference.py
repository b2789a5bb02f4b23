"""docs/reference.md, generated: every field of a grid file and every built-in plugin's parameters.

The page is rendered from the pydantic models a grid file is validated with (``GridConfig``,
``StackConfig`` with its decoding settings, ``TargetConfig``) and from each registered attack's,
defense's and corpus's ``Params`` model, so it says what the code accepts; the packaged query
pools are listed from the package data and the grid's exit codes from ``cli.grid``'s ``EXIT_*``
constants. ``tests/test_reference_docs.py`` renders it again and fails when the committed page
differs. Regenerate with ``python -m ragleak.cli.reference > docs/reference.md``.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

REGENERATE = "python -m ragleak.cli.reference > docs/reference.md"
LONG_DEFAULT = 60  # a longer default (the system prompt) is cut, so the table stays readable


def _type(annotation: Any) -> str:
    """A readable type: ``int | None``, ``list[str]``, ``'single' | 'multi'``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else _type(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return "path" if issubclass(annotation, Path) else annotation.__name__
    return str(annotation).replace("typing.", "")


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(see below)" if type(value).model_fields else "{}"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) > LONG_DEFAULT:
        text = text[: LONG_DEFAULT - 3] + "..."
    return f"`{text}`".replace("|", "\\|")


def _constraints(field) -> str:
    out = []
    for item in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "min length"),
                           ("pattern", "matches")):
            value = getattr(item, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return ", ".join(out)


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def fields_table(model: type[BaseModel], prefix: str = "") -> list[str]:
    """One row per field (nested models' fields as ``parent.child`` rows after it)."""
    rows, nested = [], []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = field.annotation
        rows.append(f"| `{key}` | {_type(annotation)} | {_default(field)} | {_cell(_constraints(field))} | "
                    f"{_cell(field.description)} |")
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and annotation.model_fields:
            nested.append((annotation, f"{key}."))
    for sub, sub_prefix in nested:
        rows.extend(fields_table(sub, sub_prefix))
    return rows


def table(model: type[BaseModel], prefix: str = "") -> list[str]:
    if not model.model_fields:
        return ["No parameters."]
    return ["| field | type | default | constraint | meaning |", "|---|---|---|---|---|", *fields_table(model, prefix)]


def _builtin(registry) -> list[tuple[str, type]]:
    """The registry's entries that ship with ragleak (an installed third-party plugin is left out,
    so the page does not depend on the environment it is rendered in)."""
    out = []
    for name in registry.names():
        cls = registry.get(name)
        if cls.__module__.startswith("ragleak."):
            out.append((name, cls))
    return out


def _summary(cls: type) -> str:
    text = getattr(cls, "description", "") or (inspect.getdoc(cls) or "").split("\n\n")[0]
    return _cell(text)


def plugin_sections(title: str, registry, facts) -> list[str]:
    out = [f"## {title}", ""]
    for name, cls in _builtin(registry):
        out += [f"### `{name}`", "", _summary(cls), ""]
        extra = facts(cls)
        if extra:
            out += [extra, ""]
        out += [*table(cls.Params), ""]
    return out


def _attack_facts(cls) -> str:
    return (f"Version {cls.version}; threat model {cls.threat_model}; default budget {cls.default_budget} "
            f"queries{'' if cls.adaptive else '; fixed queries (not adaptive)'}.")


def _defense_facts(cls) -> str:
    eps = f"the grid's `epsilons` set `{cls.epsilon_param}`" if cls.epsilon_param else "the epsilon axis is inert"
    hooks = ", ".join(sorted(cls.hooks)) or "none"
    return f"Version {cls.version}; hooks: {hooks}; {eps}."


def _corpus_facts(cls) -> str:
    return f"Version {cls.version}; kind {cls.kind}."


def pools_section() -> list[str]:
    from ragleak.attacks.pools import load_pool, pool_names

    out = ["## Query pools", "",
           "Attacks that take a `pool` (and `pool_version`) read one of these packaged files "
           "(`ragleak/data/attacks/NAME.vVERSION.json`).", "",
           "| pool | version | queries | description |", "|---|---|---|---|"]
    for entry in pool_names():
        name, _, version = entry.partition("@")
        pool = load_pool(name, version)
        out.append(f"| `{name}` | {version} | {len(pool.items)} | {_cell(pool.description)} |")
    return out + [""]


def exit_code_constants(module, source: str | None = None) -> list[tuple[str, int, str]]:
    """``(name, value, comment)`` for each integer ``EXIT_*`` constant of ``module``, in source
    order; the comment is the ``#:`` lines above its assignment (``source``: the module's source,
    read from its file when None)."""
    source = inspect.getsource(module) if source is None else source
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        # ``EXIT_OK, EXIT_GATES = 0, 1`` names several at once
        names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
        for target in names:
            if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                value = getattr(module, target.id, None)
                if not isinstance(value, int) or isinstance(value, bool):
                    continue
                comment, i = [], node.lineno - 2
                while i >= 0 and lines[i].strip().startswith("#:"):
                    comment.insert(0, lines[i].strip()[2:].strip())
                    i -= 1
                out.append((target.id, value, " ".join(comment)))
    return out


def exit_codes_section() -> list[str]:
    from ragleak.cli import grid as grid_cli

    out = ["## Exit codes of `ragleak grid`", ""]
    codes = exit_code_constants(grid_cli)
    if not codes:
        return out + ["`ragleak.cli.grid` declares no `EXIT_*` constants yet: the codes are to be documented "
                      "here by the lead.", ""]
    ordered = sorted(codes, key=lambda c: c[1])
    if any(comment for _, _, comment in codes):
        out += ["| code | constant | meaning |", "|---|---|---|"]
        out += [f"| {value} | `{name}` | {_cell(comment)} |" for name, value, comment in ordered]
    else:
        out += ["| code | constant |", "|---|---|", *(f"| {value} | `{name}` |" for name, value, _ in ordered)]
    # the module's own account of the codes, where its docstring gives one
    story = [p for p in (inspect.getdoc(grid_cli) or "").split("\n\n") if p.startswith("Exit codes")]
    return out + ["", *(" ".join(p.split()) for p in story), ""]


def render() -> str:
    from ragleak.attacks import ATTACKS
    from ragleak.config import StackConfig, TargetConfig
    from ragleak.corpora import CORPORA
    from ragleak.defenses import DEFENSES
    from ragleak.grid.spec import GridConfig

    grid_fields = {k: v for k, v in GridConfig.model_fields.items() if k not in ("stack", "target")}
    lines = [
        "# Reference: grid files and plugin parameters",
        "",
        "<!-- generated by `" + REGENERATE + "`: do not edit by hand; "
        "tests/test_reference_docs.py fails when this page and the code disagree -->",
        "",
        "Every field a grid YAML file (`ragleak grid --config FILE`) accepts, every parameter of the "
        "built-in attacks, defenses and corpora (the values under `attack_params`, `defense_params` and "
        "`corpus_params`, keyed by plugin name), the packaged query pools and the grid's exit codes. "
        "Generated from the pydantic models the file is validated with, so it says what the code "
        "accepts. Unknown fields are errors everywhere.",
        "",
        "## The grid file",
        "",
        "| field | type | default | constraint | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, field in grid_fields.items():
        lines.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {_cell(_constraints(field))} | "
                     f"{_cell(field.description)} |")
    lines += ["", "### `stack:` (the built-in stack and the models every cell uses)", "", *table(StackConfig, "stack."),
              "", "### `target:` (what is audited)", "", *table(TargetConfig, "target."), ""]
    lines += plugin_sections("Attacks (`attacks:`, `attack_params:`)", ATTACKS, _attack_facts)
    lines += pools_section()
    lines += plugin_sections("Defenses (`defenses:`, `defense_params:`)", DEFENSES, _defense_facts)
    lines += plugin_sections("Corpora (`corpora:`, `corpus_params:`)", CORPORA, _corpus_facts)
    lines += exit_codes_section()
    return "\n".join(_squeeze(lines)).rstrip("\n") + "\n"


def _squeeze(lines: Iterable[str]) -> list[str]:
    """No two blank lines in a row (Markdown lint, and a stable page)."""
    out: list[str] = []
    for line in lines:
        if line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return out


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
