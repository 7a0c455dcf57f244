// The chat: one conversation (a server session) shown in the view, kept in sync with the
// server over the session's websocket, remembered in the host page's localStorage.
//
// Everything shown comes from the server's replay of the session (so a new tab, or the
// page reopened days later, shows the conversation once, pending prompt included); the
// only local state is what the visitor typed and the server has not confirmed yet
// (queued while offline or while the agent is busy, with a retry when refused), also kept
// in the browser's storage until the server confirms it.

//
// Its methods live in modules by concept, installed on its prototype below: display.js
// (what is shown: activity, scrolling, unread), frames.js (the server's frames),
// sending.js (what the visitor sends) and carrying.js (what goes along into a new
// conversation).

import { carrying } from "./carrying.js";
import { Connection } from "./connection.js";
import { display } from "./display.js";
import { frames } from "./frames.js";
import { pickLanguage, translator } from "./i18n.js";
import { notice } from "./messages.js";
import { sending } from "./sending.js";
import { ConversationStore, UnsentStore } from "./storage.js";
import { buildView } from "./view.js";

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
    this.unsentStore = new UnsentStore(this.store.key);
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
    // client id → { item, session }: messages a conversation left may have started, being
    // settled there (sending.js); kept across conversations
    this.settling = new Map();
    this.reset();
    this.bindView();
    this.store.watch((session) => this.followOtherTab(session));
    // back online, or the page shown again (a laptop woken up): is the socket still alive?
    window.addEventListener("online", () => {
      if (this.connection) this.setConnection(this.connection);
      if (this.conn) this.conn.retryNow();
    });
    window.addEventListener("offline", () => {
      if (this.connection) this.setConnection(this.connection);
      if (this.conn) this.conn.probe();
    });
    document.addEventListener("visibilitychange", () => {
      this.markSeen();
      if (document.visibilityState === "visible" && this.conn) this.conn.probe();
    });
    this.session = this.store.session;
    if (this.session) this.connect();
    else if (this.isOpen) this.createSession();
    this.unsentStore.takeOver((messages) => this.restore(messages));
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
    this.ended = new Set(); // runs whose status frame came (an ack may come after it)
    this.shown = new Set(); // client ids of the visitor messages the server has shown
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
    if (keepLog) {
      if (this.conn) this.conn.stop();
      this.conn = null;
      this.requeueUnacked();
      this.bubbles = new Map();
      this.prompts = new Map();
      this.activeRun = null;
      this.expired = false;
      this.lastId = "0-0";
    } else {
      // what the visitor wrote and the server did not confirm is sent in the new one (but
      // what the old one may have started is settled there: leave())
      const unsent = this.leave();
      this.reset();
      this.carry(unsent);
    }
    this.session = null;
    this.store.session = null;
    this.createSession();
    this.refresh();
  }

  followOtherTab(session) {
    if (session === this.session || !session) return;
    const unsent = this.leave();
    this.reset();
    this.session = session;
    this.connect();
    this.carry(unsent);
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
    // a reconnecting attempt is still "lost" to the visitor until the server answers
    if (state === "connecting" && this.connection === "lost") state = "lost";
    this.connection = state;
    this.view.panel.dataset.connection = state;
    const text = {
      connecting: this.t("connecting"),
      open: navigator.onLine === false ? this.t("offline") : this.t("connected"),
      lost: navigator.onLine === false ? this.t("offline") : this.t("lost"),
      closed: "",
    }[state];
    this.view.connection.textContent = text ?? "";
    if (state === "lost") this.requeueUnacked();
    if (state === "open") this.flush();
    this.refresh();
  }
}

Object.assign(ChatWidget.prototype, carrying, display, frames, sending);

