"""The engine: the open folders of a daemon and, for each, its store's owner (intake, bus,
consumers, compaction) or the follower that hands activity over, the file activity from a raw
report to the intake, and the state dir."""
