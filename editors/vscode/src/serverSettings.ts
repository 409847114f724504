/**
 * What the server gets of the `mplp` section: everything but the settings only the extension
 * reads (how to start the server, tracing), which the server would log as unknown.
 */

const CLIENT_ONLY = new Set(["interpreter", "serverPath", "trace"]);

export function serverSection(section: unknown): unknown {
  if (section === null || typeof section !== "object" || Array.isArray(section)) return section;
  // A WorkspaceConfiguration also carries its accessor methods; they are not settings.
  return Object.fromEntries(
    Object.entries(section).filter(
      ([key, value]) => !CLIENT_ONLY.has(key) && typeof value !== "function",
    ),
  );
}
