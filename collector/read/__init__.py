"""The read path: one function per view (named queries plus analysis, returning plain data), and the report."""
