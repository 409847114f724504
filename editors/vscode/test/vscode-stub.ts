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

/** An event source a test fires by hand: `emitter.event(listener)` subscribes. */
export class Emitter<T> {
  private readonly listeners = new Set<(value: T) => void>();
  readonly event = (listener: (value: T) => void) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(value: T): void {
    for (const listener of this.listeners) listener(value);
  }
}

export const workspace = {
  saved: new Emitter<{ uri: unknown }>(),
  created: new Emitter<{ files: unknown[] }>(),
  deleted: new Emitter<{ files: unknown[] }>(),
  renamed: new Emitter<{ files: { oldUri: unknown; newUri: unknown }[] }>(),
  get onDidSaveTextDocument() {
    return this.saved.event;
  },
  get onDidCreateFiles() {
    return this.created.event;
  },
  get onDidDeleteFiles() {
    return this.deleted.event;
  },
  get onDidRenameFiles() {
    return this.renamed.event;
  },
};

export type Stub = {
  StatusBarItem: typeof StatusBarItem;
  extensions: typeof extensions;
  workspace: typeof workspace;
};
