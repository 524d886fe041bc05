"""The flopfleet collector: stores runs in DuckDB, compares cards, serves reports and SQL."""

__version__ = "0.1.0"
