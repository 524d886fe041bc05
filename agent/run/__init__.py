"""One run, from its frozen config to its delivery: the machine's facts, the session, the case plan, the health
check, the upload and the spool."""
