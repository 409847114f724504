"""A plan approved through its Confirm and run in the server, from a real Neovim (the plugin).

The client is Neovim's own LSP client (``client:request_sync``), the server the one the
plugin starts; the run's progress reaches Neovim as ``$/progress`` on the request's token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.nvim_session import git_repo, run
from tests.support.plans import confirm_doc, context_doc, plan_doc

pytestmark = pytest.mark.realhost

BODY = r"""
require('mplp').setup({ python = PYTHON })
vim.cmd('edit ' .. ROOT .. '/a.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf) then return finish(3) end
local function call(method, params)
  local reply = client:request_sync(method, params, 60000, buf)
  return reply and reply.result
end
local plan, context, confirm = vim.json.decode(PLAN), vim.json.decode(CONTEXT), vim.json.decode(CONFIRM)
result.created = {
  call('mplp/psg/createContext', { context = context }).ok,
  call('mplp/psg/createPlan', { plan = plan }).ok,
  call('mplp/psg/setPlanStatus', { plan_id = plan.plan_id, status = 'proposed' }).ok,
  call('mplp/psg/createConfirm', { confirm = confirm }).ok,
}
result.early = call('mplp/plan/run', { plan_id = plan.plan_id })
result.decided = call('mplp/psg/decideConfirm', { confirm_id = confirm.confirm_id,
  decision = { status = 'approved', decided_by_role = 'reviewer' } })
result.progress = {}
vim.api.nvim_create_autocmd('LspProgress', { callback = function(args)
  local params = args.data.params
  if params.token == 'plan-run' then table.insert(result.progress, params.value.kind) end
end })
result.run = call('mplp/plan/run', { plan_id = plan.plan_id, workDoneToken = 'plan-run' })
vim.wait(10000, function() return result.progress[#result.progress] == 'end' end, 50)
step('done')
finish(0)
"""


def test_neovim_runs_a_plan_its_confirm_approved(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"a.py": ""})
    context = context_doc()
    plan = plan_doc(context["context_id"])
    confirm = confirm_doc(plan["plan_id"])
    session = run(
        tmp_path,
        "plan-run",
        BODY,
        {
            "ROOT": str(root),
            "STATE": str(tmp_path / "state"),
            "PLAN": json.dumps(plan),
            "CONTEXT": json.dumps(context),
            "CONFIRM": json.dumps(confirm),
        },
        cwd=root,
        env={"MPLP_LSP_STATE_DIR": str(tmp_path / "state")},
    )
    result = session.result
    assert result["steps"] == ["done"], (result, session.stderr[-2000:])
    assert result["created"] == [True, True, True, True]
    assert result["early"]["errors"][0]["code"] == "transition_precondition"
    assert result["decided"]["result"]["status"] == "approved"
    assert result["run"]["ok"] is True
    assert result["run"]["result"]["execution"]["plan_status"] == "completed"
    assert result["progress"][0] == "begin" and result["progress"][-1] == "end"
    assert "report" in result["progress"]
