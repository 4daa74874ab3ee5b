"""``python -m bench --docs`` rewrites benchmarks.md from the run but keeps the hand-written
findings section, which no run produces."""

from __future__ import annotations

from bench.model import Result
from bench.report import FINDINGS_HEADING, RunInfo, kept_findings, markdown_report

FINDINGS = f"{FINDINGS_HEADING}\n\n- A finding, 1.5x at abc1234.\n- Another one."


def _report(findings: str | None) -> str:
    info = RunInfo("python -m bench", 1.0, [10], 1, "recall", ["a note"])
    results = [Result("recall", "sqlite", 10, [1e-5])]
    return markdown_report(results, info, [], None, findings)


def test_the_findings_section_is_found_between_headings() -> None:
    earlier = f"# prism-om benchmarks\n\n## Notes\n\n- x\n\n{FINDINGS}\n\n## Later\n\ntext\n"
    assert kept_findings(earlier) == FINDINGS
    assert kept_findings(f"# prism-om benchmarks\n\n{FINDINGS}\n") == FINDINGS
    assert kept_findings("# prism-om benchmarks\n\n## Notes\n") is None


def test_a_regenerated_report_carries_the_findings_over() -> None:
    first = _report(FINDINGS)
    again = _report(kept_findings(first))
    assert again == first
    assert again.count(FINDINGS_HEADING) == 1
    assert again.index("## Notes") < again.index(FINDINGS_HEADING)
    assert FINDINGS_HEADING not in _report(None)
