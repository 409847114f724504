"""Forwarding accepted envelopes to a remote runtime through a durable outbox.

The core (:mod:`.outbox`, :mod:`.retry`, :mod:`.batching`, :mod:`.forwarder`, :mod:`.status`)
imports no HTTP library, so it can be tested on its own; :mod:`.sender` is the aiohttp
transport. docs/forwarding.md states the reliability contract.
"""
