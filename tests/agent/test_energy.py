"""The energy counter's rule (agent/machine/energy.py) and the per-watt figure (schemas.labels.per_watt), on the CPU.
The counter itself is read on a GPU (tests/gpu/test_gpu.py)."""

from __future__ import annotations

import random
import statistics
import time

import pytest

from agent.machine.energy import (
    OBSERVE_EVERY_S,
    UPDATE_S,
    EnergyMeter,
    Move,
    Window,
    WindowEnergy,
    whole_updates,
    window_energy,
)
from agent.timing import Phases, summarize
from schemas.labels import per_watt
from tests import factories


class Counter:
    """A board's energy counter as the H200's behaves (docs/methodology.md): it moves every ``UPDATE_S`` (each update
    up to 2 ms off its schedule), each step the energy of the time since the last, at ``idle_w`` before ``busy_from``
    and ``busy_w`` after it."""

    def __init__(self, phase_s: float, busy_from: float, rng: random.Random, idle_w: float = 100.0,
                 busy_w: float = 700.0) -> None:  # fmt: skip
        self.updates = [phase_s + k * UPDATE_S + rng.uniform(-0.002, 0.002) for k in range(-20, 80)]
        self.busy_from, self.idle_w, self.busy_w = busy_from, idle_w, busy_w

    def _energy_until(self, t: float) -> float:
        return self.idle_w * min(t, self.busy_from) + self.busy_w * max(0.0, t - self.busy_from)

    def read(self, t: float) -> int:
        """Millijoules at ``t``: the energy up to the last update at or before it."""
        last = max(u for u in self.updates if u <= t)
        return round(1000 * self._energy_until(last))


def _window(counter: Counter, start: float, length: float, every_s: float) -> Window:
    """A window's reads as the meter takes them: at its start, every ``every_s`` (a batch, a 4 ms read), at its end."""
    window = Window(counter.read(start), start)
    t = start + every_s
    while t < start + length:
        window.saw(counter.read(t), t)
        t += every_s
    window.saw(counter.read(start + length), start + length)
    return window


def test_a_window_after_a_rest_reads_the_loaded_boards_power_not_the_rests_nor_a_low_board_reading() -> None:
    # The fault the H200 showed: a power-capped product read at 370-390 W after a rest, the 1 s reading low. Windows
    # of 150 ms to 1 s at random phases of the counter, the board idle at 100 W until the window starts, its reading
    # (a 1 s average) 350 W: every window holding two moves reads 700 W, within the updates' own jitter.
    rng = random.Random(7)
    errors, empty = [], 0
    for _ in range(300):
        start, length = 3.0 + rng.uniform(0, UPDATE_S), rng.uniform(0.15, 1.0)
        counter = Counter(phase_s=rng.uniform(0, UPDATE_S), busy_from=start, rng=rng)
        window = _window(counter, start, length, every_s=OBSERVE_EVERY_S + 0.004)
        assert window.first is not None
        if window.last is None:
            empty += 1
            continue
        found = window_energy(window.first, window.last, length, power_read_w=350.0)
        assert found is not None
        errors.append(abs(found.power_w - 700.0) / 700.0)
    assert empty < 60 and len(errors) > 240
    assert max(errors) < 0.05 and statistics.median(errors) < 0.01


def test_reads_far_apart_in_a_long_window_let_the_boards_reading_pick_the_count() -> None:
    # Batches of 350 ms: the moves are known to 350 ms, so 2 s could hold 15 to 22 updates; the board's reading,
    # averaged over the window itself, picks the count.
    rng = random.Random(3)
    counter = Counter(phase_s=0.03, busy_from=0.0, rng=rng)
    window = _window(counter, 4.0, 2.0, every_s=0.35)
    assert window.first is not None and window.last is not None
    assert len(whole_updates(window.first, window.last)) > 1
    found = window_energy(window.first, window.last, 2.0, power_read_w=690.0)
    assert found is not None and found.power_w == pytest.approx(700.0, rel=0.03)


def test_a_window_with_fewer_than_two_moves_says_nothing() -> None:
    counter = Counter(phase_s=0.05, busy_from=0.0, rng=random.Random(1))
    window = _window(counter, 2.0, 0.08, every_s=0.014)  # 80 ms: at most one move
    assert window.last is None
    first = Move(after=1.0, by=1.01, millijoules=5000)
    assert window_energy(first, first, 0.3, power_read_w=700.0) is None


def test_the_power_reaches_the_timing_statistics() -> None:
    energy = WindowEnergy(joules=140.0, span_s=0.2, window_s=0.23)
    stats = summarize([0.01, 0.011, 0.012], method="cuda_event", warmup=1, calls_per_repeat=1, total_s=0.3,
                      phases=Phases(warmup_s=0.05, energy=energy))  # fmt: skip
    assert stats.power_w == pytest.approx(700.0)
    assert (stats.energy_j, stats.energy_span_s) == (140.0, 0.2)
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


class SimulatedMeter(EnergyMeter):
    """The meter with the board's counter replaced by ``Counter`` on this process's clock, each read taking 4 ms as on
    the H200: its own thread, windows and arithmetic are the agent's."""

    def __init__(self, counter: Counter) -> None:
        super().__init__("00000000-0000-0000-0000-000000000000")
        self.counter = counter

    @property
    def available(self) -> bool:
        return True

    def _read(self) -> tuple[int, float] | None:
        before = time.perf_counter()
        time.sleep(0.004)
        return self.counter.read(time.perf_counter() - 0.002), (before + time.perf_counter()) / 2


def test_the_meter_reads_the_counter_in_its_own_thread_while_the_window_works() -> None:
    # The timing loop holds the interpreter between its batches (here: 300 ms of pure Python); the meter's thread
    # still reads every 10 ms, so the moves are known to a read and the power is the loaded board's.
    start = time.perf_counter()
    meter = SimulatedMeter(Counter(phase_s=start + 0.031, busy_from=start, rng=random.Random(5)))
    window = meter.start()
    assert window is not None
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        sum(range(1000))
    found = meter.stop(window)
    assert found is not None and window.poller is not None and not window.poller.is_alive()
    assert window.first is not None and window.last is not None and found.span_s >= 2 * UPDATE_S
    counts = whole_updates(window.first, window.last)
    if len(counts) == 1:  # reads 10 ms apart, as on a quiet host
        assert found.power_w == pytest.approx(700.0, rel=0.05)
    else:  # a starved host held a read up: the count is one the reads allow, and says so by its range
        assert min(found.joules / (k * UPDATE_S) for k in counts) <= 740.0
