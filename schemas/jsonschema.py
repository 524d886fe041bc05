"""The published JSON Schema of a run, generated from the models so it cannot drift from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .run import SCHEMA_VERSION, RunSubmission

#: The generated file other tools can read; a test keeps it equal to what the models produce.
SCHEMA_FILE = Path(__file__).with_name(f"run.v{SCHEMA_VERSION}.schema.json")


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
