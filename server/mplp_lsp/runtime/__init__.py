"""The L3 runtime: project semantic graph, lifecycle, value state, actions, drift."""
