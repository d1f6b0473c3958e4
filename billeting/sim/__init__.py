"""Scheduler testing framework: simulated fleets, load and failures run
through Billeting's real decision code, designs compared side by side."""
