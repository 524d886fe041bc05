"""The ``power_capped`` rule: a figure whose clock the board's power limit chose says so, in every run."""

from __future__ import annotations

import pytest

from agent.machine.nvml import POWER_CAPPED_CLOCK, power_capped, slowed_down
from schemas import Gpu, StateSummary

H200 = Gpu(index=0, name="NVIDIA H200", memory_bytes=150_000_000_000, sm_clock_max_mhz=1980, power_limit_w=700.0,
           power_limit_default_w=700.0)  # fmt: skip


def _state(median_mhz: int, *reasons: str) -> StateSummary:
    return StateSummary(samples=5, sm_clock_mhz_min=median_mhz - 30, sm_clock_mhz_median=median_mhz,
                        power_w_max=699.0, throttle_reasons=reasons)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(
    ("median_mhz", "reasons", "capped"),
    [
        (1507, ("sw_power_cap",), True),  # tf32 matmul at 16384 on the H200
        (int(POWER_CAPPED_CLOCK * 1980) + 1, ("sw_power_cap",), False),  # the cap touched, the clock near its top
        (1965, ("sw_power_cap",), False),  # a BERT layer grazing the cap
        (1507, (), False),  # slow, but not for the power limit (a low application clock, say)
        (1507, ("gpu_idle",), False),
    ],
)
def test_a_cell_is_power_capped_where_the_limit_set_its_clock(median_mhz: int, reasons: tuple[str, ...],
                                                              capped: bool) -> None:  # fmt: skip
    assert power_capped(_state(median_mhz, *reasons), H200) is capped


def test_without_the_clocks_maximum_or_a_median_nothing_is_claimed() -> None:
    unknown = H200.model_copy(update={"sm_clock_max_mhz": None})
    assert not power_capped(_state(1000, "sw_power_cap"), unknown)
    assert not power_capped(_state(1000, "sw_power_cap"), None)
    assert not power_capped(StateSummary(samples=1, throttle_reasons=("sw_power_cap",)), H200)


def test_a_limit_set_below_the_default_is_a_slowdown_not_the_cards_normal_cap() -> None:
    # finish_case flags such a case throttled (a fault) and only otherwise power_capped: the two never go together
    lowered = H200.model_copy(update={"power_limit_w": 500.0})
    state = _state(1300, "sw_power_cap")
    assert slowed_down(state.throttle_reasons, lowered) and power_capped(state, lowered)
    assert not slowed_down(state.throttle_reasons, H200) and power_capped(state, H200)
