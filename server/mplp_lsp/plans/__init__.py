"""Running a plan (spec §2.3, §4, §6): the single-agent flow and its SA profile (the single-
agent profile's invariants), the plan's execution step by step, the L2 status transitions,
rollback by PSG snapshot, and the one entry every caller runs a plan through (runs)."""
