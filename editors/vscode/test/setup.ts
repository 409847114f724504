/** Loaded with `node --require` before the tests: `require("vscode")` returns the stub. */

import Module from "node:module";
import * as stub from "./vscode-stub";

const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
const load = loader._load;
loader._load = function (request: string, ...rest: unknown[]) {
  return request === "vscode" ? stub : load.call(this, request, ...rest);
};
