// The chat: one conversation (a server session) shown in the view, kept in sync with the
// server over the session's websocket, remembered in the host page's localStorage.
//
// Everything shown comes from the server's replay of the session (so a new tab, or the
// page reopened days later, shows the conversation once, pending prompt included); the
// only local state is what the visitor typed and the server has not confirmed yet
// (queued while offline or while the agent is busy, with a retry when refused).

import { Connection, compareIds } from "./connection.js";
import { pickLanguage, translator } from "./i18n.js";
import { AgentBubble, PromptCard, VisitorBubble, notice } from "./messages.js";
import { describeAnswer } from "./schema-form.js";
import { sending } from "./sending.js";
import { ConversationStore } from "./storage.js";
import { buildView, el } from "./view.js";

const NEAR_BOTTOM_PX = 48;

export class ChatWidget extends EventTarget {
  constructor(host, options) {
    super();
    this.host = host;
    this.server = options.server;
    this.agent = options.agent || null;
    this.mode = options.mode;
    this.slowAfterMs = (options.slowAfter ?? 5) * 1000;
    this.lang = pickLanguage(options.lang, document.documentElement.lang, navigator.language);
    this.t = translator(this.lang, options.strings || {});
    this.store = new ConversationStore(this.server, this.agent);
    this.view = buildView(host, {
      mode: this.mode,
      title: options.title,
      theme: options.theme,
      cssUrl: options.cssUrl,
      t: this.t,
    });
    this.isOpen = this.mode !== "launcher";
    this.unread = 0;
    this.state = "";
    this.reset();
    this.bindView();
    this.store.watch((session) => this.followOtherTab(session));
    window.addEventListener("online", () => this.conn && this.conn.retryNow());
    window.addEventListener("offline", () => this.refresh());
    document.addEventListener("visibilitychange", () => this.markSeen());
    this.session = this.store.session;
    if (this.session) this.connect();
    else if (this.isOpen) this.createSession();
    this.refresh();
    if (options.open && !this.isOpen) this.open();
  }

  reset() {
    this.bubbles = new Map(); // message_id → AgentBubble
    this.visitors = new Map(); // client_id → { bubble, text, state, ref }
    this.prompts = new Map(); // token → PromptCard
    this.refs = new Map(); // ref → { kind: "message", clientId } | { kind: "answer", token }
    this.queue = []; // client ids of messages waiting to be sent, in order
    this.activeRun = null; // the run answering now: a run id, or "starting"
    this.recovering = null; // the AgentBubble being re-streamed after a crash
    this.slow = false;
    this.expired = false;
    this.refused = false;
    this.lastId = "0-0";
    this.stick = true;
    this.view.log.replaceChildren();
    this.view.jump.hidden = true;
  }

  // the view's controls ----------------------------------------------------------------
  bindView() {
    const v = this.view;
    v.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.sendFromComposer();
    });
    v.newButton.addEventListener("click", () => this.newConversation());
    v.log.addEventListener("scroll", () => {
      this.stick = this.nearBottom();
      if (this.stick) v.jump.hidden = true;
    });
    v.jump.addEventListener("click", () => {
      this.scrollToEnd();
      v.input.focus();
    });
    if (v.launcher) {
      v.launcher.addEventListener("click", () => (this.isOpen ? this.close() : this.open()));
      v.closeButton.addEventListener("click", () => this.close());
      v.panel.addEventListener("keydown", (event) => {
        if (event.key === "Escape") this.close();
      });
    }
  }

  // public API --------------------------------------------------------------------------
  open() {
    if (this.mode !== "launcher" || this.isOpen) return;
    this.isOpen = true;
    this.view.panel.hidden = false;
    this.view.launcher.setAttribute("aria-expanded", "true");
    this.view.launcher.setAttribute("aria-label", this.t("closeChat"));
    if (!this.session && !this.refused) this.createSession();
    this.scrollToEnd();
    this.markSeen();
    (this.firstPendingControl() || this.view.input).focus();
    this.emit("open", {});
  }

  close() {
    if (this.mode !== "launcher" || !this.isOpen) return;
    this.isOpen = false;
    this.view.panel.hidden = true;
    this.view.launcher.setAttribute("aria-expanded", "false");
    this.updateBadge();
    this.view.launcher.focus();
    this.emit("close", {});
  }

  /** Leave this conversation and start a new one (every tab of the site follows). */
  async newConversation() {
    this.startOver({ keepLog: false });
    this.view.input.focus();
  }

  emit(name, detail) {
    this.dispatchEvent(new CustomEvent(name, { detail }));
    this.host.dispatchEvent(new CustomEvent(`parley:${name}`, { detail, bubbles: true, composed: true }));
  }

  // session and connection -------------------------------------------------------------
  async createSession(attempt = 0) {
    if (this.creating) return;
    this.creating = true;
    this.setConnection("connecting");
    try {
      const response = await fetch(new URL("api/sessions", this.server), { method: "POST", mode: "cors" });
      if (response.status === 403) {
        this.onRefused("origin_not_allowed");
        return;
      }
      if (!response.ok) throw new Error(`status ${response.status}`);
      const { session_id: session } = await response.json();
      this.session = session;
      this.store.session = session;
      this.connect();
    } catch {
      // unreachable, or refused by CORS (the browser does not say which): retry
      this.setConnection("lost");
      setTimeout(() => this.createSession(attempt + 1), Math.min(10000, 500 * 2 ** attempt));
    } finally {
      this.creating = false;
    }
  }

  connect() {
    if (this.conn) this.conn.stop();
    this.conn = new Connection({
      server: this.server,
      session: this.session,
      onRefused: (code) => this.onRefused(code),
      onFrame: (frame) => this.onFrame(frame),
      onState: (state) => this.setConnection(state),
    });
    this.conn.start();
  }

  startOver({ keepLog }) {
    if (this.conn) this.conn.stop();
    this.conn = null;
    const queued = this.queue.map((id) => this.visitors.get(id)).filter(Boolean);
    if (keepLog) {
      this.bubbles = new Map();
      this.prompts = new Map();
      this.activeRun = null;
      this.expired = false;
      this.lastId = "0-0";
    } else {
      this.reset();
      for (const item of queued) this.add(item.bubble.node);
    }
    this.session = null;
    this.store.session = null;
    this.createSession();
    this.refresh();
  }

  followOtherTab(session) {
    if (session === this.session || !session) return;
    if (this.conn) this.conn.stop();
    this.reset();
    this.session = session;
    this.connect();
    this.refresh();
  }

  onRefused(code) {
    this.conn = null;
    if (code === "origin_not_allowed") {
      this.refused = true;
      this.add(notice("parley-refused", this.t("refused")), { force: true });
    } else {
      this.expired = true;
      this.store.session = null;
      this.session = null;
      for (const card of this.prompts.values()) if (card.state === "pending") card.setState("expired");
      this.add(
        notice("parley-expired", this.t("expiredTitle"), this.t("expiredBody"), {
          label: this.t("startNew"),
          onClick: () => this.newConversation(),
        }),
        { force: true },
      );
    }
    this.setConnection("closed");
  }

  setConnection(state) {
    this.connection = state;
    this.view.panel.dataset.connection = state;
    const text = {
      connecting: this.t("connecting"),
      open: this.t("connected"),
      lost: navigator.onLine === false ? this.t("offline") : this.t("lost"),
      closed: "",
    }[state];
    this.view.connection.textContent = text ?? "";
    if (state === "open") this.flush();
    this.refresh();
  }

  // what is shown ------------------------------------------------------------------------
  waitingPrompt() {
    for (const card of this.prompts.values()) if (card.state === "pending") return card;
    return null;
  }

  firstPendingControl() {
    const card = this.waitingPrompt();
    return card ? card.firstControl() : null;
  }

  refresh() {
    const waiting = this.waitingPrompt();
    let state = "idle";
    if (this.refused) state = "refused";
    else if (this.expired) state = "expired";
    else if (waiting) state = "waiting";
    else if (this.activeRun) state = this.recovering ? "recovering" : this.slow ? "slow" : "working";
    const activity = { waiting: "waiting", working: "working", slow: "slow", recovering: "recovering" }[state];
    this.view.activity.textContent = activity ? this.t(activity) : "";
    this.view.panel.dataset.state = state;
    const v = this.view;
    v.input.disabled = Boolean(waiting) || this.refused;
    v.send.disabled = v.input.disabled;
    v.input.placeholder = waiting ? this.t("placeholderWaiting") : this.t("placeholder");
    if (state !== this.state) {
      this.state = state;
      this.emit("state", { state, connection: this.connection });
    }
  }

  /** "Still working…" after a silence while the agent is answering. */
  touch() {
    clearTimeout(this.slowTimer);
    this.slow = false;
    if (this.activeRun) {
      this.slowTimer = setTimeout(() => {
        this.slow = true;
        this.refresh();
      }, this.slowAfterMs);
    }
  }

  nearBottom() {
    const log = this.view.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < NEAR_BOTTOM_PX;
  }

  scrollToEnd() {
    const log = this.view.log;
    log.scrollTop = log.scrollHeight;
    this.stick = true;
    this.view.jump.hidden = true;
  }

  /** Follow new content when the visitor is at the end; else offer the jump. */
  changed({ force = false } = {}) {
    if (force || this.stick) this.scrollToEnd();
    else this.view.jump.hidden = false;
  }

  add(node, opts = {}) {
    this.view.log.append(node);
    this.changed(opts);
  }

  // unread -------------------------------------------------------------------------------
  visible() {
    return this.isOpen && document.visibilityState !== "hidden";
  }

  countUnread(id) {
    if (this.visible() || compareIds(id, this.store.seen) <= 0) return;
    this.unread += 1;
    this.updateBadge();
  }

  markSeen() {
    if (!this.visible() || !this.session) return;
    if (compareIds(this.lastId, this.store.seen) > 0) this.store.seen = this.lastId;
    this.unread = 0;
    this.updateBadge();
  }

  updateBadge() {
    const { badge, launcher } = this.view;
    if (!badge) return;
    badge.hidden = this.unread === 0;
    badge.textContent = String(this.unread);
    const base = this.isOpen ? this.t("closeChat") : this.t("openChat");
    launcher.setAttribute("aria-label", this.unread ? `${base} (${this.t("unread", { count: this.unread })})` : base);
    this.emit("unread", { count: this.unread });
  }

  // frames from the server -----------------------------------------------------------------
  onFrame(frame) {
    if (typeof frame.id === "string") this.lastId = frame.id;
    const handler = {
      ready: () => this.applyLimits(frame.limits),
      visitor: () => this.onVisitor(frame),
      text: () => this.onText(frame),
      prompt: () => this.onPrompt(frame),
      answered: () => this.onAnswered(frame),
      expired: () => this.settlePrompt(frame.token, "expired"),
      closed: () => this.settlePrompt(frame.token, "closed"),
      status: () => this.onStatus(frame),
      ack: () => this.onAck(frame),
      error: () => this.onError(frame),
    }[frame.type];
    if (handler) handler();
    if (typeof frame.id === "string") this.markSeen();
    this.refresh();
  }

  applyLimits(limits) {
    // The server's own limits, from its first frame: nothing here copies them.
    if (limits && Number.isInteger(limits.max_message_chars)) this.view.input.maxLength = limits.max_message_chars;
  }

  onVisitor(frame) {
    const mine = frame.client_id && this.visitors.get(frame.client_id);
    if (mine) {
      mine.bubble.confirm(frame.id);
      this.dequeue(frame.client_id);
    } else {
      const bubble = new VisitorBubble(frame.text, this.lang, this.t);
      bubble.confirm(frame.id);
      this.add(bubble.node);
    }
    if (!this.activeRun) this.activeRun = "starting"; // another tab's message starts a run
    this.touch();
    this.emit("message", { role: "visitor", text: frame.text, id: frame.id });
  }

  onText(frame) {
    this.activeRun = frame.run_id;
    let bubble = this.bubbles.get(frame.message_id);
    if (!bubble) {
      bubble = new AgentBubble(frame.id, this.lang);
      this.bubbles.set(frame.message_id, bubble);
      this.add(bubble.node);
      this.countUnread(frame.id);
      this.emit("message", { role: "agent", id: frame.id, message_id: frame.message_id });
    }
    const outcome = bubble.apply(frame.seq, frame.delta);
    if (outcome === "restarted") this.recovering = bubble;
    if (this.recovering === bubble && bubble.caughtUp) this.recovering = null;
    this.touch();
    if (outcome === "duplicate" || bubble.scheduled) return;
    bubble.scheduled = true;
    setTimeout(() => {
      bubble.scheduled = false;
      bubble.render();
      this.changed();
    }, 0);
  }

  onPrompt(frame) {
    if (this.prompts.has(frame.token)) return;
    const card = new PromptCard(frame, this.t, (payload) => this.answer(frame.token, payload));
    this.prompts.set(frame.token, card);
    this.activeRun = frame.run_id;
    this.recovering = null;
    const hadFocus = this.view.shadow.activeElement !== null || document.activeElement === document.body;
    this.add(card.node, { force: true });
    if (frame.state && frame.state !== "pending") {
      this.settlePrompt(frame.token, frame.state);
      return;
    }
    this.countUnread(frame.id);
    this.emit("prompt", { token: frame.token, prompt: frame.prompt, schema: frame.schema });
    if (hadFocus && this.isOpen) {
      this.refresh();
      card.firstControl()?.focus();
    }
  }

  onAnswered(frame) {
    const card = this.prompts.get(frame.token);
    this.settlePrompt(frame.token, "received", frame.payload);
    if (card) this.touch();
  }

  settlePrompt(token, state, payload) {
    const card = this.prompts.get(token);
    if (!card) return;
    let note = "";
    if (state === "received") {
      note = payload === undefined ? this.t("answered") : this.t("youAnswered", { answer: describeAnswer(card.schema, payload, this.t) });
    } else if (state === "expired") note = this.t("questionExpired");
    else if (state === "cancelled") note = this.t("questionWithdrawn");
    else if (state === "closed") note = this.t("questionClosed");
    const focusWasInside = card.node.contains(this.view.shadow.activeElement);
    card.setState(state, note);
    if (focusWasInside) {
      this.refresh();
      this.view.input.focus();
    }
  }

  onStatus(frame) {
    if (frame.run_id === this.activeRun || this.activeRun === "starting") this.activeRun = null;
    this.recovering = null;
    clearTimeout(this.slowTimer);
    this.slow = false;
    for (const card of this.prompts.values()) {
      if (card.state === "pending" && card.runId === frame.run_id && frame.status !== "completed") {
        this.settlePrompt(card.token, "cancelled");
      }
    }
    if (frame.status === "failed") this.add(el("p", "parley-msg parley-system", this.t("failed")));
    else if (frame.status === "cancelled") this.add(el("p", "parley-msg parley-system", this.t("stopped")));
    this.refresh();
    this.flush();
  }


}

Object.assign(ChatWidget.prototype, sending);
