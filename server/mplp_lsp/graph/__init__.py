"""The project semantic graph (PSG): its nodes, their edges, and integrity on every write.

Every write runs on the store's writer thread inside one transaction
(:meth:`~mplp_lsp.store.writer.StoreWriter.run`). A write either applies completely or raises
:class:`~mplp_lsp.graph.integrity.Rejected`, which rolls the whole transaction back, so a
refused change leaves the graph exactly as it was. The checks, in the order a write meets them:

* the object validates against its schema (``schemas/v2``), so ids are lowercase UUID v4;
* a new object starts in its lifecycle's first state (plan ``draft``, steps ``pending``);
* every reference resolves (plan → context, trace → context/plan, confirm → target,
  segment → parent segment; dependencies → steps of the same plan) and no id is reused;
* the steps of a plan form a DAG; a cycle is refused and named;
* status changes pass :mod:`mplp_lsp.plans.transitions`, and a change older than the
  recorded one never moves a node backwards;
* trace segments are append-only (also enforced by triggers in the store).

Modules, one job each:

* protocol nodes: :mod:`.contexts`, :mod:`.plans`, :mod:`.steps`, :mod:`.confirms`,
  :mod:`.traces`, :mod:`.ci` (pipelines); shared checks in :mod:`.integrity`, what a write
  produced in :mod:`.changes`, its events kept until published in :mod:`.pending`;
* nodes kept from committed events: :mod:`.files` (file nodes), :mod:`.snapshots` (their
  recorded content), :mod:`.commits` (commit, author and branch nodes);
* :mod:`.graph_events` builds ``graph_update`` events; :mod:`.inspection` reads the graph whole;
* front doors: :mod:`.service` (what the HTTP API, LSP requests and consumers call) and
  :mod:`.requests` (the ``mplp/psg/...`` LSP methods).
"""
