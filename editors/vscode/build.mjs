// Bundles the extension (dist/), or the tests and tools (out/), with esbuild.
//   node build.mjs               the extension, with source maps
//   node build.mjs --production  the extension, minified, for `vsce package`
//   node build.mjs --tests       out/test/*.test.js and out/test/setup.js, run by `node --test`
//   node build.mjs --tools       out/tools/*.js
import { readdirSync } from "node:fs";
import * as esbuild from "esbuild";

const flags = new Set(process.argv.slice(2));
const common = { bundle: true, platform: "node", target: "node20", format: "cjs", logLevel: "warning" };

if (flags.has("--tests") || flags.has("--tools")) {
  const dir = flags.has("--tests") ? "test" : "tools";
  await esbuild.build({
    ...common,
    entryPoints: readdirSync(dir)
      .filter((name) => name.endsWith(".ts"))
      .map((name) => `${dir}/${name}`),
    outdir: `out/${dir}`,
    // Tests get the stub from setup.js (Module._load), never a bundled copy.
    external: ["vscode"],
    sourcemap: "inline",
  });
} else {
  await esbuild.build({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    external: ["vscode"],
    minify: flags.has("--production"),
    sourcemap: !flags.has("--production"),
  });
}
