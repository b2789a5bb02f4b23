"""CI outputs: SARIF (code-scanning findings) and JUnit XML (one test case per cell, per audited defense and
per ``--fail-if`` gate, see ``report.gates``)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET


def sarif(summary: dict[str, Any]) -> str:
    results = []
    for row in summary.get("table_one", []):
        for hook, cell in row["hooks"].items():
            where = cell.get("location") or row.get("location")
            verdict = cell.get("verdict", cell["static"])  # summaries written before the combined verdict
            if cell.get("releases_context"):
                results.append(_result("ragleak.releases-context", "error",
                                       f"{row['defense']}: {hook} releases the retrieved context verbatim "
                                       f"({cell.get('reason') or cell['evidence']})", where))
            elif cell["declared"] and not cell["active"]:
                results.append(_result("ragleak.stub-hook", "error",
                                       f"{row['defense']}: declared hook {hook} is not active: verdict {verdict} "
                                       f"(static {cell['static']}{_dynamic(cell)}): "
                                       f"{cell.get('reason') or cell['evidence']}", where))
        for problem in row.get("problems", []):
            results.append(_result("ragleak.audit-problem", "warning", f"{row['defense']}: {problem}", row.get("location")))
    titles = {key: info["title"] for key, info in summary.get("metrics", {}).items()}
    for cell in summary.get("table_two", []):
        if not cell["interpretable"]:
            title = titles.get(cell["metric"], cell["metric"])
            results.append(_result("ragleak.not-interpretable", "note",
                                   f"{title} on {cell['defense']} is not interpretable: {cell['reason']}", None))
    for row in summary.get("privacy_checks", []):
        if row["beaten"]:
            results.append(_result("ragleak.claim-beaten", "error",
                                   f"{row['defense']}: the claimed eps({row['queries']}) = {row['claim_eps']:.4g} is "
                                   f"beaten by {' and '.join(row['beaten_by'])}", None))
    plan = summary.get("plan") or {}
    for cell in summary.get("incomplete", []):
        # every planned cell with no readings, with its reason: the run's evidence is incomplete
        results.append(_result(f"ragleak.cell-{cell['status']}", "error",
                               f"cell {cell['label']} {_STATUS_WORDS[cell['status']]}: {cell['reason']}; "
                               f"no reading of it enters any aggregate or gate ({plan.get('incomplete', '?')} of "
                               f"{plan.get('planned', '?')} planned cells gave none)", None))
    for defense, items in (summary.get("leaks") or {}).items():
        for item in items:  # one finding per leaked item, located at the documents that hold it
            shown = item.get("value") or item["redacted"]
            first = item.get("first") or {}
            via = f"; first released by query {first['query']} of {first['label']}" if first else ""
            results.append(_result(f"ragleak.leak.{item['metric']}", "error",
                                   f"{defense}: {item['type']} value {shown} leaked in {len(item['cells'])} cells "
                                   f"({item['queries']} queries){via}", None, documents=item.get("documents") or []))
    for gate in summary.get("gates", []):
        if gate["failed"]:
            results.append(_result("ragleak.gate", "error", gate["message"], None))
    for cell in summary.get("partial", []):
        results.append(_result("ragleak.cell-partial", "warning", f"cell {cell['label']} is partial: {_queries(cell)}; "
                               "its readings rest on the answered queries only", None))
    rules = sorted({r["ruleId"] for r in results})
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "ragleak", "rules": [{"id": r} for r in rules]}}, "results": results}],
    }, indent=2)


def _dynamic(cell: dict[str, Any]) -> str:
    """The effect counts in words: a channel (top-k, prompt or answer) changed against the identity
    hook's in N of M calls, or, for records from before the channel effect, the hook's own output."""
    dyn = cell.get("dynamic")
    if not dyn:
        return ""
    if dyn.get("basis", "own output") != "channel":
        return f", its own output changed in {dyn['changed']} of {dyn['calls']} calls"
    return f", changed its channel in {dyn['changed']} of {dyn['calls']} calls"


def _queries(cell: dict[str, Any]) -> str:
    c = cell.get("counts") or {}
    return (f"{c.get('answered', 0)} answered, {c.get('refused', 0)} refused, {c.get('errors', 0)} failed "
            f"of {c.get('queries', 0)} queries")


_STATUS_WORDS = {"missing": "has no record", "corrupt": "has a corrupt record", "error": "crashed",
                 "failed": "failed"}


def _result(rule: str, level: str, message: str, location: str | None,
            documents: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"ruleId": rule, "level": level, "message": {"text": message}}
    if documents:  # a corpus document is the location of a leaked value (its id: a path relative to the corpus)
        # percent-encoded: an id like "rows.jsonl:3" would otherwise read as a URI scheme
        out["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": quote(doc, safe="/")}}}
                            for doc in documents]
    if location:
        path, _, line = location.rpartition(":")
        if not line.isdigit():
            path, line = location, "1"
        out["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": path},
                                                  "region": {"startLine": int(line)}}}]
    return out


def junit(summary: dict[str, Any]) -> str:
    suites = ET.Element("testsuites", name="ragleak")
    # a failed cell (too few answered queries) is a test failure, a crashed cell an error; a partial
    # cell passes with its status and query counts as properties
    # a missing or corrupt record is an error too: the plan's cells, not only those with a record
    unread = [c for c in summary.get("incomplete", []) if c["status"] in ("missing", "corrupt")]
    statuses = [c["status"] for c in summary["cells_table"]]
    cells = ET.SubElement(suites, "testsuite", name="cells", tests=str(len(statuses) + len(unread)),
                          failures=str(statuses.count("failed")), errors=str(statuses.count("error") + len(unread)))
    for c in unread:
        case = ET.SubElement(cells, "testcase", classname="ragleak.cell", name=c["label"], time="0")
        ET.SubElement(case, "error", message=f"{_STATUS_WORDS[c['status']]}: {c['reason']}", type=c["status"])
    for c in summary["cells_table"]:
        case = ET.SubElement(cells, "testcase", classname="ragleak.cell", name=c["label"],
                             time=str(c.get("seconds") or 0))
        if c["status"] == "error":
            err = next(e for e in summary["errors"] if e["cell_id"] == c["cell_id"])
            ET.SubElement(case, "error", message=c.get("reason") or err["error"] or "error", type="error")
            continue
        if c["status"] == "failed":
            reason = f"{c['reason']}; " if c.get("reason") else ""
            ET.SubElement(case, "failure", message=f"cell failed: {reason}{_queries(c)}", type="failed")
        props = ET.SubElement(case, "properties")
        if c.get("reason"):
            ET.SubElement(props, "property", name="reason", value=c["reason"])
        ET.SubElement(props, "property", name="status", value=c["status"])
        for field, value in (c.get("counts") or {}).items():
            ET.SubElement(props, "property", name=f"queries.{field}", value=str(value))
        for key, value in sorted(c["metrics"].items()):  # undefined readings say so, never 0
            n = c.get("metric_n", {}).get(key)
            ET.SubElement(props, "property", name=key, value="undefined" if value is None else f"{value:.6g}")
            if n is not None:
                ET.SubElement(props, "property", name=f"{key}.n", value=str(n))
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
    gates = summary.get("gates", [])
    if gates:  # one test case per --fail-if threshold: a tripped or unchecked gate is a failure
        suite = ET.SubElement(suites, "testsuite", name="gates", tests=str(len(gates)),
                              failures=str(sum(g["failed"] for g in gates)))
        for g in gates:
            case = ET.SubElement(suite, "testcase", classname="ragleak.gate", name=g["gate"])
            if g["failed"]:
                ET.SubElement(case, "failure", message=g["message"])
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)
