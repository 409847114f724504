// The login page: posts the one-time code with the pre-login nonce cookie this page came with.
// A code handed over in the URL's fragment (#code=..., from the private page that
// `mplp-lsp ui --open` writes) is taken and removed from the address bar and history at once;
// fragments never reach a server.

const form = document.getElementById("login");
const input = document.getElementById("code");
const state = document.getElementById("login-state");

async function logIn(code, fromLink) {
  state.textContent = "logging in…";
  const response = await fetch("/ui/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ code }),
  });
  if (response.ok) {
    location.replace("/ui/");
    return;
  }
  const body = await response.json().catch(() => ({}));
  const reason = body.errors && body.errors[0] ? body.errors[0].message : response.statusText;
  // The nonce is spent by any try: a fresh page brings a new one for the next code.
  if (fromLink) {
    await sayUsedLink();
  } else {
    state.textContent = `${reason}. Reload this page to try another code.`;
  }
  state.className = "error";
  form.querySelector("button").disabled = true;
}

// A login link works once: opened again (history, a second click, a copy) it logs nobody
// in. Say so, and what gives a new one; a browser it already logged in is pointed to the
// dashboard rather than sent there, so a used link never looks as if it still worked.
async function sayUsedLink() {
  state.textContent =
    "This login link was already used or has expired (each works once, within a minute). ";
  const mine = await fetch("/ui/", { credentials: "same-origin" }).catch(() => null);
  if (mine && mine.ok) {
    const dashboard = document.createElement("a");
    dashboard.href = "/ui/";
    dashboard.textContent = "Open the dashboard";
    state.append("This browser is logged in: ", dashboard, ".");
    return;
  }
  state.append(
    "For a new one, run mplp-lsp ui --open (a team collector: mplp-lsp collector ui --open) " +
      'or the editor\'s "Open dashboard" again.',
  );
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  logIn(input.value.trim(), false);
});

const handed = new URLSearchParams(location.hash.slice(1)).get("code");
if (handed) {
  history.replaceState(null, "", location.pathname);
  logIn(handed, true);
}
