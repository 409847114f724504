import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import * as vscode from "vscode";
import { chooseLaunch, cliArgs, probe } from "../src/launch";
import { pythonFromExtension } from "../src/python";
import type { Stub } from "./vscode-stub";

/** The Python that has mplp_lsp (CI sets this to its venv). */
export const PYTHON = process.env.MPLP_LSP_PYTHON || "python3";
const stub = vscode as unknown as Stub;

afterEach(() => stub.extensions.installed.clear());

test("serverPath, then interpreter, then the Python extension, then python3", () => {
  assert.deepEqual(chooseLaunch({ serverPath: "/opt/mplp-lsp", interpreter: "/py" }, "/ext-py"), {
    command: "/opt/mplp-lsp",
    prefix: [],
    origin: "mplp.serverPath",
  });
  assert.equal(chooseLaunch({ serverPath: " ", interpreter: "/py" }, "/ext-py").command, "/py");
  const fromExtension = chooseLaunch({ interpreter: "" }, "/ext-py");
  assert.deepEqual(fromExtension, {
    command: "/ext-py",
    prefix: ["-I", "-m", "mplp_lsp"],
    origin: "the Python extension",
    python: "/ext-py",
  });
  assert.deepEqual(cliArgs(fromExtension, "serve"), ["-I", "-m", "mplp_lsp", "serve"]);
  assert.equal(chooseLaunch({}).command, "python3");
  assert.equal(chooseLaunch({}).origin, "the default");
});

test("the Python extension's interpreter for the folder, when it is installed", async () => {
  assert.equal(await pythonFromExtension(), undefined);
  const asked: unknown[] = [];
  stub.extensions.installed.set("ms-python.python", {
    isActive: false,
    exports: {
      environments: {
        getActiveEnvironmentPath: (resource: unknown) => {
          asked.push(resource);
          return { id: "venv", path: "/home/user/project/.venv" };
        },
        resolveEnvironment: async (path: { path: string }) => ({
          executable: { uri: { fsPath: `${path.path}/bin/python` } },
        }),
      },
    },
    async activate() {
      this.isActive = true;
      return this.exports;
    },
  });
  assert.equal(await pythonFromExtension({ fsPath: "/home/user/project" } as never), "/home/user/project/.venv/bin/python");
  assert.deepEqual(asked, [{ fsPath: "/home/user/project" }]);
});

test("a broken Python extension falls through to the next choice", async () => {
  stub.extensions.installed.set("ms-python.python", {
    isActive: false,
    exports: undefined,
    activate: async () => {
      throw new Error("activation failed");
    },
  });
  assert.equal(await pythonFromExtension(), undefined);
});

test("an interpreter with mplp_lsp passes the check and reports its version", async () => {
  const result = await probe(chooseLaunch({ interpreter: PYTHON }));
  assert.ok(result.ok, JSON.stringify(result));
  assert.match(result.version, /^\d+\.\d+/);
});

test("the check imports the installed mplp_lsp, never a workspace's own", async () => {
  const workspace = mkdtempSync(join(tmpdir(), "mplp-planted-"));
  mkdirSync(join(workspace, "mplp_lsp"));
  writeFileSync(join(workspace, "mplp_lsp", "__init__.py"), '__version__ = "planted"\n');
  const result = await probe(chooseLaunch({ interpreter: PYTHON }), workspace);
  rmSync(workspace, { recursive: true, force: true });
  assert.ok(result.ok, JSON.stringify(result));
  assert.notEqual(result.version, "planted");
});

test("an interpreter without mplp_lsp: a clear message and the fix", async () => {
  // The same real interpreter with no site-packages at all (-S) and no PYTHONPATH (-I).
  const dir = mkdtempSync(join(tmpdir(), "mplp-probe-"));
  const python = join(dir, "python");
  writeFileSync(python, `#!/bin/sh\nexec ${JSON.stringify(PYTHON)} -I -S "$@"\n`, { mode: 0o755 });
  const result = await probe(chooseLaunch({ interpreter: python }));
  rmSync(dir, { recursive: true, force: true });
  assert.ok(!result.ok, "mplp_lsp must not be importable without site-packages");
  assert.equal(result.problem, `mplp-lsp is not installed in ${python} (from mplp.interpreter).`);
  assert.match(result.fix, new RegExp(`^Run \`${python} -m pip install mplp-lsp\``));
});

test("a missing interpreter or server executable is named", async () => {
  const python = await probe(chooseLaunch({ interpreter: "/nonexistent/python3" }));
  assert.ok(!python.ok);
  assert.equal(python.problem, "The Python interpreter /nonexistent/python3 (from mplp.interpreter) was not found.");
  const server = await probe(chooseLaunch({ serverPath: "/nonexistent/mplp-lsp" }));
  assert.ok(!server.ok);
  assert.match(server.problem, /^mplp-lsp could not be run from \/nonexistent\/mplp-lsp \(from mplp\.serverPath\)/);
  assert.match(server.fix, /mplp\.serverPath/);
});
