"""Human output for the agent's commands: rich tables and lines built from the data the commands return.

Every piece of data (names, reasons, hostnames, collector messages) goes in as ``schemas.terminal.literal``: shown
as it is, never read as markup or obeyed as a terminal escape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from rich.table import Table
from rich.text import Text

from schemas import Gpu, Machine, Result, RunSubmission
from schemas.labels import HOSTNAME, describe, headline, human_bytes, per_watt
from schemas.numbers import number, percent
from schemas.terminal import LEVEL_STYLE, literal
from schemas.verdicts import REFERENCE_WORDS, FigureVerdict, GpuVerdict, Level

from ..benchmarks import AnyBenchmark
from ..harness.suites import Suite
from ..machine.counters import alarms
from ..run.runner import CaseEvent
from ..run.upload import Delivery
from .settings import Resolved


def _opt(value: object, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value}{unit}"


def _link(gen: int | None, width: int | None) -> str:
    return f"Gen{gen} x{width}" if gen and width else "-"


def machine_table(machine: Machine) -> Table:
    table = Table(title="flopfleet machine", show_header=True, header_style="bold")
    table.add_column("")
    gpus: Sequence[Gpu] = machine.gpus
    for gpu in gpus:
        table.add_column(f"GPU {gpu.index}")
    if not gpus:
        table.add_column("CPU")
    sw, host = machine.software, machine.host
    rows: list[tuple[str, list[str]]] = [
        (HOSTNAME, [host.hostname] * max(1, len(gpus))),
        ("cpu", [f"{host.cpu_model or '-'} ({host.cpu_count} threads)"] * max(1, len(gpus))),
        ("python / torch", [f"{sw.python} / {sw.torch or '-'}"] * max(1, len(gpus))),
        ("CUDA / cuDNN / NCCL", [f"{sw.cuda or '-'} / {sw.cudnn or '-'} / {sw.nccl or '-'}"] * max(1, len(gpus))),
        ("transformers", [_opt(sw.transformers)] * max(1, len(gpus))),
        ("driver", [_opt(sw.driver)] * max(1, len(gpus))),
    ]
    if gpus:
        rows += [
            ("name", [g.name for g in gpus]),
            ("uuid", [_opt(g.uuid) for g in gpus]),
            ("memory", [human_bytes(g.memory_bytes) for g in gpus]),
            ("compute capability", [_opt(g.compute_capability) for g in gpus]),
            ("SMs", [_opt(g.sm_count) for g in gpus]),
            ("L2 cache", [human_bytes(g.l2_cache_bytes) if g.l2_cache_bytes else "-" for g in gpus]),
            ("SM clock now / max", [f"{_opt(g.sm_clock_mhz)} / {_opt(g.sm_clock_max_mhz, ' MHz')}" for g in gpus]),
            ("mem clock now / max", [f"{_opt(g.mem_clock_mhz)} / {_opt(g.mem_clock_max_mhz, ' MHz')}" for g in gpus]),
            (
                "power limit / default",
                [f"{_opt(g.power_limit_w)} / {_opt(g.power_limit_default_w, ' W')}" for g in gpus],
            ),
            (
                "PCIe now / max",
                [f"{_link(g.pcie_gen, g.pcie_width)} / {_link(g.pcie_gen_max, g.pcie_width_max)}" for g in gpus],
            ),
            ("ECC / MIG", [f"{_opt(g.ecc_enabled)} / {_opt(g.mig_enabled)}" for g in gpus]),
            ("temperature", [_opt(g.temperature_start_c, " C") for g in gpus]),
            ("other processes", [_opt(g.other_processes) for g in gpus]),
            ("NVLink links up", [_opt(g.nvlink_active) for g in gpus]),
        ]
    else:
        rows.append(("memory", [human_bytes(host.memory_bytes) if host.memory_bytes else "-"]))
    for label, values in rows:
        table.add_row(label, *(literal(v) for v in values))
    return table


def summary_table(run: RunSubmission) -> Table:
    """One row per benchmark and GPU: best figure, where it was reached, and what did not run."""
    table = Table(title=literal(f"flopfleet run {run.run_id} ({run.suite}, {run.device})"), header_style="bold")
    for column in ("benchmark", "gpu", "ok", "best", "at", "% peak", "per watt", "not ok"):
        table.add_column(column, justify="right" if column in ("ok", "best", "% peak", "per watt") else "left")
    groups: dict[tuple[str, int | None], list[Result]] = defaultdict(list)
    for result in run.results:
        groups[(result.name, result.gpu_index)].append(result)
    for (name, gpu_index), results in groups.items():
        ok = [r for r in results if r.status == "ok"]
        scored = [(headline(r), r) for r in ok]
        ranked = [(h, r) for h, r in scored if h is not None]
        best = max(ranked, key=lambda item: item[0][0]) if ranked else None
        statuses: dict[str, int] = defaultdict(int)
        for r in results:
            if r.status != "ok":
                statuses[r.status] += 1
        cells = (
            name,
            str(gpu_index) if gpu_index is not None else "cpu" if run.device == "cpu" else "all",
            f"{len(ok)}/{len(results)}",
            f"{number(best[0][0])} {best[0][1]}" if best else "-",
            describe(best[1]) if best else "-",
            percent(best[1].peak_fraction) if best and best[1].peak_fraction is not None else "-",
            _per_watt_text(best[1]) if best else "-",
            ", ".join(f"{n} {s}" for s, n in statuses.items()) or "",
        )
        table.add_row(*(literal(cell) for cell in cells))
    return table


def _per_watt_text(result: Result) -> str:
    found = per_watt(result)
    return f"{number(found[0])} {found[1]}" if found is not None else "-"


def problems(run: RunSubmission) -> list[Text]:
    """One line per distinct reason a result was not ok, per flag raised, and per error counter that moved."""
    lines: dict[str, int] = defaultdict(int)
    if run.interrupted:
        lines[f"the run was interrupted ({run.interrupted}): it keeps what it measured"] += 1
    for gpu in run.gpus:
        for alarm in alarms(gpu):
            lines[f"GPU {gpu.index}: {alarm}"] += 1
    for r in run.results:
        if r.status != "ok":
            lines[f"{r.name}: {r.status}: {r.reason}"] += 1
        for flag in r.flags:
            lines[f"{r.name}: flagged {flag}"] += 1
    return [literal(f"{text} (x{count})" if count > 1 else text) for text, count in lines.items()]


def starved_note(event: CaseEvent) -> str:
    """Said at the first starved case: what it means for this run, while it still runs."""
    timing = event.result.timing if event.result is not None else None
    share = timing.host_wait if timing is not None else None
    waited = f" (its threads waited for a CPU {share:.0%} of their time)" if share else ""
    return (
        f"{event.benchmark} {event.label} did not get the host it needed{waited}: the host is busy. Its figures "
        "and any others like it are flagged 'starved' and kept out of verdicts"
    )


def benchmarks_table(suite: Suite, benchmarks: Iterable[AnyBenchmark], cases: dict[str, list[str]]) -> Table:
    table = Table(title=literal(f"suite {suite.name}: {suite.description}"), header_style="bold")
    for column in ("benchmark", "cases", "description", "params"):
        table.add_column(column)
    for bench in benchmarks:
        labels = cases[bench.NAME]
        shown = ", ".join(labels[:4]) + (f", … ({len(labels) - 4} more)" if len(labels) > 4 else "")
        table.add_row(*(literal(cell) for cell in (bench.NAME, str(len(labels)), bench.DESCRIPTION, shown)))
    return table


def delivery_line(delivery: Delivery) -> Text:
    """One line per run or spool entry: stored, or not sent and why, and where it is kept."""
    if delivery.status in ("sent", "duplicate"):
        word = "stored" if delivery.status == "sent" else "already stored"
        return literal(f"run {delivery.run_id}: {word} by the collector ({delivery.detail})")
    if delivery.status == "skipped":
        return literal(f"spool entry {delivery.path or delivery.run_id}: skipped, left alone: {delivery.detail}")
    if delivery.path is None:
        return literal(f"run {delivery.run_id}: not sent and not kept: {delivery.detail}", "bold red")
    return literal(f"run {delivery.run_id}: not sent: {delivery.detail}; kept at {delivery.path}")


def verdict_lines(verdicts: Sequence[GpuVerdict]) -> list[Text]:
    """One line per GPU, as a prolog's log shows it: index, UUID, model, level (as Nagios words it), each figure
    against its references, and why."""
    lines = []
    for v in verdicts:
        where = f"GPU {v.gpu_index}" if v.gpu_index is not None else "machine"
        word = NAGIOS[v.level]
        figures = "; ".join(_figure_text(f) for f in v.figures)
        name = " ".join(part for part in (where, v.uuid, v.gpu_model) if part)
        head = Text.assemble(literal(f"{name}: "), literal(f"{word} ({v.level.value})", LEVEL_STYLE[v.level.value]))
        if figures:
            head.append_text(literal(f" · {figures}"))
        if v.reasons:
            head.append_text(literal(" · " + "; ".join(v.reasons)))
        if v.baseline:
            head.append_text(literal(f" · {v.baseline}", "dim"))
        head.append_text(literal(f" [judged by the {v.judged_by}]", "dim"))
        lines.append(head)
    return lines


def _figure_text(f: FigureVerdict) -> str:
    parts = []
    if f.peers:
        parts.append(f"{f.value / f.peers:.2f}× peers")
    if f.history:
        parts.append(f"{f.value / f.history:.2f}× own")
    if f.baseline:
        parts.append(f"{f.value / f.baseline:.2f}× {'siblings' if f.baseline_kind == 'sibling' else 'baseline'}")
    if f.floor:
        parts.append(f"floor {f.floor:,.0f}")
    if f.held_to and f.healthy_down_to is not None:
        parts.append(f"held to {REFERENCE_WORDS[f.held_to]}: healthy down to {f.healthy_down_to:,.0f}")
    refs = f" ({', '.join(parts)})" if parts else ""
    return f"{f.figure} {number(f.value)} {f.unit}{refs}"


#: The words a Nagios-style consumer expects beside each exit code.
NAGIOS = {Level.ok: "OK", Level.suspect: "WARNING", Level.slow: "CRITICAL", Level.faulty: "CRITICAL",
          Level.unknown: "UNKNOWN"}  # fmt: skip


def settings_table(settings: Resolved) -> Table:
    """Each setting, its value and where it came from; the token only as set or not, never its value."""
    table = Table(
        "setting", "value", "from", header_style="bold", title=literal(f"config file: {settings.file or 'none'}")
    )
    for name, value in settings.values.items():
        shown = ", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else value
        table.add_row(literal(name), literal("" if shown is None else shown), literal(settings.sources[name], "dim"))
    table.add_row(
        literal("token"), literal("set" if settings.token else "not set"), literal(settings.token_source, "dim")
    )
    return table
