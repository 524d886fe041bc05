"""Pure functions over the rows the store reads: comparison, health, regressions, machines, baselines; no connection."""
