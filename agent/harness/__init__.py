"""What a suite is and the life of one case in it: the suites, the plugins that add to them, and the harness a case
is measured in (``cases``)."""
