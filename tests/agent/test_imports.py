"""agent/imports.py in fresh interpreters: what a measuring process imports is frozen out of the collector's reach, the
collector is on again afterwards, and a process that has imported everything already is left as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
sys.path.insert(0, {root!r})
{before}
from agent.imports import import_frozen
frozen_before = gc.get_freeze_count()
missing = import_frozen({names!r})
print(json.dumps({{"missing": missing, "frozen_before": frozen_before, "frozen": gc.get_freeze_count(),
                   "enabled": gc.isenabled(), "imported": [n for n in {names!r} if n in sys.modules]}}))
"""


def probe(names: list[str], before: str = "") -> dict[str, object]:
    code = PROBE.format(root=str(ROOT), names=names, before=before)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_what_a_process_imports_is_frozen_and_the_collector_is_on_again() -> None:
    got = probe(["decimal", "xml.dom.minidom", "no_such_module_here"])
    assert got["missing"] == ["no_such_module_here"]
    assert got["imported"] == ["decimal", "xml.dom.minidom"]
    assert got["frozen_before"] == 0
    assert isinstance(got["frozen"], int) and got["frozen"] > 1000  # every object alive, the imports' among them
    assert got["enabled"] is True


def test_a_collector_turned_off_stays_off() -> None:
    got = probe(["decimal"], before="gc.disable()")
    assert got["enabled"] is False and isinstance(got["frozen"], int) and got["frozen"] > 0


def test_a_process_that_has_imported_everything_is_left_as_it_was() -> None:
    got = probe(["json", "decimal"], before="import decimal")  # json: the probe's own import
    assert got["missing"] == [] and got["frozen"] == 0 and got["enabled"] is True
