"""CI gates: SARIF (code-scanning findings) and JUnit XML (one test case per cell and per audited defense)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET


def sarif(summary: dict[str, Any]) -> str:
    results = []
    for row in summary.get("table_one", []):
        for hook, cell in row["hooks"].items():
            if cell["declared"] and not cell["active"]:
                results.append(_result("ragleak.stub-hook", "error",
                                       f"{row['defense']}: declared hook {hook} is not active ({cell['static']})",
                                       cell.get("location") or row.get("location")))
        for problem in row.get("problems", []):
            results.append(_result("ragleak.audit-problem", "warning", f"{row['defense']}: {problem}", row.get("location")))
    titles = {key: info["title"] for key, info in summary.get("metrics", {}).items()}
    for cell in summary.get("table_two", []):
        if not cell["interpretable"]:
            title = titles.get(cell["metric"], cell["metric"])
            results.append(_result("ragleak.not-interpretable", "note",
                                   f"{title} on {cell['defense']} is not interpretable: {cell['reason']}", None))
    for err in summary.get("errors", []):
        results.append(_result("ragleak.cell-error", "warning", f"cell {err['label']} failed: {err['error']}", None))
    rules = sorted({r["ruleId"] for r in results})
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "ragleak", "rules": [{"id": r} for r in rules]}}, "results": results}],
    }, indent=2)


def _result(rule: str, level: str, message: str, location: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"ruleId": rule, "level": level, "message": {"text": message}}
    if location:
        path, _, line = location.rpartition(":")
        if not line.isdigit():
            path, line = location, "1"
        out["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": path},
                                                  "region": {"startLine": int(line)}}}]
    return out


def junit(summary: dict[str, Any]) -> str:
    suites = ET.Element("testsuites", name="ragleak")
    cells = ET.SubElement(suites, "testsuite", name="cells", tests=str(len(summary["cells_table"])),
                          failures="0", errors=str(len(summary["errors"])))
    for c in summary["cells_table"]:
        case = ET.SubElement(cells, "testcase", classname="ragleak.cell", name=c["label"],
                             time=str(c.get("seconds") or 0))
        if c["status"] == "error":
            err = next(e for e in summary["errors"] if e["cell_id"] == c["cell_id"])
            ET.SubElement(case, "error", message=err["error"] or "error")
        elif c["metrics"]:
            props = ET.SubElement(case, "properties")
            for key, value in sorted(c["metrics"].items()):  # undefined readings say so, never 0
                ET.SubElement(props, "property", name=key, value="undefined" if value is None else f"{value:.6g}")
    rows = summary.get("table_one", [])
    failures = 0
    audit = ET.SubElement(suites, "testsuite", name="audit", tests=str(len(rows)))
    for row in rows:
        case = ET.SubElement(audit, "testcase", classname="ragleak.audit", name=row["defense"])
        stubs = [h for h, cell in row["hooks"].items() if cell["declared"] and not cell["active"]]
        if stubs:
            failures += 1
            ET.SubElement(case, "failure", message=f"declared hooks not active: {', '.join(stubs)}")
    audit.set("failures", str(failures))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)
