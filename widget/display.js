// What the chat shows besides the messages themselves: the activity state (waiting for
// an answer, working, still working, recovering, expired, refused) and the composer that
// follows it, the log that follows new content unless the visitor scrolled up (then a
// "new messages" jump), and the launcher's unread count.
//
// These are methods of ChatWidget (chat.js installs them on its prototype).

import { compareIds } from "./connection.js";

const NEAR_BOTTOM_PX = 48;

export const display = {
  waitingPrompt() {
    for (const card of this.prompts.values()) if (card.state === "pending") return card;
    return null;
  },

  firstPendingControl() {
    const card = this.waitingPrompt();
    return card ? card.firstControl() : null;
  },

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
  },

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
  },

  nearBottom() {
    const log = this.view.log;
    return log.scrollHeight - log.scrollTop - log.clientHeight < NEAR_BOTTOM_PX;
  },

  scrollToEnd() {
    const log = this.view.log;
    log.scrollTop = log.scrollHeight;
    this.stick = true;
    this.view.jump.hidden = true;
  },

  /** Follow new content when the visitor is at the end; else offer the jump. */
  changed({ force = false } = {}) {
    if (force || this.stick) this.scrollToEnd();
    else this.view.jump.hidden = false;
  },

  add(node, opts = {}) {
    const log = this.view.log;
    // Messages carried into this conversation, or restored after a reload, are not in it
    // yet: what the server replays of it comes above them.
    const held = "held" in node.dataset ? null : log.querySelector(":scope > [data-held]");
    log.insertBefore(node, held);
    this.changed(opts);
  },

  visible() {
    return this.isOpen && document.visibilityState !== "hidden";
  },

  countUnread(id) {
    if (this.visible() || compareIds(id, this.store.seen) <= 0) return;
    this.unread += 1;
    this.updateBadge();
  },

  markSeen() {
    if (!this.visible() || !this.session) return;
    if (compareIds(this.lastId, this.store.seen) > 0) this.store.seen = this.lastId;
    this.unread = 0;
    this.updateBadge();
  },

  updateBadge() {
    const { badge, launcher } = this.view;
    if (!badge) return;
    badge.hidden = this.unread === 0;
    badge.textContent = String(this.unread);
    const base = this.isOpen ? this.t("closeChat") : this.t("openChat");
    launcher.setAttribute("aria-label", this.unread ? `${base} (${this.t("unread", { count: this.unread })})` : base);
    this.emit("unread", { count: this.unread });
  },
};
