// The console's pages: runs, one run, the approvals inbox, metrics.
import { describeAnswer, renderForm } from "../schema-form.js";
import { api } from "./api.js";
import { age, duration, el, json, statusBadge, toast, when } from "./dom.js";
import { t } from "./strings.js";

const STATUSES = ["pending", "running", "suspended", "blocked", "parked", "completed", "failed", "cancelled", "continued"];
// as runtime/models.py's FINISHED_STATUSES: nothing to cancel, nothing more to read
export const FINISHED = new Set(["completed", "failed", "cancelled", "continued"]);
const RESTARTS_REFUSED = new Set(["pending", "running"]);

// Refusals after which the question takes no answer any more, from anyone: answered with
// something else (409), expired, cancelled, withdrawn or its run finished (410), gone (404).
// Anything else (a malformed answer, the store or the network down) may be sent again.
const FINAL = new Set([404, 409, 410]);

// Why a question no longer takes answers, in words: who answered it and what (its run's
// log), else its status (expired, cancelled, withdrawn).
async function whyClosed(hook) {
  const run = encodeURIComponent(hook.run_id);
  try {
    const [log, listed] = await Promise.all([
      api(`/api/runs/${run}/events`), api(`/api/hooks?run_id=${run}&status=all`),
    ]);
    const received = log.events.find((e) => e.type === "hook.received" && e.data.hook_id === hook.hook_id);
    if (received) {
      const by = received.data.answered_by ? ` by ${received.data.answered_by}` : "";
      return `It was already answered${by}: “${describeAnswer(hook.schema, received.data.payload, t)}”.`;
    }
    const status = listed.hooks.find((h) => h.token === hook.token)?.status;
    return {
      expired: "It expired unanswered.", cancelled: "Its run was cancelled.",
      closed: "It was withdrawn: its run went on without it.",
    }[status] || "It no longer takes answers.";
  } catch (exc) {
    return exc.status === 404 ? "Its run no longer exists." : "It no longer takes answers.";
  }
}

// Take a card out of its list; if the keyboard was in it, the focus goes on to the next
// card (or the one before, or `fallback`), not back to the top of the page.
export function removeCard(card, fallback) {
  const hadFocus = card.contains(document.activeElement) || (card.dataset.hadFocus === "1"
    && (!document.activeElement || document.activeElement === document.body));
  const next = card.nextElementSibling || card.previousElementSibling;
  card.remove();
  if (!hadFocus) return;
  const target = next && next.querySelector("button:not(:disabled), input:not(:disabled), select:not(:disabled)");
  if (target) target.focus();
  else if (fallback) { fallback.setAttribute("tabindex", "-1"); fallback.focus(); }
}

// A pending hook: its prompt, run, age and deadline, and its answer form (the widget's).
// `onDone(card)` is called once the card has nothing more to do (answered from it, or its
// closed notice dismissed).
export function hookCard(hook, me, { showRun = true, onDone = () => {} } = {}) {
  const titleId = `pc-hook-${hook.token.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  const error = el("p", { class: "pc-error", role: "alert" });
  const card = el("article", { class: "pc-card pc-hook", "aria-labelledby": titleId, "data-token": hook.token });
  const meta = el("p", { class: "pc-hook-meta" },
    showRun ? el("a", { href: `#/runs/${hook.run_id}`, class: "pc-mono", text: hook.run_id }) : null,
    showRun ? " · " : null,
    `hook ${hook.hook_id} · `,
    el("span", { class: "pc-age", "data-since": hook.created_at ?? "" }),
    hook.expires_at ? ` · deadline ${when(hook.expires_at)}` : " · no deadline");
  card.append(el("h3", { id: titleId, class: "pc-prompt", text: hook.prompt || hook.name }), meta);
  if (!me.permissions.includes("answer")) {
    card.append(el("p", { class: "pc-empty", text: "Your key cannot answer (reader scope)." }));
    return card;
  }
  const controls = () => card.querySelectorAll(".parley-choices button, .parley-form button, input, select");
  // The question closed (answered elsewhere, expired, withdrawn...): a final state, said
  // in the card, which stays (locked) until dismissed.
  card.closeWith = async (lead) => {
    if (card.dataset.state === "closed") return;
    if (card.contains(document.activeElement)) card.dataset.hadFocus = "1";
    card.dataset.state = "closed";
    for (const c of controls()) c.disabled = true;
    error.textContent = `${lead} Checking why…`;
    const why = await whyClosed(hook);
    const dismiss = el("button", { type: "button", class: "pc-dismiss", text: "Dismiss",
      "aria-describedby": titleId, onclick: () => onDone(card) });
    error.replaceChildren(`${lead} ${why} `);
    card.append(el("p", {}, dismiss));
    if (card.dataset.hadFocus === "1" || !document.activeElement || document.activeElement === document.body) dismiss.focus();
  };
  const submit = async (payload) => {
    if (card.dataset.state === "closed" || card.dataset.state === "sending") return;
    error.textContent = "";
    card.dataset.hadFocus = card.contains(document.activeElement) ? "1" : "";
    card.dataset.state = "sending";
    for (const c of controls()) c.disabled = true;
    try {
      const reply = await api(`/api/hooks/${encodeURIComponent(hook.token)}`, { method: "POST", body: { payload } });
      toast(reply.recorded ? `Answered ${hook.name}` : "That answer was already recorded");
      card.dataset.state = "answered";
      onDone(card);
    } catch (exc) {
      card.dataset.state = "";
      if (FINAL.has(exc.status)) return card.closeWith("Your answer was not recorded: this question is closed.");
      error.textContent = exc.status ? exc.message
        : "The server could not be reached: send the answer again (an answer sent twice is recorded once).";
      for (const c of controls()) c.disabled = false;
    }
  };
  const form = renderForm(hook.schema, hook.prompt || hook.name, submit, t, titleId);
  form.setAttribute("aria-labelledby", titleId);
  card.append(form, error);
  return card;
}

// Whether an operator is at work in a card: the focus in it, something typed, an answer
// on its way, or a closed notice not yet dismissed.
function inUse(card) {
  if (card.dataset.state === "answered") return false;
  if (card.dataset.state === "sending" || card.dataset.state === "closed") return true;
  if (card.contains(document.activeElement)) return true;
  return [...card.querySelectorAll("input")].some((i) => i.type !== "checkbox" && i.value !== "");
}

// ---- runs ---------------------------------------------------------------------------
// A run that continued as new: a link to the run that took over from it (continued_to).
const onward = (run) => run.continued_to ? el("a", { href: `#/runs/${run.continued_to}`, class: "pc-mono pc-onward",
  "aria-label": `continued as ${run.continued_to}`, text: `→ ${run.continued_to}` }) : null;
const tagsText = (tags) => Object.entries(tags || {}).map(([k, v]) => `${k}:${v}`).join(" ") || "—";
function filtersForm(params) {
  const field = (label, control) => el("label", { class: "pc-field" }, label, control);
  const status = el("select", { name: "status" }, el("option", { value: "", text: "any" }),
    STATUSES.map((s) => el("option", { value: s, text: s, selected: params.get("status") === s })));
  const inputs = {
    workflow: el("input", { name: "workflow", value: params.get("workflow") || "" }),
    session: el("input", { name: "session", value: params.get("session") || "" }),
    q: el("input", { name: "q", type: "search", value: params.get("q") || "", placeholder: "r-…" }),
    tag: el("input", { name: "tag", value: params.get("tag") || "", placeholder: "customer:acme" }),
    version: el("input", { name: "version", value: params.get("version") || "" }),
    since: el("input", { name: "since", type: "datetime-local", value: params.get("since") || "" }),
    until: el("input", { name: "until", type: "datetime-local", value: params.get("until") || "" }),
  };
  const form = el("form", { class: "pc-filters", role: "search", "aria-label": "Filter runs" },
    field("Status", status), field("Workflow", inputs.workflow), field("Session", inputs.session),
    field("Run id", inputs.q), field("Tag (key:value)", inputs.tag), field("Version", inputs.version), field("Created from", inputs.since), field("Created until", inputs.until),
    el("button", { type: "submit", class: "pc-primary", text: "Filter" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) next.set(name, value);
    const hash = `#/runs?${next}`;
    if (filters && filters.form === form) filters.hash = hash;
    location.hash = hash;
  });
  return form;
}

// The runs view's filter form and what it last submitted. A press on Filter changes the
// location's hash, and the view is rendered again only when the browser's hashchange event
// comes, a moment later: rebuilt from the hash then, the form would drop whatever was typed
// in between (and the focus). So the view rendered for the hash its form submitted keeps
// that form as it is and replaces only the results.
let filters = null; // { form, results, hash }
export async function runsView(main, me, params) {
  const results = el("div", { "aria-live": "polite" }, el("p", { class: "pc-empty", text: "Loading runs…" }));
  if (filters && filters.hash === location.hash && main.contains(filters.form) && main.contains(filters.results)) {
    filters.results.replaceWith(results);
    filters.results = results;
  } else {
    const form = filtersForm(params);
    filters = { form, results, hash: null };
    main.replaceChildren(el("h1", { text: "Runs" }), form, results);
  }
  const query = new URLSearchParams();
  for (const name of ["status", "workflow", "session", "q", "tag", "version", "offset"]) if (params.get(name)) query.set(name, params.get(name));
  for (const name of ["since", "until"]) if (params.get(name)) query.set(name, String(new Date(params.get(name)).getTime() / 1000));
  query.set("limit", params.get("limit") || "25");
  const page = await api(`/api/runs?${query}`);
  const rows = page.runs.map((r) => el("tr", {},
    el("td", {}, el("a", { href: `#/runs/${r.run_id}`, class: "pc-mono", text: r.run_id })),
    el("td", { text: r.workflow }), el("td", {}, statusBadge(r.status), onward(r)),
    el("td", { class: "pc-mono", text: r.version || "—" }),
    el("td", { text: when(r.created_at) }), el("td", { class: "pc-mono", text: r.session || "—" }),
    el("td", { class: "pc-mono", text: tagsText(r.tags) })));
  const table = el("table", { class: "pc-table" },
    el("caption", { class: "pc-visually-hidden", text: "Runs, newest first" }),
    el("thead", {}, el("tr", {}, ["Run", "Workflow", "Status", "Version", "Created", "Session", "Tags"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows));
  const offset = Number(params.get("offset") || 0);
  const move = (to) => { const next = new URLSearchParams(params); next.set("offset", String(to)); location.hash = `#/runs?${next}`; };
  const pager = el("div", { class: "pc-pager" },
    el("button", { type: "button", text: "Previous page", disabled: offset === 0, onclick: () => move(Math.max(0, offset - Number(query.get("limit")))) }),
    el("span", { text: `${page.runs.length ? offset + 1 : 0}–${offset + page.runs.length} of ${page.total ?? `more than ${offset + page.runs.length}`} runs` }),
    el("button", { type: "button", text: "Next page", disabled: page.next_offset === null, onclick: () => move(page.next_offset) }));
  results.replaceChildren(page.runs.length ? table : el("p", { class: "pc-empty", text: "No runs match." }), pager);
}

// ---- one run --------------------------------------------------------------------------
function describe(event, started) {
  const d = event.data;
  switch (event.type) {
    case "workflow.started": return { text: `input ${json({ args: d.args, kwargs: d.kwargs })}` };
    case "step.started": started.set(d.step_id, event); return { text: `step ${d.step_id}, attempt ${d.attempt ?? 0}` };
    case "step.completed": {
      const from = started.get(d.step_id);
      const took = from ? ` in ${duration(tsOf(event) - tsOf(from))}` : "";
      return { text: `step ${d.step_id} completed${took}: ${json(d.result)}` };
    }
    case "step.failed": return { kind: "error", text: `step ${d.step_id} attempt ${d.attempt} failed${d.final ? " (final)" : `; retry at ${when(d.retry_at / 1000)}`}: ${d.error?.type}: ${d.error?.message}`, traceback: d.error?.traceback };
    case "step.suspended": case "workflow.suspended": return { text: `waiting for ${d.wait}` };
    case "hook.created": return { kind: "hook", text: `${d.hook_id}: “${d.prompt || d.name}”${d.expires_at ? `, deadline ${when(d.expires_at / 1000)}` : ""}` };
    case "hook.received": return { kind: "hook", text: `${d.hook_id} answered ${json(d.payload)}${d.answered_by ? ` — answered by ${d.answered_by}` : ""}` };
    case "hook.expired": return { kind: "hook", text: `${d.hook_id} expired unanswered` };
    case "timer.scheduled": return { text: `timer ${d.timer_id} due ${when(d.due / 1000)}` };
    case "timer.fired": return { text: `timer ${d.timer_id} fired` };
    case "workflow.completed": return { text: `result ${json(d.result)}` };
    case "workflow.failed": return { kind: "error", text: `${d.error?.type}: ${d.error?.message}`, traceback: d.error?.traceback };
    case "workflow.blocked": return { kind: "error", text: `blocked: ${d.error?.message}` };
    case "workflow.cancelled": return { kind: "error", text: `cancelled${d.reason ? `: ${d.reason}` : ""}` };
    default: return { text: json(d) };
  }
}

function tsOf(event) { return Number(event.id.split("-")[0]); }

export async function runView(main, me, runId, { live: hooksLive } = {}) {
  const [run, log] = await Promise.all([api(`/api/runs/${runId}`), api(`/api/runs/${runId}/events`)]);
  const actions = el("div", { class: "pc-actions" });
  if (!FINISHED.has(run.status) && me.permissions.includes("cancel")) {
    const cancel = el("button", { type: "button", class: "pc-danger", text: "Cancel run" });
    cancel.addEventListener("click", async () => {
      if (cancel.dataset.armed !== "1") { cancel.dataset.armed = "1"; cancel.textContent = "Confirm: cancel this run"; return; }
      cancel.disabled = true;
      try { await api(`/api/runs/${runId}/cancel`, { method: "POST", body: { reason: `cancelled by ${me.name} in the console` } }); toast("Run cancelled"); }
      catch (exc) { toast(exc.message); }
      runView(main, me, runId);
    });
    actions.append(cancel);
  }
  if (run.status === "blocked" && me.permissions.includes("retry")) {
    actions.append(el("button", { type: "button", class: "pc-primary", text: "Retry", onclick: async (event) => {
      event.currentTarget.disabled = true;
      try { await api(`/api/runs/${runId}/retry`, { method: "POST" }); toast("Run sent back to the workers"); }
      catch (exc) { toast(exc.message); }
      runView(main, me, runId);
    } }));
  }
  // not offered where the server refuses it: a run a worker is about to take or holds
  if (me.permissions.includes("start") && !RESTARTS_REFUSED.has(run.status)) {
    actions.append(el("button", { type: "button", text: "Restart (new run, same input)", onclick: async (event) => {
      event.currentTarget.disabled = true;
      // it may have been picked up since this page was read: the server then says why not
      try {
        const reply = await api(`/api/runs/${runId}/restart`, { method: "POST" });
        toast(`Started ${reply.run_id}`);
        location.hash = `#/runs/${reply.run_id}`;
      } catch (exc) { toast(exc.message); runView(main, me, runId); }
    } }));
  }
  const facts = el("dl", { class: "pc-facts" },
    el("dt", { text: "Status" }), el("dd", {}, statusBadge(run.status)),
    el("dt", { text: "Workflow" }), el("dd", { text: run.workflow }),
    el("dt", { text: "Version" }), el("dd", { class: "pc-mono", text: run.version || "—" }),
    related(run),
    el("dt", { text: "Tags" }), el("dd", { class: "pc-mono", text: tagsText(run.tags) }),
    el("dt", { text: "Created" }), el("dd", { text: when(run.created_at) }),
    el("dt", { text: "Session" }), el("dd", { class: "pc-mono", text: run.session || "—" }),
    run.result !== null && run.result !== undefined ? [el("dt", { text: "Result" }), el("dd", { class: "pc-mono", text: json(run.result) })] : null,
    run.error ? [el("dt", { text: "Error" }), el("dd", { class: "pc-error-text", text: `${run.error.type}: ${run.error.message}` })] : null);
  const onDone = (card) => { if (card.dataset.state === "closed") removeCard(card, main.querySelector("h1")); };
  // The page read again: a card the operator is at work in (typing, sending, a closed
  // notice not yet dismissed) is kept as it is; one whose question closed meanwhile says so.
  const old = new Map(main.dataset.run === runId
    ? [...main.querySelectorAll(".pc-hook")].filter(inUse).map((c) => [c.dataset.token, c]) : []);
  const tokens = new Set(run.pending_hooks.map((h) => h.token));
  const pending = run.pending_hooks.map((h) => old.get(h.token)
    || hookCard({ ...h, created_at: createdAt(log.events, h.hook_id) }, me, { showRun: false, onDone }));
  const kept = [...old.values()].filter((c) => !tokens.has(c.dataset.token));
  for (const card of kept) if (card.closeWith) card.closeWith("This question is closed: nothing was sent from here.");
  const started = new Map();
  const timeline = el("ol", { class: "pc-timeline", "aria-label": "Timeline of events" }, log.events.map((event) => {
    const { kind, text, traceback } = describe(event, started);
    return el("li", { "data-kind": kind || "event", "data-type": event.type },
      el("div", { class: "pc-event-head" },
        el("span", { class: "pc-event-type", text: event.type }),
        el("time", { class: "pc-time", datetime: new Date(tsOf(event)).toISOString(), text: new Date(tsOf(event)).toLocaleTimeString() })),
      traceback ? el("details", { class: "pc-traceback" }, el("summary", { class: "pc-detail", text }), el("pre", { class: "pc-mono", text: traceback }))
        : el("p", { class: "pc-detail", text }));
  }));
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/runs", text: "← All runs" })),
    el("h1", {}, "Run ", el("span", { class: "pc-mono", text: runId })),
    actions, el("section", { class: "pc-card", "aria-label": "Run details" }, facts),
    el("h2", { text: `Pending hooks (${pending.length})` }),
    pending.length || kept.length ? el("div", { class: "pc-hooks" }, pending, kept) : el("p", { class: "pc-empty", text: "None." }),
    el("h2", { text: "Timeline" }), timeline);
  main.dataset.run = runId;
  tickAges(main);
  return run;
}

// The runs this one is linked to: its parent and children (child()), restarts, the runs
// of continue_as_new before and after it.
function related(run) {
  const links = (ids) => ids.flatMap((id, i) => [i ? ", " : null, el("a", { href: `#/runs/${id}`, class: "pc-mono", text: id })]);
  return [["Parent run", run.parent_run_id ? [run.parent_run_id] : []], ["Child runs", run.child_run_ids || []],
    ["Restarted from", run.restarted_from ? [run.restarted_from] : []], ["Restarted as", run.restarted_as ? [run.restarted_as] : []],
    ["Continued from", run.continued_from ? [run.continued_from] : []], ["Continued as", run.continued_to ? [run.continued_to] : []]]
    .filter(([, ids]) => ids.length).flatMap(([name, ids]) => [el("dt", { text: name }), el("dd", { "data-fact": name }, links(ids))]);
}

function createdAt(events, hookId) {
  const created = events.find((e) => e.type === "hook.created" && e.data.hook_id === hookId);
  return created ? tsOf(created) / 1000 : null;
}

// ---- approvals inbox ----------------------------------------------------------------
export function inboxView(main, me, hooks) {
  const list = el("div", { class: "pc-hooks", id: "pc-inbox-list", "aria-live": "polite", "aria-relevant": "additions" });
  const summary = el("p", { class: "pc-empty", id: "pc-inbox-summary" });
  delete main.dataset.run;
  main.replaceChildren(el("h1", { text: "Approvals inbox" }), summary, list);
  const done = new Set(); // answered or dismissed here: not shown again by a list read before
  let pending = 0;
  const say = () => {
    summary.textContent = pending ? `${pending} pending` : "Nothing is waiting for an answer.";
  };
  const onDone = (card) => { done.add(card.dataset.token); removeCard(card, summary); say(); };
  const update = (current) => {
    const tokens = new Set(current.map((h) => h.token));
    for (const token of [...done]) if (!tokens.has(token)) done.delete(token);
    for (const card of [...list.children]) {
      if (tokens.has(card.dataset.token)) continue;
      // No longer pending: answered elsewhere, expired, withdrawn. A card the operator is
      // at work in says so and stays; the others go.
      if (inUse(card)) { if (card.closeWith) card.closeWith("This question is closed: nothing was sent from here."); }
      else removeCard(card, summary);
    }
    const shown = new Set([...list.children].map((c) => c.dataset.token));
    // Newest first; a card already shown keeps its place and whatever was typed in it.
    for (const hook of [...current].reverse()) {
      if (shown.has(hook.token) || done.has(hook.token)) continue;
      list.prepend(hookCard(hook, me, { onDone }));
    }
    pending = current.filter((h) => !done.has(h.token)).length;
    say();
    tickAges(list);
  };
  update(hooks);
  return update;
}

export function tickAges(root) {
  for (const node of root.querySelectorAll(".pc-age")) {
    const since = Number(node.dataset.since);
    node.textContent = since ? `waiting ${age(since)}` : "waiting";
  }
}

// ---- metrics ------------------------------------------------------------------------
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const m = line.match(/^(parley_[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/);
    if (m) out[m[1] + (m[2] || "")] = Number(m[3]);
  }
  return out;
}

function chart(samples) {
  const w = 640, h = 200, pad = 32;
  const series = [["suspended", "#2454d6", "runs suspended"], ["hooks_pending", "#b42318", "hooks pending"]];
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("class", "pc-chart");
  svg.setAttribute("role", "img");
  const last = samples[samples.length - 1] || {};
  svg.setAttribute("aria-label", `Last hour: runs suspended now ${last.suspended ?? 0}, hooks pending now ${last.hooks_pending ?? 0}`);
  const now = Date.now() / 1000;
  const max = Math.max(1, ...samples.flatMap((s) => series.map(([k]) => s[k] || 0)));
  const x = (t) => pad + ((t - (now - 3600)) / 3600) * (w - 2 * pad);
  const y = (v) => h - pad - (v / max) * (h - 2 * pad);
  const ns = (tag, attrs) => { const n = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); return n; };
  svg.append(ns("line", { x1: pad, y1: h - pad, x2: w - pad, y2: h - pad, stroke: "#8a94a3" }));
  const label = (text, attrs) => { const t = ns("text", { "font-size": "11", fill: "#5b6470", ...attrs }); t.textContent = text; return t; };
  svg.append(label("−60 min", { x: pad, y: h - 10 }), label("now", { x: w - pad - 20, y: h - 10 }), label(String(max), { x: 4, y: pad + 4 }), label("0", { x: 4, y: h - pad }));
  for (const [key, colour] of series) {
    const points = samples.map((s) => `${x(s.t).toFixed(1)},${y(s[key] || 0).toFixed(1)}`).join(" ");
    if (points) svg.append(ns("polyline", { points, fill: "none", stroke: colour, "stroke-width": "2" }));
  }
  const legend = el("p", { class: "pc-legend" }, series.map(([, colour, name]) =>
    el("span", {}, el("span", { class: "pc-swatch", style: `background:${colour}` }), name)));
  return [svg, legend];
}

export async function metricsView(main) {
  const [text, history] = await Promise.all([
    fetch("/metrics", { cache: "no-store" }).then((r) => r.text()), api("/api/stats/history"),
  ]);
  const m = parseMetrics(text);
  const numbers = [
    ["Runs started", m['parley_runs_total{event="started"}']],
    ["Completed", m['parley_runs_total{event="completed"}']],
    ["Failed", m['parley_runs_total{event="failed"}']],
    ["Cancelled", m['parley_runs_total{event="cancelled"}']],
    ["Suspended now", m.parley_runs_suspended],
    ["Hooks pending", m.parley_hooks_pending],
  ];
  main.replaceChildren(
    el("h1", { text: "Metrics" }),
    el("dl", { class: "pc-numbers", "aria-label": "Store-wide counters" }, numbers.map(([name, value]) =>
      el("div", {}, el("dt", { text: name }), el("dd", { "data-metric": name, text: value === undefined ? "—" : String(value) })))),
    el("h2", { text: "The last hour" }),
    ...chart(history.samples),
    el("p", { class: "pc-empty", text: `Sampled every ${history.every} s by this server.` }));
}
