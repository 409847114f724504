"""What the API works on (kept apart from aiohttp, which loads at the first request)."""

from __future__ import annotations

from mplp_lsp.intake import Intake
from mplp_lsp.runtime.psg_service import PsgService
from mplp_lsp.store.writer import StoreWriter


class Engine:
    """What the API works on: one workspace's intake, PSG and store."""

    def __init__(self, intake: Intake, psg: PsgService, writer: StoreWriter) -> None:
        self.intake, self.psg, self.writer = intake, psg, writer
