#!/usr/bin/env bash
# Sets up a real VS Code for the extension's host tests: code-server (VS Code served to a
# browser) from npm, in a cache folder reused between runs, and Debian's Chromium to drive it.
# code-server's own postinstall downloads files, which cannot work offline, so its steps are
# done here by hand. Prints the code-server folder (the one holding node_modules/) on stdout;
# progress goes to stderr. Exit status 0 only when every piece is in place.
#
#   MPLP_LSP_CODE_SERVER_DIR  overrides the cache folder
#   CI=true and root          installs missing Debian packages with apt-get
set -euo pipefail

cache=${MPLP_LSP_CODE_SERVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mplp-lsp-test/code-server}
version=${MPLP_LSP_CODE_SERVER_VERSION:-4}
say() { echo "setup.sh: $*" >&2; }

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
# The kerberos native module of VS Code's server builds against it.
[ -e /usr/include/krb5.h ] || [ -e /usr/include/krb5/krb5.h ] || missing+=(libkrb5-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${CI:-}" = "true" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  else
    say "missing Debian packages: ${missing[*]} (apt-get install -y ${missing[*]})"
    exit 1
  fi
fi

entry="$cache/node_modules/code-server/out/node/entry.js"
done_mark="$cache/.mplp-setup-done"
if [ -e "$done_mark" ] && [ -e "$entry" ]; then
  echo "$cache"
  exit 0
fi

# Native modules build against the installed Node's headers. Without a configured nodedir,
# node-gyp downloads them from nodejs.org, which a machine with only the package registries
# cannot reach; distributions' and NodeSource's packages put them in /usr/include/node.
if [ -z "${npm_config_nodedir:-}" ] && [ "$(npm config get nodedir)" = "undefined" ] \
    && [ -e /usr/include/node/node.h ]; then
  export npm_config_nodedir=/usr
fi

mkdir -p "$cache"
cd "$cache"
[ -e package.json ] || echo '{"name": "mplp-lsp-code-server", "private": true}' >package.json
say "npm install code-server@$version (a few minutes the first time)"
npm install --no-audit --no-fund --ignore-scripts --loglevel=error "code-server@$version" >&2

vscode="$cache/node_modules/code-server/lib/vscode"
(
  cd "$vscode"
  npm install --no-audit --no-fund --omit=dev --ignore-scripts --loglevel=error >&2
  # @vscode/ripgrep's postinstall skips its download when bin/ exists.
  mkdir -p node_modules/@vscode/ripgrep/bin
  cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
  # Exits non-zero offline (node-pty's extra node-gyp configure step); the native modules
  # that matter are checked below instead.
  npm rebuild --loglevel=error >&2 || true
  ln -sfn node_modules node_modules.asar
  ln -sfn code-linux.sh bin/remote-cli/code-server
  ln -sfn browser-linux.sh bin/helpers/browser.sh
  (cd extensions && npm install --no-audit --no-fund --omit=dev --ignore-scripts --loglevel=error >&2)
)
npm rebuild argon2 --build-from-source --loglevel=error >&2

for module in kerberos node-pty @vscode/spdlog native-watchdog; do
  if ! find "$vscode/node_modules/$module" -name '*.node' -path '*/Release/*' | grep -q .; then
    say "the native module $module did not build"
    exit 1
  fi
done
touch "$done_mark"
echo "$cache"
