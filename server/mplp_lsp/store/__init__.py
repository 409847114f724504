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
