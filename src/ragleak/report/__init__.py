"""Reports over a grid run: summary.json, report.html, cells.jsonl, SARIF and JUnit for CI gates."""
