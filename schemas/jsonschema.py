"""The published JSON Schemas of a run and of a baseline bundle, generated from the models so they cannot drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .baselines import BASELINE_SCHEMA_VERSION, BaselineBundle
from .contract import THIS, Version
from .run import SCHEMA_VERSION, RunSubmission

#: The generated file other tools can read; a test keeps it equal to what the models produce.
SCHEMA_FILE = Path(__file__).with_name(f"run.v{SCHEMA_VERSION}.schema.json")
#: The run's schema as each contract version had it, recorded once when the version is new: a test holds each to
#: the one before it (only additions within a major) and the models to the current one (docs/contract.md).
HISTORY = Path(__file__).with_name("history")


def history_file(version: Version) -> Path:
    return HISTORY / f"run-{version}.schema.json"


def run_json_schema() -> dict[str, Any]:
    schema = RunSubmission.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://flopfleet.dev/schemas/run.v{SCHEMA_VERSION}.schema.json"
    return schema


def render_json_schema() -> str:
    return json.dumps(run_json_schema(), indent=2, sort_keys=True) + "\n"


def write_json_schema(path: Path = SCHEMA_FILE) -> Path:
    path.write_text(render_json_schema(), encoding="utf-8")
    return path


#: The baseline bundle's schema (``schemas.baselines``), published beside the run's.
BASELINE_SCHEMA_FILE = Path(__file__).with_name(f"baseline.v{BASELINE_SCHEMA_VERSION}.schema.json")


def render_baseline_schema() -> str:
    schema = BaselineBundle.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://flopfleet.dev/schemas/baseline.v{BASELINE_SCHEMA_VERSION}.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas() -> list[Path]:
    """Both published schemas (``make schema``), and the run's for this contract version if none is recorded yet
    (never rewritten: a change to a recorded version's run is a new minor)."""
    BASELINE_SCHEMA_FILE.write_text(render_baseline_schema(), encoding="utf-8")
    written = [write_json_schema(), BASELINE_SCHEMA_FILE]
    if not history_file(THIS).exists():
        written.append(write_json_schema(history_file(THIS)))
    return written
