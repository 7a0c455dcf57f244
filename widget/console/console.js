// The Parley console: sign in with an API key, then runs, a run's page, the approvals
// inbox (live: the server pushes every change of the pending hooks) and metrics.
import { api, auth, live } from "./api.js";
import { el, toast } from "./dom.js";
import { FINISHED, inboxView, metricsView, runView, runsView, tickAges } from "./views.js";

const main = document.getElementById("pc-main");
const nav = document.querySelector(".pc-nav");
const who = document.getElementById("pc-who");
const badge = document.getElementById("pc-inbox-count");

let me = null;
let hooks = [];
let stream = null;
let inboxUpdate = null;

function signInView(message) {
  const input = el("input", { id: "pc-key", type: "password", autocomplete: "current-password", required: true });
  const error = el("p", { class: "pc-error", role: "alert", text: message || "" });
  const form = el("form", { class: "pc-card", "aria-labelledby": "pc-signin-title" },
    el("h1", { id: "pc-signin-title", text: "Sign in" }),
    el("p", { text: "Use an API key of this server. It is kept in this tab only." }),
    el("label", { class: "pc-field", for: "pc-key" }, "API key", input),
    el("p", {}, el("button", { type: "submit", class: "pc-primary", text: "Sign in" })), error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    auth.key = input.value.trim();
    try { await start(); } catch (exc) { auth.key = null; error.textContent = exc.message; }
  });
  nav.hidden = true;
  who.replaceChildren();
  main.replaceChildren(form);
  input.focus();
}

async function start() {
  me = await api("/api/whoami");
  nav.hidden = false;
  who.replaceChildren(`Signed in as ${me.name} (${me.scope}) `,
    el("button", { type: "button", text: "Sign out", onclick: () => signOut() }));
  if (stream) stream.stop();
  stream = live("/api/live", (name, data) => {
    if (name !== "hooks") return;
    hooks = data.hooks;
    badge.textContent = String(hooks.length);
    if (inboxUpdate) inboxUpdate(hooks);
  }, (state) => { if (state === "denied") signOut(REFUSED); });
  if (!location.hash || location.hash === "#/") location.hash = "#/runs";
  else route();
}

// Signed out by the operator, or because the server refused the key (revoked, the server
// restarted with other keys): the page says which, and keeps nothing it read with the key.
const REFUSED = "This server no longer accepts your key (it was removed or changed): nothing more is shown. Sign in again with a valid key.";
function signOut(message = "Signed out.") {
  auth.key = null;
  me = null;
  if (stream) stream.stop();
  stream = null;
  clearInterval(refresh);
  inboxUpdate = null;
  hooks = [];
  badge.textContent = "0";
  signInView(message);
}

let refresh = null;
async function route() {
  if (!me) return;
  clearInterval(refresh);
  inboxUpdate = null;
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  const section = parts[0] || "runs";
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (section === "runs" && parts[1]) {
      const run = await runView(main, me, parts[1]);
      // A run still going is re-read every 2 s (the form being typed in is kept if nothing changed).
      if (!FINISHED.has(run.status)) {
        let last = JSON.stringify(run);
        refresh = setInterval(async () => {
          if (main.contains(document.activeElement) && document.activeElement.closest(".pc-hook")) return;
          const now = await api(`/api/runs/${parts[1]}`).catch(() => null);
          if (now && JSON.stringify(now) !== last) { last = JSON.stringify(now); runView(main, me, parts[1]); }
        }, 2000);
      }
    } else if (section === "runs") {
      await runsView(main, me, params);
    } else if (section === "inbox") {
      inboxUpdate = inboxView(main, me, hooks);
      refresh = setInterval(() => tickAges(main), 1000);
    } else if (section === "metrics") {
      await metricsView(main);
      refresh = setInterval(() => { if (document.visibilityState === "visible") metricsView(main); }, 10000);
    } else {
      main.replaceChildren(el("h1", { text: "Not found" }));
    }
  } catch (exc) {
    if (exc.status === 401) return signOut(REFUSED);
    main.replaceChildren(el("h1", { text: "Something went wrong" }), el("p", { class: "pc-error", role: "alert", text: exc.message }));
  }
  document.title = `${main.querySelector("h1")?.textContent || "Parley"} — Parley console`;
}

window.addEventListener("hashchange", route);
if (auth.key) start().catch(() => signInView("Your key was not accepted; sign in again."));
else signInView();
