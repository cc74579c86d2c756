"""Accessibility audits with axe-core, run inside the page under test.

axe-core is the copy the `axe-playwright-python` package ships (its `axe.min.js`); it is injected into the page
through the browser's debugging protocol, so a page's own Content-Security-Policy (which allows no other script)
does not stop it. Every audit prints a line per violation to the test output, and a test fails on any violation
of serious or critical impact.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

BLOCKING = ("serious", "critical")
# Every audit of the run: (label, axe's version, the impacts of its violations), for the run's summary
# (tests/browser/conftest.py prints it after the tests, passed or not).
AUDITS: list[tuple[str, str, list[str]]] = []
# Everything axe checks by default (WCAG 2.0-2.2 A and AA, and its best practices).
OPTIONS = {"resultTypes": ["violations"]}


@lru_cache(maxsize=1)
def axe_source() -> str:
    """axe-core's script."""
    return (resources.files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")


def audit(page: Any, label: str, *, context: Any = None) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now (or on `context`, a selector), printed under `label`."""
    page.evaluate(axe_source())
    results = page.evaluate("([context, options]) => axe.run(context || document, options)", [context, OPTIONS])
    violations: list[dict[str, Any]] = results["violations"]
    version = results.get("testEngine", {}).get("version", "?")
    AUDITS.append((label, version, [str(v["impact"]) for v in violations]))
    print(f"\naxe-core {version} on {label}: {len(violations)} violation(s)")
    for v in violations:
        targets = ", ".join(str(n["target"]) for n in v["nodes"][:3])
        print(f"  [{v['impact']}] {v['id']}: {v['help']} ({len(v['nodes'])} node(s): {targets})")
    return violations


def summary() -> list[str]:
    """The run's audits, one line each, and a total."""
    if not AUDITS:
        return []
    lines = [f"axe-core {AUDITS[0][1]}: {len(AUDITS)} audits, {sum(len(i) for _, _, i in AUDITS)} violations"]
    for label, _, impacts in AUDITS:
        counts = {impact: impacts.count(impact) for impact in sorted(set(impacts))}
        lines.append(f"  {label}: " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "no violations"))
    return lines


def assert_accessible(page: Any, label: str, *, context: Any = None) -> None:
    """No serious or critical axe violation on the page (every violation is printed either way)."""
    blocking = [v for v in audit(page, label, context=context) if v["impact"] in BLOCKING]
    assert not blocking, f"{label}: " + "; ".join(f"{v['id']} ({v['impact']}): {v['help']}" for v in blocking)
