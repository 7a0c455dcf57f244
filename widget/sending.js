// Sending, for the chat: what the visitor writes is shown at once and queued; it goes to
// the server when the connection is open and the agent is free (one message at a time:
// the server refuses a new one while the session's run is going). A refusal the visitor
// can do nothing about shows the reason and a Retry button (one too long to send puts its
// text back into the message box instead, to shorten); "busy" and "rate limited" are
// retried by themselves (rate limited: not before the server's retry_after). Answers to
// prompts go the same way, at once. A message in flight when the socket drops is queued
// again and re-sent once it is back. What is not confirmed
// yet is also kept in the browser's storage (UnsentStore), so a reload sends it too, and
// it goes along into a new conversation (this tab's or another tab's "New conversation";
// carrying.js).
//
// These are methods of ChatWidget (chat.js installs them on its prototype).

import { reason } from "./i18n.js";
import { VisitorBubble } from "./messages.js";

export const BUSY_RETRY_MS = 2000;
// A message refused for rate waits the server's retry_after, at most this long.
const MAX_RATE_WAIT_MS = 60_000;
// Refusals a second try of the same text cannot change (it is over the server's frame
// limit, refused before it is sent): no Retry, the text goes back to the message box.
const UNSENDABLE = new Set(["frame_too_large"]);

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
        // final for this card: the question is gone (closed: another wait of its first() won)
        // already answered: another answer (another tab's) was taken; its `answered` frame,
        // on its way, says which
        const settled = {
          hook_expired: "expired",
          hook_cancelled: "cancelled",
          hook_closed: "closed",
          hook_already_answered: "received",
          run_finished: "cancelled",
        }[frame.error];
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
    // The server answered: it did not start it. Unless it could not tell (the store out of
    // reach), or a send before a dropped socket may be starting it now ("busy": that start
    // holds the session).
    if (!(frame.error === "store_unavailable" || (frame.error === "busy" && item.unknown))) {
      delete item.sentOn;
      delete item.unknown;
    }
    if (frame.error === "busy" || frame.error === "rate_limited" || frame.error === "store_unavailable") {
      item.state = "queued"; // sent again by itself once the agent is free
      // busy: the agent answers another tab's message (this tab may not know it yet)
      item.busy = frame.error === "busy";
      let wait = BUSY_RETRY_MS;
      if (frame.error === "rate_limited" && Number.isFinite(frame.retry_after)) {
        // not again before the server takes it (each refusal counts toward the server's
        // close of a socket whose frames it keeps refusing)
        wait = Math.min(MAX_RATE_WAIT_MS, Math.max(wait, frame.retry_after * 1000));
        item.notBefore = Date.now() + wait;
      }
      this.noteQueued(sent.clientId);
      setTimeout(() => this.flush(), wait);
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
    if (item.notBefore > Date.now()) return; // refused for rate: its timer sends it
    delete item.notBefore;
    const frame = { type: "message", text: item.text, client_id: clientId };
    if (this.agent) frame.agent = this.agent;
    if (this.conn.tooLarge(frame)) {
      // the server would refuse it unread: not sent, refused here (the next one goes)
      this.fail(clientId, "frame_too_large");
      this.flush();
      return;
    }
    const ref = this.conn.send(frame);
    if (!ref) return;
    item.state = "sending";
    item.ref = ref;
    item.sentOn = this.session; // the conversation that may have started it, until it says
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

  /** Keep what is not confirmed in the browser's storage (a reload sends it), with the
   *  conversation that may have started it, if any (a reload settles it there). */
  remember() {
    const kept = ([id, item]) => ({
      id,
      text: item.text,
      ...(item.state === "failed" ? { failed: item.error } : {}),
      ...(item.sentOn ? { session: item.sentOn } : {}),
    });
    const settling = [...this.settling].map(([id, { item, session }]) => ({ id, text: item.text, session }));
    this.unsentStore.save([...settling, ...this.unsent().map(kept)]);
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
        item.unknown = true; // the server may have started it
        this.noteQueued(sent.clientId);
      } else {
        const card = this.prompts.get(sent.token);
        if (card && card.state === "sending") card.setState("pending", this.t("tryAgain"));
      }
    }
    this.refs.clear();
    if (this.activeRun === "starting") this.activeRun = null;
  },

  /** The server refused the message (`code`): it stays, with the reason and a Retry. One
   *  no second try can change (too long to send) has no Retry: its text goes back to the
   *  message box to shorten (at once if the box is empty, else with its Edit button). */
  fail(clientId, code) {
    const item = this.visitors.get(clientId);
    if (!item) return;
    item.state = "failed";
    item.error = code;
    const note = this.t("notSent", { reason: reason(this.t, code) });
    if (UNSENDABLE.has(code)) {
      const edit = () => this.takeBack(clientId);
      item.bubble.setState("failed", { note, onEdit: edit });
      this.remember();
      if (!this.view.input.value.trim()) edit();
      return;
    }
    item.bubble.setState("failed", {
      note,
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

  /** A message refused as one that cannot go as it is: its text goes back to the message
   *  box (before what the visitor is writing there, if anything), focused, to shorten and
   *  send again. The message is withdrawn (no longer kept to send): the box has it now;
   *  its bubble stays, saying why. */
  takeBack(clientId) {
    const item = this.visitors.get(clientId);
    if (!item || item.state !== "failed") return;
    const input = this.view.input;
    const draft = input.value.trim();
    input.value = draft ? `${item.text} ${draft}` : item.text;
    this.queue = this.queue.filter((id) => id !== clientId);
    item.state = "withdrawn";
    item.bubble.setState("failed", { note: this.t("backInBox", { reason: reason(this.t, item.error) }) });
    this.remember();
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  },

  answer(token, payload) {
    const card = this.prompts.get(token);
    const frame = { type: "answer", token, payload };
    if (card && this.conn?.open && this.conn.tooLarge(frame)) {
      // the server would refuse it unread (and could not say for which answer): not sent,
      // the card takes a shorter one
      card.setState("pending", this.t("notAccepted", { reason: reason(this.t, "payload_too_large") }));
      this.refresh();
      card.firstControl()?.focus();
      return;
    }
    const ref = this.conn ? this.conn.send(frame) : null;
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
