// Parley chat widget. Embed with one tag:
//   <div id="chat"></div>
//   <script type="module" src="https://parley.example/widget/parley-widget.js" data-target="#chat"></script>
// or import { mount } from ".../parley-widget.js" and call mount(element).

import { Connection } from "./connection.js";
import { renderForm } from "./schema-form.js";

const SERVER = new URL("..", import.meta.url).href; // the server that serves this file

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function shown(payload) {
  return typeof payload === "string" ? payload : payload === true ? "Yes" : payload === false ? "No" : JSON.stringify(payload);
}

class ChatWidget {
  constructor(target, { server = SERVER, title = "Support", agent = null } = {}) {
    this.server = server;
    this.agent = agent; // which of the server's chat workflows a message starts (null: default)
    this.storageKey = `parley-session:${new URL(server).origin}${agent ? `:${agent}` : ""}`;
    this.bubbles = new Map(); // message_id → { node, seq }
    this.prompts = new Map(); // token → { card, state }
    this.pendingAnswers = new Map(); // ref → token
    this.activeRun = null;
    this.build(target, title);
    this.conn = new Connection({
      server,
      session: () => this.session(),
      onUnknownSession: () => this.forgetSession(),
      onFrame: (frame) => this.onFrame(frame),
      onState: (state) => this.setConnection(state),
    });
    this.conn.start();
  }

  build(target, title) {
    const root = el("section", "parley-widget");
    root.setAttribute("aria-label", `${title} chat`);
    const header = el("header", "parley-header");
    header.append(el("h2", "parley-title", title));
    this.connState = el("span", "parley-connection", "Connecting…");
    this.connState.setAttribute("role", "status");
    header.append(this.connState);
    this.log = el("div", "parley-log");
    this.log.setAttribute("role", "log");
    this.log.setAttribute("aria-live", "polite");
    this.log.setAttribute("tabindex", "0");
    this.log.setAttribute("aria-label", "Conversation");
    this.activity = el("p", "parley-activity");
    this.activity.setAttribute("role", "status");
    this.activity.setAttribute("aria-live", "polite");
    this.errorLine = el("p", "parley-error");
    this.errorLine.setAttribute("role", "alert");
    const form = el("form", "parley-composer");
    const inputId = `parley-input-${Math.random().toString(36).slice(2, 8)}`;
    const label = el("label", "parley-visually-hidden", "Your message");
    label.htmlFor = inputId;
    this.input = el("input", "parley-input");
    this.input.id = inputId;
    this.input.type = "text";
    this.input.placeholder = "Type your message…";
    this.input.autocomplete = "off";
    this.sendButton = el("button", "parley-send", "Send");
    this.sendButton.type = "submit";
    form.append(label, this.input, this.sendButton);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.sendMessage();
    });
    root.append(header, this.log, this.activity, this.errorLine, form);
    target.replaceChildren(root);
    this.root = root;
  }

  // session ---------------------------------------------------------------------------
  async session() {
    const known = sessionStorage.getItem(this.storageKey);
    if (known) return known;
    const response = await fetch(new URL("api/sessions", this.server), { method: "POST" });
    if (!response.ok) throw new Error(`could not create a session: ${response.status}`);
    const { session_id } = await response.json();
    sessionStorage.setItem(this.storageKey, session_id);
    return session_id;
  }

  forgetSession() {
    sessionStorage.removeItem(this.storageKey);
    this.log.replaceChildren();
    this.bubbles.clear();
    this.prompts.clear();
    this.activeRun = null;
    this.refresh();
  }

  // state shown -----------------------------------------------------------------------
  setConnection(state) {
    this.root.dataset.connection = state;
    this.connState.textContent = { connecting: "Connecting…", open: "Connected", lost: "Connection lost — reconnecting…" }[state];
    this.refresh();
  }

  waitingPrompt() {
    for (const p of this.prompts.values()) if (p.state === "pending") return p;
    return null;
  }

  refresh() {
    const open = this.root.dataset.connection === "open";
    const waiting = this.waitingPrompt();
    let activity = "";
    if (waiting) activity = "The agent is waiting for your answer.";
    else if (this.activeRun) activity = "The agent is typing…";
    this.activity.textContent = activity;
    this.root.dataset.state = waiting ? "waiting" : this.activeRun ? "working" : "idle";
    const busy = Boolean(waiting || this.activeRun);
    this.input.disabled = !open || busy;
    this.sendButton.disabled = !open || busy;
    this.input.placeholder = waiting ? "Answer the question above first" : busy ? "The agent is replying…" : "Type your message…";
  }

  add(node) {
    const nearBottom = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 40;
    this.log.append(node);
    if (nearBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  // frames ----------------------------------------------------------------------------
  onFrame(frame) {
    const handler = {
      ready: () => this.applyLimits(frame.limits),
      visitor: () => this.add(el("p", "parley-msg parley-visitor", frame.text)),
      text: () => this.onText(frame),
      prompt: () => this.onPrompt(frame),
      answered: () => this.settlePrompt(frame.token, "received", frame.payload),
      expired: () => this.settlePrompt(frame.token, "expired"),
      closed: () => this.settlePrompt(frame.token, "closed"),
      status: () => this.onStatus(frame),
      ack: () => this.onAck(frame),
      error: () => this.onError(frame),
    }[frame.type];
    if (handler) handler();
    this.refresh();
  }

  applyLimits(limits) {
    // The server's own limits, from its first frame: nothing here copies them.
    if (limits && Number.isInteger(limits.max_message_chars)) {
      this.input.maxLength = limits.max_message_chars;
    }
  }

  onText(frame) {
    this.activeRun = frame.run_id;
    let bubble = this.bubbles.get(frame.message_id);
    if (!bubble) {
      bubble = { node: el("p", "parley-msg parley-agent"), seq: 0 };
      this.bubbles.set(frame.message_id, bubble);
      this.add(bubble.node);
    }
    if (frame.seq < bubble.seq) return; // a chunk re-sent after a crash: shown already
    bubble.seq = frame.seq + 1;
    bubble.node.textContent += frame.delta;
  }

  onPrompt(frame) {
    if (this.prompts.has(frame.token)) return;
    const card = el("div", "parley-prompt");
    card.setAttribute("role", "group");
    const questionId = `parley-q-${this.prompts.size}-${Math.random().toString(36).slice(2, 6)}`;
    const question = el("p", "parley-question", frame.prompt || "The agent has a question");
    question.id = questionId;
    card.setAttribute("aria-labelledby", questionId);
    const body = renderForm(frame.schema, frame.prompt, (payload) => this.answer(frame.token, payload));
    const note = el("p", "parley-prompt-note");
    card.append(question, body, note);
    const entry = { card, body, note, state: "pending" };
    this.prompts.set(frame.token, entry);
    this.activeRun = frame.run_id;
    this.add(card);
    if (frame.state && frame.state !== "pending") {
      this.settlePrompt(frame.token, frame.state);
    } else {
      card.dataset.state = "pending";
      const first = body.querySelector("button, input, select");
      if (first && document.activeElement === document.body) first.focus();
    }
  }

  settlePrompt(token, state, payload) {
    const entry = this.prompts.get(token);
    if (!entry) return;
    entry.state = state;
    entry.card.dataset.state = state;
    for (const control of entry.body.querySelectorAll("button, input, select")) control.disabled = true;
    if (state === "received") {
      entry.note.textContent = payload === undefined ? "Answered." : `You answered: ${shown(payload)}`;
    } else if (state === "expired") {
      entry.note.textContent = "This question expired — the agent continued without your answer.";
    } else if (state === "cancelled") {
      entry.note.textContent = "This question was withdrawn.";
    } else if (state === "closed") {
      entry.note.textContent = "No answer needed any more — the agent went on without it.";
    }
  }

  onStatus(frame) {
    if (frame.run_id === this.activeRun) this.activeRun = null;
    for (const [token, entry] of this.prompts) {
      if (entry.state === "pending" && frame.status !== "completed") this.settlePrompt(token, "cancelled");
    }
    if (frame.status === "failed") {
      this.add(el("p", "parley-msg parley-system", "Sorry — something went wrong on our side."));
    } else if (frame.status === "cancelled") {
      this.add(el("p", "parley-msg parley-system", "The conversation was stopped."));
    }
  }

  onAck(frame) {
    this.errorLine.textContent = "";
    if (frame.for === "message") this.activeRun = frame.run_id;
    if (frame.ref) this.pendingAnswers.delete(frame.ref);
  }

  onError(frame) {
    const token = frame.ref && this.pendingAnswers.get(frame.ref);
    const message = frame.message || frame.error;
    if (token) {
      this.pendingAnswers.delete(frame.ref);
      const entry = this.prompts.get(token);
      if (entry && entry.state === "pending") {
        entry.note.textContent = `Not accepted: ${message}`;
        for (const control of entry.body.querySelectorAll("button, input, select")) control.disabled = false;
        return;
      }
    }
    this.errorLine.textContent = message;
  }

  // sending ---------------------------------------------------------------------------
  sendMessage() {
    const text = this.input.value.trim();
    if (!text) return;
    const ref = this.conn.send(this.agent ? { type: "message", text, agent: this.agent } : { type: "message", text });
    if (!ref) {
      this.errorLine.textContent = "Not connected — your message was not sent.";
      return;
    }
    this.input.value = "";
    this.activeRun = "starting";
    this.refresh();
  }

  answer(token, payload) {
    const entry = this.prompts.get(token);
    const ref = this.conn.send({ type: "answer", token, payload });
    if (!ref) {
      if (entry) entry.note.textContent = "Not connected — try again in a moment.";
      return;
    }
    this.pendingAnswers.set(ref, token);
    if (entry) {
      for (const control of entry.body.querySelectorAll("button, input, select")) control.disabled = true;
      entry.note.textContent = "Sending…";
    }
  }
}

/** Mount a chat widget into ``target`` (an element or a CSS selector). */
export function mount(target, options = {}) {
  const node = typeof target === "string" ? document.querySelector(target) : target;
  if (!node) throw new Error(`parley-widget: no element ${target}`);
  if (!document.querySelector("link[data-parley-widget]")) {
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = new URL("parley-widget.css", import.meta.url).href;
    css.dataset.parleyWidget = "";
    document.head.append(css);
  }
  return new ChatWidget(node, options);
}

// Auto-mount: <script type="module" src=".../parley-widget.js" data-target="#chat">
for (const script of document.querySelectorAll("script[type=module][data-target]")) {
  if (script.src && new URL(script.src, document.baseURI).href === import.meta.url) {
    window.parleyWidget = mount(script.dataset.target, {
      title: script.dataset.title || "Support",
      agent: script.dataset.agent || null,
    });
  }
}
