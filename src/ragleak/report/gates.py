"""CI gates: ``--fail-if "pii_leaks>0"`` thresholds over a run's readings.

A gate is ``KEY OP NUMBER`` with ``OP`` one of ``> >= < <= == !=`` and ``KEY`` a cell-record key
(``pii_leaks``, ``pii_leaks[EMAIL]``, ``canary_recovery``); it is checked against every measured
cell that has the reading (``ok`` and ``partial`` cells; an undefined reading is never read as 0).
A gate trips when any cell's reading satisfies it. A gate whose key no measured cell has is
reported as unchecked (``checked == 0``), so a typo or a missing corpus cannot pass silently:
``ragleak`` treats an unchecked gate as a failure too. A gate never passes on less evidence than
the run planned: every planned cell that gave no readings (its record missing or corrupt, the cell
crashed or failed: ``report.cells.incomplete_cells``) fails every gate, and the gate's message
names each with its reason.

Gates persist: ``save_gates`` keeps them in ``RUN_DIR/gates.json`` (``{"gates": ["pii_leaks>0"]}``)
and a later ``ragleak report`` without ``--fail-if`` checks the same ones (``load_gates``).

The outcomes go into ``summary.json`` (``gates``), SARIF (rule ``ragleak.gate``) and JUnit (a
``gates`` suite, one test case per gate).
"""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ragleak.errors import ConfigError
from ragleak.files import atomic_write_text

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_GATE = re.compile(r"^\s*(?P<key>[A-Za-z_][\w-]*(?:\[[^\]]+\])?)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$")


class Gate(BaseModel):
    """One threshold: fail when ``key op value`` holds for some measured cell."""

    model_config = ConfigDict(frozen=True)

    key: str
    op: str
    value: float

    @property
    def text(self) -> str:
        return f"{self.key}{self.op}{self.value:g}"

    def trips(self, reading: float) -> bool:
        return _OPS[self.op](reading, self.value)


class GateOutcome(BaseModel):
    """What a gate found: the cells it checked and those that tripped it (label, reading, n)."""

    gate: str
    key: str
    checked: int = Field(description="measured cells with a defined reading of the key")
    tripped: list[dict[str, Any]] = Field(default_factory=list)
    planned: int | None = Field(default=None, description="cells the run planned (None: not known)")
    incomplete: list[dict[str, Any]] = Field(
        default_factory=list, description="planned cells with no readings: label, status (missing, corrupt, error, "
                                          "failed) and reason; any one fails the gate")

    @property
    def failed(self) -> bool:
        return bool(self.tripped) or self.checked == 0 or bool(self.incomplete)

    @property
    def message(self) -> str:
        if self.incomplete:
            named = "; ".join(f"{c['label']}: {c['status']}: {c['reason']}" for c in self.incomplete[:5])
            more = f"; and {len(self.incomplete) - 5} more" if len(self.incomplete) > 5 else ""
            of = f" of {self.planned} planned" if self.planned is not None else ""
            found = (f"; besides, tripped by {len(self.tripped)} of {self.checked} cells" if self.tripped
                     else f"; the {self.checked} cells read did not trip it" if self.checked
                     else f"; besides, unchecked: no measured cell has a defined {self.key} reading")
            return (f"gate {self.gate}: failed: evidence incomplete: {len(self.incomplete)}{of} cells gave no "
                    f"readings ({named}{more}){found}")
        if self.checked == 0:
            return (f"gate {self.gate}: unchecked: no measured (ok or partial) cell has a defined {self.key} reading "
                    "(failed cells are never read; is the metric's input there, e.g. the corpus for pii_leaks?)")
        if not self.tripped:
            return f"gate {self.gate}: passed on {self.checked} cells"
        worst = ", ".join(f"{t['label']} = {t['value']:g} (n={t['n']})" for t in self.tripped[:5])
        more = f" and {len(self.tripped) - 5} more" if len(self.tripped) > 5 else ""
        return f"gate {self.gate}: tripped by {len(self.tripped)} of {self.checked} cells: {worst}{more}"


def parse_gate(text: str) -> Gate:
    m = _GATE.match(text)
    if not m:
        raise ConfigError(f"--fail-if {text!r}: expected METRIC OP NUMBER, e.g. \"pii_leaks>0\" or "
                          "\"canary_recovery>=0.1\" (OP one of > >= < <= == !=)")
    return Gate(key=m["key"], op=m["op"], value=float(m["value"]))


def parse_gates(texts: Iterable[str] | None) -> list[Gate]:
    return [parse_gate(t) for t in texts or []]


def check(gates: Sequence[Gate], cells: Sequence[dict[str, Any]], incomplete: Sequence[dict[str, Any]] = (),
          planned: int | None = None) -> list[GateOutcome]:
    """Each gate over ``cells`` (rows with ``label``, ``status``, ``metrics`` {key: value} and
    ``metric_n`` {key: n}, as ``summary["cells_table"]`` holds them); failed and crashed cells
    are not read. ``incomplete``: the planned cells that gave no readings (``summary["incomplete"]``):
    each fails every gate."""
    named = [{"cell_id": c.get("cell_id"), "label": c["label"], "status": c["status"], "reason": c["reason"]}
             for c in incomplete]
    out = []
    for gate in gates:
        readings = [(c, c["metrics"][gate.key]) for c in cells
                    if c["status"] in ("ok", "partial") and c["metrics"].get(gate.key) is not None]
        tripped = [{"label": c["label"], "cell_id": c.get("cell_id"), "value": float(v),
                    "n": c.get("metric_n", {}).get(gate.key)} for c, v in readings if gate.trips(float(v))]
        out.append(GateOutcome(gate=gate.text, key=gate.key, checked=len(readings), tripped=tripped,
                               planned=planned, incomplete=named))
    return out


def gate_rows(outcomes: Sequence[GateOutcome]) -> list[dict[str, Any]]:
    """The outcomes as ``summary.json`` rows."""
    return [{**o.model_dump(), "failed": o.failed, "message": o.message} for o in outcomes]


GATES_FILE = "gates.json"


def save_gates(run_dir: Path, gates: Sequence[Gate]) -> None:
    """Keep ``gates`` in the run folder, so a later report checks them without ``--fail-if``."""
    atomic_write_text(Path(run_dir) / GATES_FILE, json.dumps({"gates": [g.text for g in gates]}, indent=2))


def load_gates(run_dir: Path) -> list[Gate]:
    """The gates kept in the run folder (none where there is no ``gates.json``)."""
    path = Path(run_dir) / GATES_FILE
    if not path.exists():
        return []
    try:
        texts = json.loads(path.read_text(encoding="utf-8"))["gates"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); give the gates again with --fail-if") from exc
    return parse_gates(texts)
