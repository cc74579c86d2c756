"""The named fault points, read from the code itself, so a new point is crash-tested the day it is added."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from tests.support import ROOT


def fault_points(package: Path = ROOT / "chalicelib") -> dict[str, str]:
    """Every `self.faults(<point>)` call in chalicelib: point name -> module that reaches it."""
    points: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and _calls_faults(node.func) and len(node.args) == 1):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                points[arg.value] = module
            elif isinstance(arg, ast.Name):
                # A module-level constant naming the point (e.g. AFTER_OFFER_COMMITTED).
                points[str(getattr(importlib.import_module(module), arg.id))] = module
            else:
                raise AssertionError(f"{path}:{node.lineno}: a fault point must be a literal or a module constant")
    return points


def _calls_faults(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "faults") or (
        isinstance(func, ast.Name) and func.id == "faults"
    )
