"""docs/reference.md is generated from the models a grid file is validated with and from every
built-in plugin's parameters (``ragleak.cli.reference``): it cannot drift from the code."""

from __future__ import annotations

import types
from pathlib import Path

from ragleak.attacks import ATTACKS
from ragleak.cli.reference import REGENERATE, exit_code_constants, render
from ragleak.config import StackConfig, TargetConfig
from ragleak.defenses import DEFENSES
from ragleak.grid.spec import GridConfig

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def test_the_committed_page_is_what_the_code_renders():
    page = render()
    assert PAGE.read_text(encoding="utf-8") == page, f"docs/reference.md is out of date: run `{REGENERATE}`"
    # every field a grid file takes is on it, the two sections' fields under their dotted names
    for name in GridConfig.model_fields:
        assert f"| `{name}` |" in page or name in ("stack", "target")
    for prefix, model in (("stack.", StackConfig), ("target.", TargetConfig)):
        assert all(f"| `{prefix}{name}` |" in page for name in model.model_fields)
    for registry in (ATTACKS, DEFENSES):
        for name in registry.names():
            cls = registry.get(name)
            if cls.__module__.startswith("ragleak."):
                assert f"### `{name}`" in page
                assert all(f"| `{field}` |" in page for field in cls.Params.model_fields)


def test_exit_codes_are_read_from_the_constants_and_their_comments():
    module = types.ModuleType("fake_grid_cli")
    source = ("#: every cell measured and every gate passed\nEXIT_OK = 0\n"
              "#: a gate failed, or a cell is missing,\n#: corrupt, crashed or failed\nEXIT_GATE = 1\n"
              "EXIT_NAME = 'not a code'\nOTHER = 3\nEXIT_USER, EXIT_CELLS = 2, 3\n")
    exec(compile(source, "fake_grid_cli", "exec"), module.__dict__)
    assert exit_code_constants(module, source) == [
        ("EXIT_OK", 0, "every cell measured and every gate passed"),
        ("EXIT_GATE", 1, "a gate failed, or a cell is missing, corrupt, crashed or failed"),
        ("EXIT_USER", 2, ""), ("EXIT_CELLS", 3, "")]
