"""The docs: a README that is a front door (short, opening with the two set-up commands); every link, ``make``
target and CLI command they show exists; every agent setting and exit code is in docs/agent.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from agent.cli import EXIT_FAILED, EXIT_KEPT, EXIT_REFUSED
from agent.cli import app as agent_app
from agent.cli.settings import KEYS
from collector.cli.main import app as collector_app
from tests.conftest import ROOT

README = ROOT / "README.md"
#: What people read now: the README, docs/ and the recipes (docs/results/ keeps dated records, linked but not
#: rewritten, so only its links are checked).
CURRENT = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
LINKED = [*CURRENT, *sorted((ROOT / "docs" / "results").glob("*.md"))]
MAX_README_LINES = 210
#: A command of either CLI as the docs show one (`flopfleet-collector token create`), with its subcommand if any.
CLI_COMMAND = re.compile(r"(?<![\w/.-])flopfleet-(agent|collector)\s+(?!flopfleet)([a-z][\w-]*)(?:\s+([a-z][\w-]*))?")


def _parts(path: Path) -> tuple[str, list[str]]:
    """The prose (fenced code left out) and the code in it: fenced blocks' lines and inline spans."""
    prose, code, fenced = [], [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            code.append(line)
        else:
            prose.append(line)
    text = "\n".join(prose)
    return text, code + [double or single for double, single in re.findall(r"``(.+?)``|`([^`]+)`", text, re.S)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: a link's text kept, lower case, punctuation but '-' and '_' dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading's gets -1, -2, … as on GitHub."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in _parts(path)[0].splitlines():
        if match := re.match(r"#{1,6} (.+?)[ #]*$", line):
            slug = _slug(match.group(1))
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links(path: Path) -> list[str]:
    """Each link's target, links inside code left out."""
    prose = re.sub(r"``.+?``|`[^`]+`", "", _parts(path)[0], flags=re.S)
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_readme_is_a_front_door_that_opens_with_the_two_set_up_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; at most {MAX_README_LINES}"
    assert lines[0] == "# flopfleet"
    first = lines.index("```sh")
    assert not [line for line in lines[:first] if line.startswith("## ")]  # before any section
    block = lines[first + 1 : lines.index("```", first + 1)]
    assert [line.split()[:2] for line in block] == [["make", "demo"], ["make", "test"]], block


def test_the_readme_lists_the_docs_architecture_first() -> None:
    index = README.read_text(encoding="utf-8").split("\n## Documentation\n")[1].split("\n## ")[0]
    listed = re.findall(r"^- \[[^\]]+\]\(([^)#]+)\)", index, re.M)
    assert listed[0] == "docs/architecture.md"
    missing = [_name(p) for p in CURRENT[1:] if _name(p) not in listed]
    assert missing == [], f"not in the README's index: {missing}"


@pytest.mark.parametrize("doc", LINKED, ids=_name)
def test_every_relative_link_points_at_a_file_and_heading_that_exist(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        if re.match(r"[a-z][a-z+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {_name(file)}")
    assert broken == []


@pytest.mark.parametrize("doc", CURRENT, ids=_name)
def test_every_make_target_and_cli_command_the_docs_show_exists(doc: Path) -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))
    clis = {"agent": typer.main.get_command(agent_app), "collector": typer.main.get_command(collector_app)}
    unknown = []
    for code in _parts(doc)[1]:
        unknown += [f"make {t}" for t in re.findall(r"(?<![\w-])make ([a-z][\w-]*)", code) if t not in targets]
        for which, command, sub in CLI_COMMAND.findall(code):
            found = clis[which].commands.get(command)  # type: ignore[attr-defined]
            if found is None:
                unknown.append(f"flopfleet-{which} {command}")
            elif sub and hasattr(found, "commands") and sub not in found.commands:
                unknown.append(f"flopfleet-{which} {command} {sub}")
    assert unknown == []


def test_the_agent_doc_names_every_setting_and_exit_code() -> None:
    doc = (ROOT / "docs" / "agent.md").read_text(encoding="utf-8")
    settings = doc.split("\nSettings: ")[1].split("\n\n")[0]
    assert [key for key in KEYS if f"`{key}`" not in settings] == []
    table = doc.split("| exit code | `flopfleet-agent run` |")[1].split("\n\n")[0]
    assert [code for code in (0, EXIT_FAILED, EXIT_KEPT, EXIT_REFUSED) if f"\n| {code} |" not in table] == []


def test_the_measured_files_are_committed_compact() -> None:
    # A device call carries the tracked files and the wheels, 64 MiB at most (scripts/results_files.py says why).
    from scripts.results_files import RESULTS, is_stored, json_files

    files = json_files([RESULTS])
    loose = [str(p.relative_to(ROOT)) for p in files if not is_stored(p)]
    assert files and not loose, f"run `python scripts/compact_results.py` before committing: {loose[:5]}"


def test_a_measured_file_is_read_by_its_json_name_gzipped_from_the_size_the_rule_names(tmp_path: Path) -> None:
    import json

    from scripts.results_files import GZIP_FROM_BYTES, is_stored, json_files, read, store

    small, large = {"a": [1, 2]}, {"runs": ["x" * GZIP_FROM_BYTES]}
    for name, data in (("small.json", small), ("large.json", large)):
        assert store(tmp_path / name, json.dumps(data, indent=2))  # pretty-printed, as a call writes it
        assert read(tmp_path / name) == data and is_stored(tmp_path / name)
        assert not store(tmp_path / name, json.dumps(data))  # already as committed: nothing written
    assert (tmp_path / "large.json.gz").exists() and not (tmp_path / "large.json").exists()
    assert (tmp_path / "small.json").read_text() == '{"a":[1,2]}\n'
    assert json_files([tmp_path]) == [tmp_path / "large.json", tmp_path / "small.json"]
    assert store(tmp_path / "large.json", json.dumps(small))  # shrunk below the size: plain JSON again
    assert (tmp_path / "large.json").exists() and not (tmp_path / "large.json.gz").exists()
