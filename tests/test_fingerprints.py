"""Results never change silently: every shipped experiment at 2 replications and
every `numasim bench` scenario must give the numbers recorded in tests/data/fingerprints.json.

A change that moves a number updates that file in the same commit
(`python tools/fingerprints.py --update`) and says in docs/CHANGES.md which numbers moved and why.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "fingerprints.py"


def _tool():
    spec = importlib.util.spec_from_file_location("fingerprints", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_result_moved():
    tool = _tool()
    expected = json.loads(tool.FILE.read_text())
    moved = tool.differences(expected, tool.compute())
    assert moved == [], "results moved:\n" + "\n".join(moved)


def test_the_comparison_names_what_moved():
    tool = _tool()
    old = {"experiments": {"e": {"m/w/10": "aa", "m/w/20": "bb"}}, "bench": {"a": {"events": 1}}}
    new = {"experiments": {"e": {"m/w/10": "aa", "m/w/20": "cc"}, "f": {}},
           "bench": {"a": {"events": 2}}}  # fmt: skip
    assert tool.differences(old, new) == [
        "experiment e m/w/20: bb -> cc",
        "experiments f: added",
        "bench a: {'events': 1} -> {'events': 2}",
    ]
    assert tool.differences(old, old) == []
