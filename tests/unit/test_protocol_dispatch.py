"""The server tells a notification by its class, as pygls tells it by its fields."""

from __future__ import annotations

import attrs
import pytest
from lsprotocol import types
from pygls.protocol import json_rpc

from mplp_lsp.lsp.protocol import is_notification

pytestmark = pytest.mark.unit

MESSAGE_CLASSES = [
    kind
    for kind in vars(types).values()
    if isinstance(kind, type) and attrs.has(kind) and "jsonrpc" in attrs.fields_dict(kind)
] + [json_rpc.JsonRPCNotification, json_rpc.JsonRPCRequestMessage, json_rpc.JsonRPCResponseMessage]


def _as_pygls_sees_it(kind: type) -> bool:
    """pygls's own test: an instance is a request if it has the request's fields, else a
    notification if it has the notification's."""
    instance: object = object.__new__(kind)
    for field in attrs.fields(kind):
        object.__setattr__(instance, field.name, None)
    return not isinstance(instance, json_rpc.RPCRequest) and isinstance(
        instance, json_rpc.RPCNotification
    )


def test_there_are_messages_of_every_kind() -> None:
    assert len(MESSAGE_CLASSES) > 100
    assert types.DidSaveTextDocumentNotification in MESSAGE_CLASSES


@pytest.mark.parametrize("kind", MESSAGE_CLASSES, ids=lambda kind: kind.__name__)
def test_a_message_class_is_a_notification_as_pygls_tells_it(kind: type) -> None:
    assert is_notification(kind) is _as_pygls_sees_it(kind)


def test_a_class_that_is_not_attrs_is_left_to_pygls() -> None:
    class Duck:
        method = "textDocument/didSave"
        jsonrpc = "2.0"
        params = None

    assert is_notification(Duck) is False
