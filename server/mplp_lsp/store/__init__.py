"""The durable local store: one SQLite database per workspace.

An event is *accepted* only once the transaction holding it has committed with
``synchronous=FULL`` (see :mod:`mplp_lsp.store.database`): from then on it survives a
killed process and a power loss, and everything downstream (PSG, forwarding, diagnostics)
can be rebuilt from it. :class:`StoreWriter` is the only writer and runs all SQLite work
on its own thread; :class:`EventLog` is the synchronous layer it (and read-only readers)
use on a connection. Rejected input never reaches this log: it goes to the separate
:class:`IntegrationErrorLog` (spec §7.6).

Plain Python: nothing here knows about LSP or HTTP.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mplp_lsp.store.database import SCHEMA_VERSION, StoreVersionError, connect, transaction
    from mplp_lsp.store.errorlog import IntegrationErrorLog
    from mplp_lsp.store.events import EventLog, NewEvent, StoredEvent
    from mplp_lsp.store.writer import StoreWriter

__all__ = [
    "SCHEMA_VERSION",
    "EventLog",
    "IntegrationErrorLog",
    "NewEvent",
    "StoreVersionError",
    "StoreWriter",
    "StoredEvent",
    "connect",
    "transaction",
]

# Each name from its module at first use: a reader of the store (``mplp-lsp events``) does
# not pay for the writer's thread and asyncio machinery.
_MODULES = {
    "SCHEMA_VERSION": "database",
    "StoreVersionError": "database",
    "connect": "database",
    "transaction": "database",
    "IntegrationErrorLog": "errorlog",
    "EventLog": "events",
    "NewEvent": "events",
    "StoredEvent": "events",
    "StoreWriter": "writer",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
