// `npm run package [-- --target T] [-- --wheel W]`: the .vsix.
//   no --target   mplp-lsp.vsix, for every platform, without a server: it runs the mplp-lsp
//                 installed in the interpreter's environment
//   --target T    mplp-lsp-T.vsix for one VS Code platform (linux-x64, linux-arm64, darwin-x64,
//                 darwin-arm64, win32-x64), with the server and its dependencies in bundled/
//   --wheel W     the mplp-lsp wheel to bundle (default: built from this checkout)
// The bundle is installed by tools/bundle_server.py with MPLP_LSP_BUILD_PYTHON (default
// python3), which needs pip. The size of the .vsix is printed; over MAX_MB fails.
import { spawnSync } from "node:child_process";
import { rmSync, statSync } from "node:fs";
import { parseArgs } from "node:util";

const MAX_MB = 25;
const { values } = parseArgs({ options: { target: { type: "string" }, wheel: { type: "string" } } });

function run(command, args) {
  const done = spawnSync(command, args, { stdio: "inherit" });
  if (done.status !== 0) {
    console.error(`package: ${command} ${args.join(" ")} failed${done.error ? `: ${done.error.message}` : ""}`);
    process.exit(1);
  }
}

run(process.execPath, ["build.mjs", "--production"]);
rmSync("bundled/libs", { recursive: true, force: true });
rmSync("bundled/bundle.json", { force: true });
const out = values.target ? `mplp-lsp-${values.target}.vsix` : "mplp-lsp.vsix";
if (values.target) {
  const python = process.env.MPLP_LSP_BUILD_PYTHON || "python3";
  run(python, ["tools/bundle_server.py", "--target", values.target, ...(values.wheel ? ["--wheel", values.wheel] : [])]);
}
run("vsce", ["package", "--no-dependencies", ...(values.target ? ["--target", values.target] : []), "--out", out]);
const mb = statSync(out).size / 1024 / 1024;
console.log(`package: ${out} ${mb.toFixed(1)} MB (limit ${MAX_MB} MB)`);
if (mb >= MAX_MB) {
  console.error(`package: ${out} is over ${MAX_MB} MB`);
  process.exit(1);
}
