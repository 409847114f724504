/**
 * How the extension starts `mplp-lsp serve`, and a check that it can before it tries.
 *
 * Order: `mplp.serverPath` (an `mplp-lsp` executable), then a Python: `mplp.interpreter`, then
 * the Python extension's interpreter for the workspace, then `python3`. An explicit setting wins
 * over the Python extension so that setting it always has an effect.
 *
 * With `mplp.importStrategy` `useBundled` (the default) that Python runs the server packaged in
 * the extension (`bundled/`, see bundled/launch.py); with `fromEnvironment`, or in a .vsix built
 * without a bundle, the `mplp_lsp` installed in the interpreter's own environment.
 *
 * A Python runs in isolated mode (`-I`): with `python -m`, the working directory comes first on
 * `sys.path`, so a workspace's own `mplp_lsp/__main__.py` (or `sitecustomize.py`) would run
 * instead of the installed package. The bundle also runs without site-packages (`-S`): only the
 * standard library and the bundle are importable. The extension also starts every process
 * outside the workspace (`neutralDir`).
 */

import { type ExecFileException, execFile } from "node:child_process";
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

export type ImportStrategy = "useBundled" | "fromEnvironment";

export interface LaunchSettings {
  serverPath?: string;
  interpreter?: string;
  importStrategy?: string;
}

/** The server packaged in a platform-specific .vsix (tools/bundle_server.py wrote it). */
export interface Bundle {
  /** bundled/launch.py, which puts only bundled/libs on the interpreter's path. */
  launcher: string;
  /** The mplp-lsp version in the bundle. */
  version: string;
  /** The Python versions (`3.11`, ...) the bundle has compiled modules for. */
  pythons: string[];
}

export interface Launch {
  command: string;
  /** Arguments before the subcommand (`-m mplp_lsp` for an interpreter). */
  prefix: string[];
  /** Where the command came from, for messages. */
  origin: "mplp.serverPath" | "mplp.interpreter" | "the Python extension" | "the default";
  /** The Python interpreter, when the server runs as a module of one. */
  python?: string;
  /** The bundle the Python runs, when it runs the extension's own server. */
  bundle?: Bundle;
}

/** The interpreter tried last; Windows installs from python.org have no `python3`. */
export const DEFAULT_PYTHON = process.platform === "win32" ? "python" : "python3";
/** Python's isolated mode: no working directory, user site or PYTHON* variables on the path. */
const ISOLATED = ["-I"];
/** launch.py's exit status for a Python that cannot run the bundle (too old, no modules). */
const UNSUPPORTED_PYTHON = 3;

/** The bundle of the extension in `extensionDir`; undefined in a .vsix built without one. */
export function readBundle(extensionDir: string): Bundle | undefined {
  const dir = join(extensionDir, "bundled");
  try {
    const manifest = JSON.parse(readFileSync(join(dir, "bundle.json"), "utf8"));
    return { launcher: join(dir, "launch.py"), version: String(manifest.mplp_lsp), pythons: manifest.python };
  } catch {
    return undefined;
  }
}

export function chooseLaunch(settings: LaunchSettings, fromPythonExtension?: string, bundle?: Bundle): Launch {
  const serverPath = settings.serverPath?.trim();
  if (serverPath) return { command: serverPath, prefix: [], origin: "mplp.serverPath" };
  const configured = settings.interpreter?.trim();
  const [python, origin]: [string, Launch["origin"]] = configured
    ? [configured, "mplp.interpreter"]
    : fromPythonExtension
      ? [fromPythonExtension, "the Python extension"]
      : [DEFAULT_PYTHON, "the default"];
  if (bundle && settings.importStrategy !== "fromEnvironment") {
    return { command: python, prefix: [...ISOLATED, "-S", bundle.launcher], origin, python, bundle };
  }
  return { command: python, prefix: [...ISOLATED, "-m", "mplp_lsp"], origin, python };
}

/**
 * `launch` with its command as an absolute path: a bare name (`python3`) is looked up in the
 * PATH's absolute entries only. A relative entry (`.`, `bin`) would be looked up from wherever
 * a process starts, and a terminal starts where it is told: a workspace's planted `python3`
 * must never be what runs. A command that is not found is left as it is (the probe says so).
 */
export function resolved(launch: Launch, path = process.env.PATH ?? ""): Launch {
  if (isAbsolute(launch.command) || /[\\/]/.test(launch.command)) return launch;
  const names =
    process.platform === "win32" && !/\.[A-Za-z0-9]+$/.test(launch.command)
      ? (process.env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";").map((ext) => launch.command + ext.toLowerCase())
      : [launch.command];
  for (const dir of path.split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    for (const name of names) {
      const candidate = join(dir, name);
      if (isExecutableFile(candidate)) {
        return { ...launch, command: candidate, ...(launch.python ? { python: candidate } : {}) };
      }
    }
  }
  return launch;
}

function isExecutableFile(candidate: string): boolean {
  try {
    accessSync(candidate, constants.X_OK);
    return statSync(candidate).isFile();
  } catch {
    return false;
  }
}

/** The argv of an `mplp-lsp` subcommand run the way the server is started. */
export function cliArgs(launch: Launch, ...args: string[]): string[] {
  return [...launch.prefix, ...args];
}

export type Probe = { ok: true; version: string } | { ok: false; problem: string; fix: string };

const PROBE_TIMEOUT_MS = 30_000;

/** Can `launch` run the server? Runs `mplp-lsp --version` (or imports the module) in `cwd`. */
export function probe(launch: Launch, cwd?: string): Promise<Probe> {
  const args =
    launch.python && !launch.bundle
      ? [...ISOLATED, "-c", "import mplp_lsp; print(mplp_lsp.__version__)"]
      : [...launch.prefix, "--version"];
  return new Promise((resolve) => {
    execFile(
      launch.command,
      args,
      { timeout: PROBE_TIMEOUT_MS, windowsHide: true, cwd },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ ok: true, version: stdout.trim().split(/\s+/).pop() ?? "" });
          return;
        }
        resolve({ ok: false, ...explain(launch, error, String(stderr)) });
      },
    );
  });
}

function explain(
  launch: Launch,
  error: ExecFileException,
  stderr: string,
): { problem: string; fix: string } {
  const fromSetting = launch.origin.startsWith("mplp.") ? ` (from ${launch.origin})` : "";
  if (!launch.python) {
    return {
      problem: `mplp-lsp could not be run from ${launch.command}${fromSetting}: ${firstLine(stderr) || error.message}`,
      fix: "Set mplp.serverPath to the mplp-lsp executable (`which mplp-lsp`), or clear it to use a Python interpreter.",
    };
  }
  if (launch.bundle) return explainBundled(launch, error, stderr, fromSetting);
  if (error.code === "ENOENT") {
    return {
      problem: `The Python interpreter ${launch.command}${fromSetting} was not found.`,
      fix: "Install Python 3.11 or newer, or set mplp.interpreter to the full path of one that has mplp-lsp installed.",
    };
  }
  if (/ModuleNotFoundError|No module named/.test(stderr)) {
    return {
      problem: `mplp-lsp is not installed in ${launch.command}${fromSetting}.`,
      fix: `Run \`${launch.command} -m pip install mplp-lsp\` (or \`pip install .\` in a clone of mplp-lsp), or set mplp.interpreter to a Python that has it.`,
    };
  }
  return {
    problem: `${launch.command}${fromSetting} cannot import mplp_lsp: ${firstLine(stderr.trim().split("\n").slice(-1).join("")) || error.message}`,
    fix: "Reinstall mplp-lsp in that interpreter (it needs Python 3.11 or newer), or set mplp.interpreter to another one.",
  };
}

const INSTALL_PYTHON =
  "Install Python 3.11 or newer (python.org, or your system's package manager) and select it with “Python: Select Interpreter”, or set mplp.interpreter to its full path.";

/** Why a Python could not run the bundled server. */
function explainBundled(
  launch: Launch,
  error: ExecFileException,
  stderr: string,
  fromSetting: string,
): { problem: string; fix: string } {
  const pythons = launch.bundle!.pythons;
  if (error.code === "ENOENT") {
    return {
      problem: `No Python found to run mplp-lsp: ${launch.command}${fromSetting} is not installed or not on the PATH.`,
      fix: INSTALL_PYTHON,
    };
  }
  // Python 2 stops at the option launch.py needs; launch.py explains every other refusal.
  if (error.code === UNSUPPORTED_PYTHON || /Unknown option: -I/.test(stderr)) {
    const problem = error.code === UNSUPPORTED_PYTHON ? firstLine(stderr) : `${launch.command} is Python 2.`;
    const newest = pythons[pythons.length - 1];
    return {
      problem: `${launch.command}${fromSetting} cannot run the bundled mplp-lsp: ${problem}`,
      fix: `${INSTALL_PYTHON} The bundle supports Python ${pythons[0]} to ${newest}; with a newer one, install mplp-lsp into it (\`pip install mplp-lsp\`) and set mplp.importStrategy to fromEnvironment.`,
    };
  }
  return {
    problem: `The bundled mplp-lsp did not start with ${launch.command}${fromSetting}: ${firstLine(stderr.trim().split("\n").slice(-1).join("")) || error.message}`,
    fix: "Reinstall the MPLP extension, or set mplp.importStrategy to fromEnvironment and install mplp-lsp into the interpreter (`pip install mplp-lsp`).",
  };
}

function firstLine(text: string): string {
  return text.trim().split("\n")[0] ?? "";
}
