"""The flopfleet agent: probes a GPU machine, runs the benchmark suite and posts the results."""

__version__ = "0.1.0"
