import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import * as vscode from "vscode";
import { type Bundle, chooseLaunch, cliArgs, probe, readBundle, resolved } from "../src/launch";
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

/** A bundle laid out as packaging lays it out, with the real launcher and a stand-in server. */
function fakeBundle(pythons: string[]): { dir: string; bundle: Bundle } {
  const dir = mkdtempSync(join(tmpdir(), "mplp-bundle-"));
  mkdirSync(join(dir, "bundled", "libs", "mplp_lsp"), { recursive: true });
  copyFileSync(join(__dirname, "..", "..", "bundled", "launch.py"), join(dir, "bundled", "launch.py"));
  writeFileSync(join(dir, "bundled", "bundle.json"), JSON.stringify({ mplp_lsp: "9.9.9", python: pythons }));
  writeFileSync(join(dir, "bundled", "libs", "mplp_lsp", "__init__.py"), "");
  writeFileSync(join(dir, "bundled", "libs", "mplp_lsp", "__main__.py"), 'print("mplp-lsp 9.9.9 bundled")\n');
  return { dir, bundle: readBundle(dir)! };
}

const THIS_PYTHON = execFileSync(PYTHON, ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).toString().trim();

test("useBundled runs the bundle with -I -S; fromEnvironment or no bundle, the environment's", () => {
  const bundle: Bundle = { launcher: "/ext/bundled/launch.py", version: "1.0.0", pythons: ["3.11"] };
  const bundled = chooseLaunch({ interpreter: "/py" }, undefined, bundle);
  assert.deepEqual(cliArgs(bundled, "serve"), ["-I", "-S", "/ext/bundled/launch.py", "serve"]);
  assert.equal(bundled.command, "/py");
  assert.equal(chooseLaunch({}, undefined, bundle).command, "python3");
  const fromEnvironment = chooseLaunch({ importStrategy: "fromEnvironment" }, "/ext-py", bundle);
  assert.deepEqual(cliArgs(fromEnvironment, "serve"), ["-I", "-m", "mplp_lsp", "serve"]);
  assert.deepEqual(cliArgs(chooseLaunch({}, "/ext-py", undefined), "serve"), ["-I", "-m", "mplp_lsp", "serve"]);
  assert.equal(readBundle(tmpdir()), undefined);
});

test("the bundle's server runs, never a workspace's planted mplp_lsp", async () => {
  const { dir, bundle } = fakeBundle([THIS_PYTHON]);
  const workspace = mkdtempSync(join(tmpdir(), "mplp-planted-"));
  mkdirSync(join(workspace, "mplp_lsp"));
  writeFileSync(join(workspace, "mplp_lsp", "__main__.py"), 'print("mplp-lsp planted")\n');
  const result = await probe(chooseLaunch({ interpreter: PYTHON }, undefined, bundle), workspace);
  rmSync(dir, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
  assert.deepEqual(result, { ok: true, version: "bundled" });
});

test("a Python the bundle has no modules for, or none at all: the problem and the fix", async () => {
  const { dir, bundle } = fakeBundle(["3.0"]);
  const old = await probe(chooseLaunch({ interpreter: PYTHON }, undefined, bundle));
  const missing = await probe(chooseLaunch({ interpreter: "/nonexistent/python3" }, undefined, bundle));
  rmSync(dir, { recursive: true, force: true });
  assert.ok(!old.ok);
  assert.match(old.problem, new RegExp(`has compiled modules for Python 3\\.0 only; .* is Python ${THIS_PYTHON.replace(".", "\\.")}\\.$`));
  assert.match(old.fix, /^Install Python 3\.11 or newer/);
  assert.match(old.fix, /mplp\.importStrategy to fromEnvironment/);
  assert.ok(!missing.ok);
  assert.equal(
    missing.problem,
    "No Python found to run mplp-lsp: /nonexistent/python3 (from mplp.interpreter) is not installed or not on the PATH.",
  );
  assert.match(missing.fix, /Install Python 3\.11 or newer/);
});

test("a bare interpreter name is resolved through the PATH's absolute entries only", () => {
  const root = mkdtempSync(join(tmpdir(), "mplp-resolve-"));
  try {
    const planted = join(root, "bin");
    const system = join(root, "usr-bin");
    for (const dir of [planted, system]) {
      mkdirSync(dir);
      writeFileSync(join(dir, "python3"), "#!/bin/sh\n", { mode: 0o755 });
    }
    const cwd = process.cwd();
    process.chdir(root); // a relative PATH entry would find the planted one from here
    try {
      const launch = resolved(chooseLaunch({}), ["bin", system].join(":"));
      assert.equal(launch.command, join(system, "python3"));
      assert.equal(launch.python, join(system, "python3"));
      assert.equal(resolved(chooseLaunch({}), "bin:.").command, "python3"); // not found: as is
      assert.equal(resolved(chooseLaunch({ interpreter: "/opt/py" }), system).command, "/opt/py");
    } finally {
      process.chdir(cwd);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
