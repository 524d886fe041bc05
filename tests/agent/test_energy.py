"""The energy counter's rule (agent/machine/energy.py) and the per-watt figure (schemas.labels.per_watt), on the CPU.
The counter itself is read on a GPU (tests/gpu/test_gpu.py)."""

from __future__ import annotations

import pytest

from agent.machine.energy import UPDATE_S, WindowEnergy, window_energy
from agent.timing import Phases, summarize
from schemas.labels import per_watt
from tests import factories


def test_a_window_holding_two_whole_updates_is_read_as_their_mean_power_not_its_own_length() -> None:
    # 150 ms at 700 W: the counter moved by one update (70 J) or two (140 J), never by 105 J.
    for joules in (70.0, 140.0):
        found = window_energy(joules, 0.15, power_read_w=690.0)
        assert found is not None
        assert found.power_w == pytest.approx(700.0)
        assert found.span_s == pytest.approx(round(joules / 70.0) * UPDATE_S)


def test_a_power_reading_far_off_still_picks_the_right_count_among_the_two_the_length_allows() -> None:
    # 1.05 s holds 10 or 11 updates; a reading 4 % high still tells them apart (10 would read 770 W, 11 700 W).
    found = window_energy(770.0, 1.05, power_read_w=728.0)
    assert found is not None and found.span_s == pytest.approx(1.1) and found.power_w == pytest.approx(700.0)
    # Without a reading the count is the nearest whole number of periods.
    assert window_energy(700.0, 1.0, power_read_w=None).power_w == pytest.approx(700.0)  # type: ignore[union-attr]


def test_a_window_no_update_fell_in_says_nothing() -> None:
    assert window_energy(0.0, 0.05, power_read_w=700.0) is None
    assert window_energy(0.0, 0.3, power_read_w=700.0) is None


def test_the_power_reaches_the_timing_statistics() -> None:
    energy = WindowEnergy(joules=140.0, span_s=0.2, window_s=0.23)
    stats = summarize([0.01, 0.011, 0.012], method="cuda_event", warmup=1, calls_per_repeat=1, total_s=0.3,
                      phases=Phases(warmup_s=0.05, energy=energy))  # fmt: skip
    assert (stats.power_w, stats.energy_j, stats.energy_span_s) == (pytest.approx(700.0), 140.0, 0.2)
    plain = summarize([0.01], method="perf_counter", warmup=1, calls_per_repeat=1, total_s=0.1,
                      phases=Phases(warmup_s=0.0))  # fmt: skip
    assert plain.power_w is None


@pytest.mark.parametrize(
    ("benchmark", "unit"),
    [("matmul", "TFLOPS/W"), ("bandwidth", "GB/s/W"), ("inference", "tokens/J")],
)
def test_every_headline_has_its_figure_per_watt(benchmark: str, unit: str) -> None:
    built = {"matmul": lambda: factories.matmul(4096, "bf16", 600.0),
             "bandwidth": lambda: factories.bandwidth(1 << 28, 4000.0),
             "inference": lambda: factories.inference("decode", 8, 1024, 0.01)}[benchmark]()  # fmt: skip
    result = factories.make_run([built]).results[0]
    assert per_watt(result) is None  # no power read: no figure, never a guess
    timing = result.timing.model_copy(update={"power_w": 500.0})  # type: ignore[union-attr]
    value, got = per_watt(result.model_copy(update={"timing": timing}))  # type: ignore[misc]
    assert got == unit
    assert value > 0


def test_a_span_timed_from_a_late_seen_first_update_still_finds_its_whole_updates() -> None:
    # Three updates at 700 W after the first one inside the window, which a read saw 20 ms late: 210 J over 0.32 s
    # of counted time could be 3 or 4 updates; the board's reading picks 3.
    found = window_energy(210.0, 0.32, power_read_w=690.0)
    assert found is not None and found.span_s == pytest.approx(0.3) and found.power_w == pytest.approx(700.0)
