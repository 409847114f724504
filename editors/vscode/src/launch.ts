/**
 * How the extension starts `mplp-lsp serve`, and a check that it can before it tries.
 *
 * Order: `mplp.serverPath` (an `mplp-lsp` executable), then `mplp.interpreter`, then the Python
 * extension's interpreter for the workspace, then `python3`. An explicit setting wins over the
 * Python extension so that setting it always has an effect.
 *
 * A Python runs in isolated mode (`-I`): with `python -m`, the working directory comes first on
 * `sys.path`, so a workspace's own `mplp_lsp/__main__.py` (or `sitecustomize.py`) would run
 * instead of the installed package. The extension also starts every process outside the
 * workspace (`neutralDir`).
 */

import { type ExecFileException, execFile } from "node:child_process";

export interface LaunchSettings {
  serverPath?: string;
  interpreter?: string;
}

export interface Launch {
  command: string;
  /** Arguments before the subcommand (`-m mplp_lsp` for an interpreter). */
  prefix: string[];
  /** Where the command came from, for messages. */
  origin: "mplp.serverPath" | "mplp.interpreter" | "the Python extension" | "the default";
  /** The Python interpreter, when the server runs as a module of one. */
  python?: string;
}

export const DEFAULT_PYTHON = "python3";
/** Python's isolated mode: no working directory, user site or PYTHON* variables on the path. */
const ISOLATED = ["-I"];

export function chooseLaunch(settings: LaunchSettings, fromPythonExtension?: string): Launch {
  const serverPath = settings.serverPath?.trim();
  if (serverPath) return { command: serverPath, prefix: [], origin: "mplp.serverPath" };
  const configured = settings.interpreter?.trim();
  const [python, origin]: [string, Launch["origin"]] = configured
    ? [configured, "mplp.interpreter"]
    : fromPythonExtension
      ? [fromPythonExtension, "the Python extension"]
      : [DEFAULT_PYTHON, "the default"];
  return { command: python, prefix: [...ISOLATED, "-m", "mplp_lsp"], origin, python };
}

/** The argv of an `mplp-lsp` subcommand run the way the server is started. */
export function cliArgs(launch: Launch, ...args: string[]): string[] {
  return [...launch.prefix, ...args];
}

export type Probe = { ok: true; version: string } | { ok: false; problem: string; fix: string };

const PROBE_TIMEOUT_MS = 30_000;

/** Can `launch` run the server? Runs `mplp-lsp --version` (or imports the module) in `cwd`. */
export function probe(launch: Launch, cwd?: string): Promise<Probe> {
  const args = launch.python
    ? [...ISOLATED, "-c", "import mplp_lsp; print(mplp_lsp.__version__)"]
    : ["--version"];
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

function firstLine(text: string): string {
  return text.trim().split("\n")[0] ?? "";
}
