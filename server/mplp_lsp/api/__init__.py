"""The loopback HTTP API (aiohttp): a thin shell over the intake and the PSG service."""
