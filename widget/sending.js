// Sending, for the chat: what the visitor writes is shown at once and queued; it goes to
// the server when the connection is open and the agent is free (one message at a time:
// the server refuses a new one while the session's run is going). A refusal the visitor
// can do nothing about shows the reason and a Retry button; "busy" and "rate limited" are
// retried by themselves. Answers to prompts go the same way, at once. A message in flight
// when the socket drops is queued again and re-sent once it is back. What is not confirmed
// yet is also kept in the browser's storage (UnsentStore), so a reload sends it too, and
// it goes along into a new conversation (this tab's or another tab's "New conversation").
//
// These are methods of ChatWidget (chat.js installs them on its prototype).

import { reason } from "./i18n.js";
import { VisitorBubble } from "./messages.js";

const BUSY_RETRY_MS = 2000;

export const sending = {
  /** Send `text` as the visitor (queued until it can be sent). */
  send(text) {
    const clean = String(text ?? "").trim();
    if (!clean) return;
    if (this.expired) this.startOver({ keepLog: true });
    const clientId = `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const bubble = new VisitorBubble(clean, this.lang, this.t);
    // after messages kept below the conversation, and kept there with them
    if (this.view.log.querySelector(":scope > [data-held]")) bubble.node.dataset.held = "";
    this.visitors.set(clientId, { bubble, text: clean, state: "queued", ref: null });
    this.queue.push(clientId);
    this.add(bubble.node, { force: true });
    this.noteQueued(clientId);
    this.remember();
    this.flush();
  },

  onAck(frame) {
    const sent = frame.ref && this.refs.get(frame.ref);
    if (!sent) return;
    this.refs.delete(frame.ref);
    if (sent.kind === "message") {
      // a message sent again after a dropped socket is acked with its run, maybe ended
      if (!this.ended.has(frame.run_id)) this.activeRun = frame.run_id;
      this.touch();
      const item = this.visitors.get(sent.clientId);
      if (item && item.state !== "sent") {
        item.state = "sent";
        item.bubble.setState("sent");
      }
      this.dequeue(sent.clientId);
    }
  },

  onError(frame) {
    const sent = frame.ref && this.refs.get(frame.ref);
    if (!sent) return;
    this.refs.delete(frame.ref);
    const why = reason(this.t, frame.error);
    if (sent.kind === "answer") {
      const card = this.prompts.get(sent.token);
      if (card && card.state === "sending") {
        const settled = { hook_expired: "expired", hook_cancelled: "cancelled", run_finished: "cancelled" }[frame.error];
        if (settled) this.settlePrompt(sent.token, settled);
        else {
          card.setState("pending", this.t("notAccepted", { reason: why }));
          this.refresh();
          card.firstControl()?.focus();
        }
      }
      return;
    }
    if (this.activeRun === "starting") this.activeRun = null;
    const item = this.visitors.get(sent.clientId);
    if (!item) return;
    if (frame.error === "busy" || frame.error === "rate_limited" || frame.error === "store_unavailable") {
      item.state = "queued"; // sent again by itself once the agent is free
      // busy: the agent answers another tab's message (this tab may not know it yet)
      item.busy = frame.error === "busy";
      this.noteQueued(sent.clientId);
      setTimeout(() => this.flush(), BUSY_RETRY_MS);
      return;
    }
    this.fail(sent.clientId, frame.error);
  },

  sendFromComposer() {
    const input = this.view.input;
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    this.send(text);
    input.focus();
  },

  busy() {
    return Boolean(this.waitingPrompt() || this.activeRun) || [...this.refs.values()].some((r) => r.kind === "message");
  },

  /** Send the first queued message when the connection is open and the agent is free. */
  flush() {
    const clientId = this.queue.find((id) => this.visitors.get(id)?.state === "queued");
    if (!clientId) return;
    if (!this.conn || !this.conn.open || this.busy()) {
      this.noteQueued(clientId);
      return;
    }
    const item = this.visitors.get(clientId);
    const frame = { type: "message", text: item.text, client_id: clientId };
    if (this.agent) frame.agent = this.agent;
    const ref = this.conn.send(frame);
    if (!ref) return;
    item.state = "sending";
    item.ref = ref;
    this.release(item);
    item.bubble.setState("sending", { note: item.busy ? this.t("queuedBusy") : this.t("sending") });
    this.refs.set(ref, { kind: "message", clientId });
    this.activeRun = "starting";
    this.touch();
    this.refresh();
  },

  noteQueued(clientId) {
    const item = this.visitors.get(clientId);
    if (!item || item.state !== "queued") return;
    const offline = !this.conn || !this.conn.open;
    const busy = item.busy || this.busy();
    const note = offline ? this.t("queuedOffline") : busy ? this.t("queuedBusy") : this.t("queued");
    item.bubble.setState("queued", { note });
  },

  dequeue(clientId) {
    this.queue = this.queue.filter((id) => id !== clientId);
    const item = this.visitors.get(clientId);
    if (item) {
      item.state = "sent";
      this.release(item);
    }
    this.remember();
  },

  /** The messages not confirmed yet, in order (queued, in flight, refused). */
  unsent() {
    return this.queue.map((id) => [id, this.visitors.get(id)]).filter(([, item]) => item && item.state !== "sent");
  },

  /** Keep what is not confirmed in the browser's storage (a reload sends it). */
  remember() {
    const kept = ([id, item]) => (item.state === "failed" ? { id, text: item.text, failed: item.error } : { id, text: item.text });
    this.unsentStore.save(this.unsent().map(kept));
  },

  /** Messages of the conversation left (or of a tab that is gone) go on in this one, with
   *  their client ids: queued ones are sent, refused ones keep their Retry. They stay below
   *  what the server replays of this conversation until they are sent. */
  carry(items) {
    for (const [clientId, item] of items) {
      // a page reloaded before the ack: the replay may already have shown it
      if (this.visitors.has(clientId) || this.shown.has(clientId)) continue;
      const failed = item.state === "failed";
      Object.assign(item, { state: failed ? "failed" : "queued", ref: null, busy: false });
      this.visitors.set(clientId, item);
      this.queue.push(clientId);
      item.bubble.node.dataset.held = "";
      this.add(item.bubble.node, { force: true });
      if (failed) this.fail(clientId, item.error);
      else this.noteQueued(clientId);
    }
    this.remember();
    this.flush();
  },

  /** A list of messages kept by a page that is gone (this tab before a reload). */
  restore(messages) {
    this.carry(messages.map(({ id, text, failed }) => {
      const item = { bubble: new VisitorBubble(text, this.lang, this.t), text, state: "queued", ref: null };
      if (typeof failed === "string") Object.assign(item, { state: "failed", error: failed });
      return [id, item];
    }));
  },

  /** A message carried or restored is no longer kept below the conversation once it is in it. */
  release(item) {
    delete item.bubble.node.dataset.held;
  },

  /** The socket dropped: a message sent and not acked goes back to the queue, sent again
   *  (with its client id: the server shows and starts it once) when the socket is back; an
   *  answer not acked can be given again (the replay settles it if it was recorded). */
  requeueUnacked() {
    for (const sent of this.refs.values()) {
      if (sent.kind === "message") {
        const item = this.visitors.get(sent.clientId);
        if (!item || item.state !== "sending") continue;
        item.state = "queued";
        item.ref = null;
        this.noteQueued(sent.clientId);
      } else {
        const card = this.prompts.get(sent.token);
        if (card && card.state === "sending") card.setState("pending", this.t("tryAgain"));
      }
    }
    this.refs.clear();
    if (this.activeRun === "starting") this.activeRun = null;
  },

  /** The server refused the message (`code`): it stays, with the reason and a Retry. */
  fail(clientId, code) {
    const item = this.visitors.get(clientId);
    if (!item) return;
    item.state = "failed";
    item.error = code;
    item.bubble.setState("failed", {
      note: this.t("notSent", { reason: reason(this.t, code) }),
      onRetry: () => {
        item.state = "queued";
        item.error = null;
        if (!this.queue.includes(clientId)) this.queue.push(clientId);
        this.noteQueued(clientId);
        this.remember();
        this.flush();
        this.view.input.focus();
      },
    });
    this.remember();
  },

  answer(token, payload) {
    const card = this.prompts.get(token);
    const ref = this.conn ? this.conn.send({ type: "answer", token, payload }) : null;
    if (!card) return;
    if (!ref) {
      card.note.textContent = this.t("tryAgain");
      return;
    }
    this.refs.set(ref, { kind: "answer", token });
    card.setState("sending", this.t("sending"));
    this.refresh();
    this.view.input.focus();
  }
};
