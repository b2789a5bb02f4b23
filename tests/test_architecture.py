"""The layers of docs/architecture.md, checked over every module's imports.

Each module of ``src/ragleak`` belongs to one layer (the longest matching prefix in ``LAYERS``).
A module may import only from its own layer or a lower one; this covers module-level and
function-local imports and the registries' lazy ``"module:attribute"`` targets, but not imports
under ``if TYPE_CHECKING:`` (they never run). Modules must not import each other in a circle, and
neither must the units of the table (packages, or the parts of a package the table names). The table below is the one docs/architecture.md shows; a test keeps
the two equal.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"

# Bottom to top. An entry is a module or package below ``ragleak``; a module belongs to its
# longest matching entry. ``pipeline`` sits above ``defenses`` (it runs their hooks), while the
# parts it drives (``rag``: the generator, the prompt builder, the index) sit below them.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("errors", "records", "params", "registry", "files", "lcs", "context")),
    ("parts", ("rag", "nlp", "corpora")),
    ("config", ("config",)),
    ("accounting", ("accounting",)),
    ("defenses", ("defenses",)),
    ("pipeline", ("pipeline",)),
    ("stack", ("stack", "testing", "verify")),
    ("attacks", ("attacks",)),
    ("metrics", ("metrics",)),
    ("measure", ("measure",)),
    ("audit", ("audit",)),
    ("grid", ("grid",)),
    ("report", ("report",)),
    ("entry points", ("cli", "serve")),
]

@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (the deepest name that is a module of ragleak)
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "ragleak").rglob("*.py"))}


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    return skip


_LAZY = re.compile(r"^(ragleak(?:\.\w+)+):\w+$")  # a registry's "module:attribute" target


def imports_of(name: str, text: str, is_package: bool, known: set[str] | dict[str, Path]) -> list[Import]:
    """Every ragleak import of module ``name`` whose source is ``text``; ``known`` names the modules."""
    tree = ast.parse(text)
    skip = _type_checking_nodes(tree)
    package = name if is_package else name.rpartition(".")[0]

    def resolve(dotted: str) -> str | None:
        parts = dotted.split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in known), None)

    found: list[Import] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import sub`` imports the submodule pkg.sub
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := _LAZY.match(node.value)):
            targets = [m.group(1)]  # a registry loads it when the name is looked up, never at import
        for target in filter(None, map(resolve, targets)):
            if target != name:
                found.append(Import(name, target, node.lineno))
    return found


@cache
def imports() -> tuple[Import, ...]:
    return tuple(i for name, path in modules().items()
                 for i in imports_of(name, path.read_text(encoding="utf-8"), _is_package(name), modules()))


def _entries() -> dict[str, int]:
    table: dict[str, int] = {}
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            assert entry not in table, f"{entry} is in two layers"
            table[entry] = rank
    return table


def unit(module: str) -> str:
    """The table entry a module belongs to (its longest matching prefix)."""
    rel = module.removeprefix("ragleak").lstrip(".")
    parts = rel.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in _entries():
            return ".".join(parts[:n])
    raise KeyError(module)


def layer(module: str) -> int:
    return _entries()[unit(module)]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    missing = [m for m in modules() if m != "ragleak" and _unit_or_none(m) is None]
    assert not missing, f"add these to LAYERS (and to docs/architecture.md): {missing}"


def _unit_or_none(module: str) -> str | None:
    try:
        return unit(module)
    except KeyError:
        return None


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{i.source} (layer {LAYERS[layer(i.source)][0]}) imports {i.target} "
        f"(layer {LAYERS[layer(i.target)][0]}) at line {i.line}"
        for i in imports()
        if i.source != "ragleak" and i.target != "ragleak" and layer(i.target) > layer(i.source)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle_between_modules():
    """Function-local imports count too: an import moved into a function to dodge a circle at
    import time still leaves two files that need each other."""
    edges: dict[str, set[str]] = {}
    for i in imports():
        # importing a.b.c runs the __init__ of a.b too, unless the importer is already inside it
        chain = i.target.split(".")
        for n in range(2, len(chain) + 1):
            target = ".".join(chain[:n])
            if not (i.source == target or i.source.startswith(target + ".")):
                edges.setdefault(i.source, set()).add(target)
    assert not _cycles(edges), _cycles(edges)


def test_no_import_cycle_between_units():
    """Packages (and the package parts the table names) do not import each other in a circle,
    counting function-local imports too: a lazy import does not make a circle go away."""
    edges: dict[str, set[str]] = {}
    for i in imports():
        if i.source == "ragleak" or i.target == "ragleak":
            continue
        a, b = unit(i.source), unit(i.target)
        if a != b:
            edges.setdefault(a, set()).add(b)
    assert not _cycles(edges), _cycles(edges)



def test_the_doc_draws_the_same_layers():
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", DOC.read_text(encoding="utf-8"), re.M)
    drawn = [(name, tuple(m.strip(" `") for m in mods.split(","))) for _, name, mods in rows]
    assert drawn == LAYERS


def test_typer_and_rich_only_in_the_cli():
    outside = [i for i in _third_party({"typer", "rich"}) if unit(i[0]) != "cli"]
    assert not outside, outside


def _third_party(names: set[str]) -> list[tuple[str, int]]:
    hits = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            hits += [(name, node.lineno) for m in mods if m.split(".")[0] in names]
    return hits


WALKED = """
from typing import TYPE_CHECKING
import ragleak.errors
from ragleak.rag import files
from ragleak.records import Trace
from . import sibling
from ..records import Passage
if TYPE_CHECKING:
    from ragleak.stack import Stack
REG = {"x": "ragleak.metrics.nel:NELStrict"}

def later():
    from ragleak.grid.runner import run_grid
"""


def test_the_walker_sees_each_kind_of_import():
    known = {"ragleak.errors", "ragleak.rag", "ragleak.rag.files", "ragleak.rag.sibling", "ragleak.records",
             "ragleak.stack", "ragleak.metrics", "ragleak.metrics.nel", "ragleak.grid", "ragleak.grid.runner"}
    got = {i.target for i in imports_of("ragleak.rag.here", WALKED, False, known)}
    assert got == {"ragleak.errors", "ragleak.rag.files", "ragleak.records", "ragleak.rag.sibling",
                   "ragleak.metrics.nel", "ragleak.grid.runner"}


def test_the_walker_reads_the_real_tree():
    """Anchors: a function-local import is seen, a TYPE_CHECKING-only one is not."""
    found = {(i.source, i.target) for i in imports()}
    assert ("ragleak.cli", "ragleak.rag.models") in found  # inside `ragleak models`
    assert ("ragleak.context", "ragleak.stack") not in found
