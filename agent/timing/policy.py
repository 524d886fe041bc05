"""How long and how often a case is measured: the policies suites choose and tests shrink."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to measure one case; suites choose one, tests shrink it.

    By default the measuring window is short and nearly fixed (``min_time_s`` to ``max_time_s``): a GPU at its
    power cap moves its clocks within tenths of a second, so windows of similar length in two runs see the same
    regime. With ``settle_rel`` the warm-up instead lasts until the timings stop moving (at least ``warmup_s``, at
    most ``max_warmup_s``), and with ``target_rel_ci`` repetition stops once the median is known to that fraction
    (the half-width of its 95 % confidence interval), not at a window's length: the regime is then the steady
    state, whatever the window. With ``unknown_max_time_s`` a window whose median is not known by ``max_time_s``
    goes on until it is, at most that long, and is reported unsettled if it never is: a 25 ms product gets five
    repeats in 0.12 s, and where the power limiter's quarter-second dip fell among them its median moved by 5 %.
    """

    warmup_s: float = 0.02
    min_warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 500
    min_time_s: float = 0.06
    max_time_s: float = 0.12
    target_rel_iqr: float = 0.03
    graph_below_s: float = 2e-3  # replay calls shorter than this as a CUDA graph
    graph_target_s: float = 4e-3  # one graph replay should last about this long
    graph_max_calls: int = 256
    graph_host_share: float = 0.25  # ... or whose launch takes the host more than this share of the GPU's time
    batch: int = 5  # at most this many repeats enqueued between host synchronisations
    sync_s: float = 0.01  # with the repeats' time known, enough of them between synchronisations to last this long
    settle_rel: float = 0.0  # > 0: warm up until consecutive windows of repeats have medians this close (relative)
    settle_window_s: float = 0.02  # a settling window holds at least this much time of repeats
    settle_windows: int = 2  # how many consecutive windows must agree
    max_warmup_s: float = 1.0  # with settle_rel: the warm-up ends about here, settled or not (flagged 'unsettled')
    target_rel_ci: float = 0.0  # > 0: stop once the median's 95 % confidence interval is this narrow (relative)
    unknown_max_time_s: float = 0.0  # > max_time_s: with target_rel_ci, a median not yet known goes on to here
    sustain_s: float = 0.0  # the least warm-up of a case that measures a rate under continuous load (for_sustained)
    sustain_from_call_s: float = 0.0  # the sustained warm-up is for calls this long or longer (shorter: light loads)
    unsustained_warmup_s: float | None = None  # the warm-up for_sustained raised (None: it did not)
    long_call_s: float = 0.0  # > 0: a call this long is a window of its own (for_long_calls)
    long_repeats: int = 3  # ... and this many of them are enough
    brief_call_s: float = 0.0  # > 0: a call shorter than this warms up for brief_max_warmup_s at most (warmup_limit)
    brief_max_warmup_s: float = 0.1
    rest_s: float = 0.0  # the device idles this long before the timed windows of a call of rest_from_call_s or more
    rest_from_call_s: float = 0.0

    def __post_init__(self) -> None:
        if self.min_warmup < 1 or self.min_repeats < 2 or self.max_repeats < self.min_repeats:
            raise ValueError("timing needs min_warmup >= 1 and 2 <= min_repeats <= max_repeats")
        if self.max_time_s < self.min_time_s:
            raise ValueError("timing needs min_time_s <= max_time_s")
        if self.settle_rel < 0 or self.target_rel_ci < 0 or self.batch < 1 or self.settle_windows < 2:
            raise ValueError("timing needs settle_rel, target_rel_ci >= 0, batch >= 1 and settle_windows >= 2")
        if self.max_warmup_s < max(self.warmup_s, self.sustain_s):
            raise ValueError("timing needs warmup_s and sustain_s <= max_warmup_s")
        if self.long_call_s < 0 or self.long_repeats < 2:
            raise ValueError("timing needs long_call_s >= 0 and long_repeats >= 2")
        if self.unknown_max_time_s and (self.unknown_max_time_s < self.max_time_s or not self.target_rel_ci):
            raise ValueError("timing needs unknown_max_time_s >= max_time_s, and target_rel_ci to go with it")
        if self.brief_call_s < 0 or self.brief_max_warmup_s <= 0:
            raise ValueError("timing needs brief_call_s >= 0 and brief_max_warmup_s > 0")
        if self.rest_s < 0 or self.rest_from_call_s < 0:
            raise ValueError("timing needs rest_s and rest_from_call_s >= 0")

    @property
    def settles(self) -> bool:
        return self.settle_rel > 0

    def for_sustained(self) -> TimingPolicy:
        """This policy for a rate under continuous load (matmul, a training step): at least ``sustain_s`` of
        warm-up, so the power limit's transient is over before anything is timed."""
        if not self.sustain_s or self.unsustained_warmup_s is not None:
            return self
        return replace(self, warmup_s=max(self.warmup_s, self.sustain_s), unsustained_warmup_s=self.warmup_s)

    def is_long(self, call_s: float) -> bool:
        return 0.0 < self.long_call_s <= call_s

    def for_call(self, call_s: float) -> TimingPolicy:
        """This policy once a call is known to take ``call_s`` on the device: a sustained warm-up only where the
        call is heavy enough to bring the power limit in (``sustain_from_call_s``: on the H200 a 2048^3 bf16
        product, 27 us between flushes, kept 1980 MHz, a 4096^3 one, 195 us, was held to 1605-1725 MHz), and
        ``for_long_calls`` where a call is a window of its own."""
        policy = self
        if self.unsustained_warmup_s is not None and call_s < self.sustain_from_call_s:
            policy = replace(policy, warmup_s=self.unsustained_warmup_s, unsustained_warmup_s=None)
        return policy.for_long_calls() if policy.is_long(call_s) else policy

    def rest_before(self, call_s: float) -> float:
        """How long the device idles before a case's timed windows (after its warm-up calls): ``rest_s`` for a call
        of ``rest_from_call_s`` or more that is not timed under sustained load (``for_sustained``) nor a window of its
        own. Such a cell (a BERT-large block at batch 128, 4.4 ms a call) reads what the cells before it left: right
        after 0.4 s of load its first windows on the H200 were 14 % slower than after a rest and 22 % apart over
        four trials; after 40 ms idle, 0.5 % apart (benchmarks/rest_before_cell.py). Its first call used to make
        that pause, before the call was prepared ahead."""
        if not self.rest_s or call_s < self.rest_from_call_s or self.is_long(call_s):
            return 0.0
        return 0.0 if self.unsustained_warmup_s is not None else self.rest_s

    def warmup_limit(self, timed_call_s: float) -> float:
        """About when a settling warm-up ends, settled or not, once its timed repeats say a call takes
        ``timed_call_s``. A call under ``brief_call_s`` (a 512^3 product: less time than the L2 flush before it)
        times the launch and the clock's dithering at light load, which no warm-up removes: on the H200 such
        cells' windows agreed within 1 % in 0.3 s in 3 of 8, and moved by up to 4.9 % between runs all the same,
        so theirs ends at ``brief_max_warmup_s``. (Told by the timed repeats, not the warm-up calls: a first call's
        events also hold the host's launch.)"""
        if timed_call_s < self.brief_call_s:
            return min(self.max_warmup_s, max(self.brief_max_warmup_s, self.warmup_s))
        return self.max_warmup_s

    def warmed_up(self, calls: int, elapsed_s: float, call_s: float) -> bool:
        """Whether the warm-up calls may stop after ``calls`` of them, ``elapsed_s`` since the case began, the
        fastest taking ``call_s``: at least ``min_warmup``, then at once where settling goes on from the timed
        repeats, else once this call's warm-up time (``for_call``) has passed."""
        if calls < self.min_warmup:
            return False
        settling = self.settles and not self.is_long(call_s)
        return settling or elapsed_s >= self.for_call(call_s).warmup_s

    def for_long_calls(self) -> TimingPolicy:
        """This policy for calls of ``long_call_s`` or more (a prefill of thousands of tokens, a training step, an
        fp32 product of 16384): each call is continuous load long enough to be a settling window by itself, so one
        warm-up call (or ``warmup_s`` of them) replaces the windows, and ``long_repeats`` calls are timed. Settling
        them call by call took 2-3.5 s of warm-up a case on the H200 and still ended unsettled: single calls of a
        power-capped GPU differ by more than 1 %, and a window of one call has no noise estimate to allow for it."""
        return replace(self, settle_rel=0.0, min_warmup=1, min_repeats=min(self.min_repeats, self.long_repeats),
                       max_repeats=max(min(self.max_repeats, self.long_repeats), 2), batch=1)  # fmt: skip


@dataclass(frozen=True)
class BurstPolicy:
    """Bursts of ``calls`` after ``idle_s`` of idleness; statistics over the ``keep`` fastest calls."""

    bursts: int = 5
    calls: int = 10
    idle_s: float = 0.3
    keep: int = 5


@dataclass(frozen=True)
class GroupPolicy:
    """How a case that spans several processes is timed: fixed counts, because every rank must run the same
    number of collectives (a rank that stops early leaves the others waiting forever)."""

    warmup: int = 5
    repeats: int = 20
    repeat_s: float = 0.02  # one timed repeat lasts about this long; calls per repeat come from a pilot call
    max_calls: int = 1000

    def __post_init__(self) -> None:
        if self.warmup < 1 or self.repeats < 2 or self.max_calls < 1 or self.repeat_s <= 0:
            raise ValueError("group timing needs warmup >= 1, repeats >= 2, max_calls >= 1, repeat_s > 0")
