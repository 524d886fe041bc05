"""What may change within a major (docs/contract.md), held on the run's JSON Schema as each contract version recorded
it (``schemas/history``): a minor only adds optional fields, values and kinds; the models are the current version's,
so a change to the run is a new minor."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from schemas import ErrorBody, RunAccepted
from schemas.contract import MAJOR, MINOR, PLAIN_MINOR, THIS, Peer, Version
from schemas.jsonschema import HISTORY, history_file, run_json_schema

#: Words for people and defaults a reader does not apply: not the contract.
NOT_CONTRACT = frozenset({"title", "description", "default", "examples", "$id", "$schema"})
#: Bounds and shapes that may not move in either direction within a major: a narrower one refuses an older agent's
#: runs, a wider one lets a newer agent send runs an older collector refuses.
FIXED = ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
         "maxItems", "pattern", "format", "additionalProperties", "propertyNames")  # fmt: skip


class Changes:
    """What a schema changed from an earlier one: additions (allowed in a minor) and the rest (a new major)."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.defs = (old.get("$defs", {}), new.get("$defs", {}))
        self.added: list[str] = []
        self.broken: list[str] = []
        self.compare(old, new, "run")

    def resolve(self, node: dict[str, Any], which: int) -> dict[str, Any]:
        while "$ref" in node:
            node = self.defs[which][node["$ref"].rsplit("/", 1)[-1]]
        return node

    def compare(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        old, new = self.resolve(old, 0), self.resolve(new, 1)
        for key in FIXED:
            if old.get(key) != new.get(key):
                self.broken.append(f"{at}: {key} {old.get(key)!r} -> {new.get(key)!r}")
        for key in ("enum", "const"):
            was = old.get(key, [] if key == "enum" else None)
            now = new.get(key, [] if key == "enum" else None)
            was, now = (was, now) if key == "enum" else ([was] if was is not None else [], [now] if now else [])
            if set(map(json.dumps, was)) - set(map(json.dumps, now)):
                self.broken.append(f"{at}: {key} lost {sorted(set(map(json.dumps, was)) - set(map(json.dumps, now)))}")
            self.added += [f"{at}: value {v}" for v in sorted(set(map(json.dumps, now)) - set(map(json.dumps, was)))]
        if set(old.get("required", [])) != set(new.get("required", [])):
            self.broken.append(f"{at}: required {old.get('required')} -> {new.get('required')}")
        for name, sub in old.get("properties", {}).items():
            if name not in new.get("properties", {}):
                self.broken.append(f"{at}.{name}: removed")
            else:
                self.compare(sub, new["properties"][name], f"{at}.{name}")
        was = old.get("properties", {})
        self.added += [f"{at}.{name}: field" for name in new.get("properties", {}) if name not in was]
        for key in ("items", "additionalProperties"):
            if isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
                self.compare(old[key], new[key], f"{at}[]")
        self.union(old, new, at)

    def union(self, old: dict[str, Any], new: dict[str, Any], at: str) -> None:
        """Kinds of a discriminated union by their tag; any other union (``X | None``) member by member."""
        if "discriminator" in old or "discriminator" in new:
            was, now = (s.get("discriminator", {}).get("mapping", {}) for s in (old, new))
            for tag, ref in was.items():
                if tag not in now:
                    self.broken.append(f"{at}: kind {tag} removed")
                else:
                    self.compare({"$ref": ref}, {"$ref": now[tag]}, f"{at}<{tag}>")
            self.added += [f"{at}: kind {tag}" for tag in now if tag not in was]
            return
        for key in ("anyOf", "oneOf", "prefixItems"):
            was, now = old.get(key, []), new.get(key, [])
            if len(was) != len(now):
                self.broken.append(f"{at}: {key} of {len(was)} -> {len(now)}")
                continue
            for i, (a, b) in enumerate(zip(was, now, strict=True)):
                self.compare(a, b, f"{at}/{key}{i}")


def _recorded() -> list[Version]:
    found = [Version.parse(p.name.removeprefix("run-").removesuffix(".schema.json")) for p in HISTORY.iterdir()]
    return sorted(v for v in found if v is not None)


def _load(version: Version) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(history_file(version).read_text(encoding="utf-8"))
    return schema


def test_the_models_are_the_run_this_contract_version_recorded() -> None:
    changes = Changes(_load(THIS), run_json_schema())
    assert not changes.broken and not changes.added, (
        f"the run's schema changed within contract {THIS}: {changes.added + changes.broken}. A minor that only adds "
        f"(docs/contract.md): raise schemas/contract.MINOR and run `make schema`, which records it; anything else is "
        f"a new major"
    )


def test_each_minor_only_adds_to_the_one_before() -> None:
    versions = _recorded()
    assert versions[0] == Version(MAJOR, 0) and versions[-1] == THIS
    assert [v.minor for v in versions] == list(range(MINOR + 1))  # none left out
    for old, new in itertools.pairwise(versions):
        changes = Changes(_load(old), _load(new))
        assert not changes.broken, f"{old} -> {new} is not a minor: {changes.broken}"
        assert changes.added, f"{new} adds nothing to {old}"
    first = Changes(_load(Version(MAJOR, 0)), _load(Version(MAJOR, 1)))
    assert first.added == ["run.schema_minor: field"]  # 1.1: the minor itself, and the readers' tolerance


def test_the_checker_tells_an_addition_from_a_break() -> None:
    """The rule itself, on the recorded schema: each change a minor may make, and some it may not."""
    base = _load(THIS)

    def changed(edit: Any) -> Changes:
        new = json.loads(json.dumps(base))
        edit(new)
        return Changes(base, new)

    defs = "$defs"
    flag = changed(lambda s: s[defs]["MatmulResult"]["properties"]["flags"]["items"]["enum"].append("cold_cache"))
    assert flag.added == ['run.results[]<matmul>.flags[]: value "cold_cache"'] and not flag.broken
    field = changed(lambda s: s[defs]["TimingStats"]["properties"].update(gpu_busy_share={"type": "number"}))
    assert "run.results[]<matmul>.timing/anyOf0.gpu_busy_share: field" in field.added and not field.broken
    required = changed(lambda s: s["required"].append("fleet_zone") or s["properties"].update(fleet_zone={}))
    assert required.broken == [f"run: required {base['required']} -> {base['required'] + ['fleet_zone']}"]
    lost = changed(lambda s: s[defs]["MatmulParams"]["properties"]["dtype"]["enum"].remove("fp8_e5m2"))
    assert lost.broken and not lost.added
    bound = changed(lambda s: s[defs]["MatmulParams"]["properties"]["n"].update(maximum=1 << 30))
    assert bound.broken == ["run.results[]<matmul>.params.n: maximum 16777216 -> 1073741824"]
    kind = changed(lambda s: s["properties"]["results"]["items"]["discriminator"]["mapping"].pop("mamf"))
    assert kind.broken == ["run.results[]: kind mamf removed"]


@pytest.mark.parametrize(
    ("peer", "run", "refused"),
    [
        (Peer(None), Version(1, 0), None),  # a collector from before the contract: plain 1.0 runs
        (Peer(None), Version(1, PLAIN_MINOR), None),
        (Peer(None), Version(1, PLAIN_MINOR + 1), "predates flopfleet's versioned contract"),
        (Peer(Version(1, 1)), Version(1, 7), None),  # a newer minor: stored as far as known
        (Peer(Version(1, 1)), Version(2, 0), "reads contract 1.x (it is 1.1); this run is 2.0: upgrade the collector"),
        (Peer(Version(3, 0), (3,)), Version(2, 4), "this run is 2.4: send it to a collector that reads it"),
        (Peer(Version(3, 0), (2, 3)), Version(2, 4), None),
    ],
)
def test_which_collector_a_run_is_held_for(peer: Peer, run: Version, refused: str | None) -> None:
    said = peer.refuses(run)
    assert (said is None) if refused is None else (said is not None and refused in said)


def test_a_collector_s_contract_is_read_from_its_answer_s_headers() -> None:
    headers = {"Flopfleet-Contract": "1.4", "Flopfleet-Contract-Majors": "1,2"}
    assert Peer.from_headers(headers) == Peer(Version(1, 4), (1, 2))
    assert Peer.from_headers({"Flopfleet-Contract": "one"}) == Peer(None)


def test_answers_are_read_ignoring_fields_a_newer_collector_adds() -> None:
    """The receipt, the token's answer, errors and verdicts (``schemas.base.Answer``); strict in what they know."""
    run_id = "5b0e6a3e-55d4-4f0c-9d1e-0f6f6c1c2a11"
    receipt = RunAccepted.model_validate_json(json.dumps({"run_id": run_id, "status": "created", "results": 3,
                                                          "stored_in": "eu-1"}))  # fmt: skip
    assert (str(receipt.run_id), receipt.results, receipt.not_understood) == (run_id, 3, ())
    error = ErrorBody.model_validate_json('{"error": {"code": "x", "message": "y", "hint": "z"}}')
    assert error.error.code == "x"
    with pytest.raises(ValueError, match="results"):
        RunAccepted.model_validate_json(json.dumps({"run_id": run_id, "status": "created", "results": "3"}))
