"""The drift quick fixes: code actions, resolving them, and the command that applies one.

Four per drifted file (``mplp.resolveDrift`` with ``fs``, ``psg``, ``merge``, ``ignore``;
"file system wins" first and preferred). "PSG wins" and the merge rewrite the file. When the
editor has it open, they go through the editor (its buffer, its undo, its save): the action
carries the result as a ``WorkspaceEdit`` replacing the buffer's text, computed when the
client resolves the action (``codeAction/resolve``) or, for a client that cannot resolve an
action's edit (eglot 1.9), with the list; the action's command
(:data:`EDITED_COMMAND`) then tells the server, which waits for the editor's save to record
the resolution. Merge conflicts land in the buffer as markers. Writing the disk behind an
editor's back would leave its buffer stale, and saving it would put the old text back.
``mplp.resolveDrift`` run by itself does the same through ``workspace/applyEdit``; for a
file no editor has open, or content that is not text, the server writes the file itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types

from mplp_lsp.lsp.drift import CODE, SOURCE, locate
from mplp_lsp.lsp.feature import Feature, command, handles
from mplp_lsp.lsp.server import MplpLanguageServer

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from mplp_lsp.drift import Strategy
    from mplp_lsp.drift.reconcile import Proposal, Resolution
    from mplp_lsp.engine.workspace import Workspace

RESOLVE_COMMAND = "mplp.resolveDrift"
EDITED_COMMAND = "mplp.driftEdited"
_TITLES = (
    ("fs", "Drift: file system wins (update the project graph)"),
    ("psg", "Drift: PSG wins (restore the recorded content)"),
    ("merge", "Drift: three-way merge"),
    ("ignore", "Drift: decide later"),
)
_REWRITES = ("psg", "merge")  # the strategies that rewrite the file
_START = types.Position(line=0, character=0)


class QuickFixesFeature(Feature[MplpLanguageServer]):
    @handles(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix], resolve_provider=True
        ),
    )
    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        found = locate(self.server, uri)
        if found is None:
            return []
        workspace, path = found
        if path not in workspace.drift.open_drifts:
            return []
        ours = [d for d in params.context.diagnostics if d.source == SOURCE and d.code == CODE]
        actions = []
        for strategy, title in _TITLES:
            action = types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=ours or None,
                is_preferred=strategy == "fs",
                command=types.Command(
                    title=title, command=RESOLVE_COMMAND, arguments=[uri, strategy]
                ),
            )
            if strategy in _REWRITES and self._document(uri) is not None:
                action.data = {"uri": uri, "strategy": strategy}
                if not self._resolves_edits:
                    action = await self.resolve_action(action)
            actions.append(action)
        return actions

    @handles(types.CODE_ACTION_RESOLVE)
    async def resolve_action(self, action: types.CodeAction) -> types.CodeAction:
        """Give a rewriting action its edit for the editor's buffer (and the command that
        tells the server the editor applied it); left as it is when that cannot be done,
        so it runs as a command."""
        from mplp_lsp.drift import Strategy
        from mplp_lsp.drift.reconcile import Proposal

        data = action.data if isinstance(action.data, dict) else _plain(action.data)
        uri, strategy = data.get("uri"), data.get("strategy")
        if not isinstance(uri, str) or strategy not in _REWRITES:
            return action
        document = self._document(uri)
        found = locate(self.server, uri)
        if document is None or found is None:
            return action
        workspace, path = found
        proposal = await workspace.drift.propose(path, Strategy(strategy), document.source)
        if isinstance(proposal, Proposal):
            action.edit = self._replace_all(document, proposal.text)
            action.command = types.Command(
                title=action.title,
                command=EDITED_COMMAND,
                arguments=[uri, strategy, proposal.conflicts],
            )
        return action

    @command(EDITED_COMMAND)
    async def edited(self, *args: Any) -> dict[str, Any]:
        """The editor applied a rewriting action's edit: its save completes the resolution."""
        from mplp_lsp.drift import Strategy

        uri, strategy, conflicts = [*args, None, None, None][:3]
        if not (
            isinstance(uri, str)
            and strategy in _REWRITES
            and isinstance(conflicts, int)
            and not isinstance(conflicts, bool)
            and conflicts >= 0
        ):
            raise ValueError(f"{EDITED_COMMAND} takes a file URI, psg or merge, and a count")
        found = locate(self.server, uri)
        if found is None:
            raise ValueError(f"{uri} is not in a workspace")
        workspace, path = found
        result = await workspace.drift.in_editor(path, Strategy(strategy), conflicts)
        self._report(result)
        return result.to_json()

    @command(RESOLVE_COMMAND)
    async def resolve(self, *args: Any) -> dict[str, Any]:
        from mplp_lsp.drift import Strategy

        uri, strategy = [*args, None, None][:2]
        if not isinstance(uri, str) or strategy not in {s.value for s in Strategy}:
            raise ValueError(
                f"{RESOLVE_COMMAND} takes a file URI and one of fs, psg, merge, ignore"
            )
        await self.server.ready.wait()
        found = locate(self.server, uri)
        if found is None:
            raise ValueError(f"{uri} is not in a workspace")
        workspace, path = found
        document = self._document(uri)
        if strategy in _REWRITES and document is not None and self._applies_edits:
            result = await self._apply(workspace, path, Strategy(strategy), document)
        else:
            result = await workspace.drift.resolve(path, Strategy(strategy))
        self._report(result)
        return result.to_json()

    async def _apply(
        self, workspace: Workspace, path: str, strategy: Strategy, document: TextDocument
    ) -> Resolution:
        """The command's way through the editor: ``workspace/applyEdit``. Content that is not
        text is written on disk as before."""
        from mplp_lsp.drift.reconcile import NOT_TEXT, Proposal, Resolution

        proposal = await workspace.drift.propose(path, strategy, document.source)
        if not isinstance(proposal, Proposal):
            if proposal.code == NOT_TEXT:
                return await workspace.drift.resolve(path, strategy)
            return proposal
        answer = await self.server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(
                edit=self._replace_all(document, proposal.text),
                label=dict(_TITLES)[str(strategy)],
            )
        )
        if not answer.applied:
            why = answer.failure_reason or "declined"
            message = f"the editor did not apply the change ({why}); nothing changed"
            return Resolution(path, strategy, False, message)
        return await _in_editor(workspace, proposal)

    def _report(self, result: Resolution) -> None:
        if not result.ok:
            self.server.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=result.message)
            )

    def _document(self, uri: str) -> TextDocument | None:
        """The document, if the editor has it open (sent its text)."""
        found: TextDocument | None = self.server.workspace.text_documents.get(unquote(uri))
        return found

    @property
    def _applies_edits(self) -> bool:
        workspace = self.server.client_capabilities.workspace
        return bool(workspace and workspace.apply_edit)

    @property
    def _resolves_edits(self) -> bool:
        """Whether the client asks for an action's edit when it is chosen."""
        document = self.server.client_capabilities.text_document
        action = document.code_action if document else None
        support = action.resolve_support if action else None
        return bool(support and "edit" in support.properties)

    def _replace_all(self, document: TextDocument, text: str) -> types.WorkspaceEdit:
        """One edit replacing the document's whole text, from its start to its exact end in
        the client's position units; versioned when the client can check versions."""
        lines = document.lines
        if not lines or lines[-1].endswith(("\n", "\r")):
            end = types.Position(line=len(lines), character=0)
        else:
            units = document.position_codec.client_num_units(lines[-1])
            end = types.Position(line=len(lines) - 1, character=units)
        edit = types.TextEdit(range=types.Range(start=_START, end=end), new_text=text)
        workspace = self.server.client_capabilities.workspace
        edits = workspace.workspace_edit if workspace else None
        if not (edits and edits.document_changes):
            return types.WorkspaceEdit(changes={document.uri: [edit]})
        identifier = types.OptionalVersionedTextDocumentIdentifier(
            uri=document.uri, version=document.version
        )
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=identifier, edits=[edit])]
        )


async def _in_editor(workspace: Workspace, proposal: Proposal) -> Resolution:
    return await workspace.drift.in_editor(proposal.path, proposal.strategy, proposal.conflicts)


def _plain(data: Any) -> dict[str, Any]:
    """pygls hands an action's ``data`` back as a namedtuple."""
    return data._asdict() if hasattr(data, "_asdict") else {}
