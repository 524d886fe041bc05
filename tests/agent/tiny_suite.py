"""A suite of one tiny matmul, registered through FLOPFLEET_PLUGINS: ``check``'s delivery paths in seconds."""

from __future__ import annotations

from agent.benchmarks.matmul import MatmulGrid
from agent.harness.plugins import register
from agent.harness.suites import QUICK, Suite

TINY = Suite(name="tiny", description="one 128 matmul in fp32", policy=QUICK.policy,
             grids={"matmul": MatmulGrid(sizes=(128,), dtypes=("fp32",))})  # fmt: skip
register(suites=(TINY,))
