/**
 * The part of the `vscode` API the tested modules use, as plain objects that record what was done
 * to them. test/setup.ts makes `require("vscode")` return this module; tests reach the same
 * instance with `import * as vscode from "vscode"` and the `Stub` type below.
 */

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class StatusBarItem {
  text = "";
  tooltip: string | undefined;
  name: string | undefined;
  command: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible = false;
  disposed = false;
  constructor(
    readonly id: string,
    readonly alignment: StatusBarAlignment,
  ) {}
  show(): void {
    this.visible = true;
  }
  dispose(): void {
    this.disposed = true;
  }
}

export const window = {
  createStatusBarItem: (id: string, alignment: StatusBarAlignment) => new StatusBarItem(id, alignment),
};

export interface FakeExtension {
  isActive: boolean;
  exports: unknown;
  activate(): Promise<unknown>;
}

export const extensions = {
  installed: new Map<string, FakeExtension>(),
  getExtension(id: string): FakeExtension | undefined {
    return this.installed.get(id);
  },
};

export type Stub = {
  StatusBarItem: typeof StatusBarItem;
  extensions: typeof extensions;
};
