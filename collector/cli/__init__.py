"""The ``flopfleet-collector`` command: one module per command group; they parse, call and print."""
