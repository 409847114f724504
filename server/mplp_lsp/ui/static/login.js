// The login page: posts the one-time code with the pre-login nonce cookie this page came with.
// A code handed over in the URL's fragment (#code=..., from the private page that
// `mplp-lsp ui --open` writes) is taken and removed from the address bar and history at once;
// fragments never reach a server.

const form = document.getElementById("login");
const input = document.getElementById("code");
const state = document.getElementById("login-state");

async function logIn(code) {
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
  state.textContent = `${reason}. Reload this page to try another code.`;
  state.className = "error";
  form.querySelector("button").disabled = true;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  logIn(input.value.trim());
});

const handed = new URLSearchParams(location.hash.slice(1)).get("code");
if (handed) {
  history.replaceState(null, "", location.pathname);
  logIn(handed);
}
