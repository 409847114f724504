"""Drift between the PSG and the file system or repository (spec §6.5)."""

from mplp_lsp.drift.model import Drift, Reason, RepositoryDrift, Strategy
from mplp_lsp.drift.monitor import DriftMonitor, ScanSummary
from mplp_lsp.drift.reconcile import Resolution

__all__ = [
    "Drift",
    "DriftMonitor",
    "Reason",
    "RepositoryDrift",
    "Resolution",
    "ScanSummary",
    "Strategy",
]
