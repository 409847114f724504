"""The one shape of a language-server feature, and the one way features are registered.

A feature is a class with one job (documents, file operations, drift, ...). Its methods that
answer the editor are marked with :func:`handles` (an LSP request or notification) or
:func:`command` (``workspace/executeCommand``); :func:`register` gives them to pygls. A
feature that learns its methods only at run time (the graph requests) overrides
:meth:`Feature.handlers`. When the server starts recording a workspace it tells every feature
(:meth:`Feature.recording`), so no feature is wired by hand in the server.

pygls is given plain functions, never bound methods: it sets attributes on what it registers
and inspects its first parameter to decide whether to pass the server, and a feature already
has its server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pygls.lsp.server import LanguageServer

if TYPE_CHECKING:
    from mplp_lsp.engine.workspace import Workspace

_MARK = "_mplp_lsp_handles"
Fn = TypeVar("Fn", bound=Callable[..., Any])
# The server a feature serves (lsp/server.py); a parameter, so this module does not import it.
Server = TypeVar("Server", bound=LanguageServer)


@dataclass(frozen=True)
class Handler:
    kind: Literal["method", "command"]
    name: str
    call: Callable[..., Any]
    options: Any = None


def handles(method: str, options: Any = None) -> Callable[[Fn], Fn]:
    """Mark a feature's method as the handler of an LSP ``method`` (called with its params)."""

    def mark(function: Fn) -> Fn:
        setattr(function, _MARK, ("method", method, options))
        return function

    return mark


def command(name: str) -> Callable[[Fn], Fn]:
    """Mark a feature's method as the handler of a command (called with its arguments)."""

    def mark(function: Fn) -> Fn:
        setattr(function, _MARK, ("command", name, None))
        return function

    return mark


class Feature(Generic[Server]):
    """Base class of the server's features."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def handlers(self) -> Iterator[Handler]:
        """What this feature answers: its marked methods."""
        for name in dir(type(self)):
            mark = getattr(getattr(type(self), name), _MARK, None)
            if mark is not None:
                kind, method, options = mark
                yield Handler(kind, method, getattr(self, name), options)

    async def recording(self, workspace: Workspace) -> None:
        """The server has begun recording ``workspace`` (it owns the store)."""

    def status_changed(self) -> None:
        """What the server reports as its status (its folders, their stores) has changed."""


def register(server: LanguageServer, features: Iterable[Feature[Any]]) -> None:
    for feature in features:
        for handler in feature.handlers():
            if handler.kind == "command":
                server.command(handler.name)(_plain(handler.call))
            else:
                server.feature(handler.name, handler.options)(_plain(handler.call))


def _plain(call: Callable[..., Any]) -> Callable[..., Any]:
    # No annotations and no "ls" parameter: pygls passes only the params (or the command's
    # arguments, all of them, to the *args).
    if asyncio.iscoroutinefunction(call):

        async def handler_async(*args):  # type: ignore[no-untyped-def]
            return await call(*args)

        return handler_async

    def handler(*args):  # type: ignore[no-untyped-def]
        return call(*args)

    return handler


def json_params(params: Any) -> Any:
    """pygls hands unknown requests' params over as namedtuples; the core takes JSON."""
    if hasattr(params, "_asdict"):
        return {key: json_params(value) for key, value in params._asdict().items()}
    if isinstance(params, list | tuple):
        return [json_params(item) for item in params]
    return params
