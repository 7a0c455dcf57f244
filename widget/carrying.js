// Carrying, for the chat: what the visitor wrote and the server did not confirm goes along
// into a new conversation (this tab's or another tab's "New conversation") and survives a
// reload, except a message the conversation left may have started (sent on its socket, its
// ack not come): that one is settled in its own conversation, never started in both
// (settle()).
//
// These are methods of ChatWidget (chat.js installs them on its prototype), beside
// sending.js's.

import { Connection } from "./connection.js";
import { VisitorBubble } from "./messages.js";
import { BUSY_RETRY_MS } from "./sending.js";

// A message being settled in the conversation left, refused there as busy this many times,
// is not being started there (no start of it holds the session any more): it goes along.
const SETTLE_BUSY_TRIES = 3;

export const carrying = {
  /** This conversation is left for another: what the visitor wrote and the server did not
   *  confirm goes along (returned), except what it may have started, settled in it. */
  leave() {
    const left = this.session;
    const after = this.lastId;
    if (this.conn) this.conn.stop();
    this.conn = null;
    this.requeueUnacked();
    const unsent = this.unsent();
    const started = ([, item]) => Boolean(left) && item.sentOn === left && item.state !== "failed";
    this.settle(left, unsent.filter(started), after);
    return unsent.filter((entry) => !started(entry));
  },

  /** Messages that `session`, a conversation left, may have started: sent on its socket
   *  and not confirmed (their ack on the way, or lost with a dropped socket). Carried into
   *  the new conversation they would start a second run there. So they stay that
   *  conversation's, as a message confirmed before the visitor left it: each is sent again
   *  on a socket of its own to that conversation, with its client id (the server starts it
   *  once, and acks one it had started already). One refused there (or a conversation
   *  that is gone) was never started: it goes along into this conversation after all. */
  settle(session, items, after = "0-0") {
    if (!session || !items.length) return;
    for (const [clientId, item] of items) this.settling.set(clientId, { item, session });
    const pending = () => [...this.settling].filter(([, s]) => s.session === session);
    const refs = new Map(); // ref → client id
    const busy = new Map(); // client id → busy refusals
    let conn = null;
    const done = (clientId) => {
      this.settling.delete(clientId);
      if (!pending().length) conn.stop();
      this.remember();
    };
    const goAlong = (clientId, item, code = null) => {
      done(clientId);
      delete item.sentOn;
      delete item.unknown;
      if (code) Object.assign(item, { state: "failed", error: code });
      this.carry([[clientId, item]]);
    };
    const sendAll = () => {
      if (!conn.open) return;
      const inFlight = new Set(refs.values());
      for (const [clientId, { item }] of pending()) {
        if (inFlight.has(clientId)) continue;
        const frame = { type: "message", text: item.text, client_id: clientId };
        if (this.agent) frame.agent = this.agent;
        if (conn.tooLarge(frame)) {
          goAlong(clientId, item, "frame_too_large"); // never started there: refused
          continue;
        }
        const ref = conn.send(frame);
        if (ref) refs.set(ref, clientId);
      }
    };
    conn = new Connection({
      server: this.server,
      session,
      onRefused: () => {
        for (const [clientId, { item }] of pending()) goAlong(clientId, item);
      },
      onState: (state) => {
        if (state === "open") sendAll();
        else refs.clear(); // sent again once the socket is back
      },
      onFrame: (frame) => {
        const clientId = frame.ref === undefined ? null : refs.get(frame.ref);
        const settling = clientId && this.settling.get(clientId);
        if (!settling) return;
        refs.delete(frame.ref);
        if (frame.type === "ack") {
          done(clientId); // started there, once: it is that conversation's
          return;
        }
        const tries = (busy.get(clientId) ?? 0) + (frame.error === "busy" ? 1 : 0);
        busy.set(clientId, tries);
        if (frame.error === "store_unavailable" || (frame.error === "busy" && tries < SETTLE_BUSY_TRIES)) {
          setTimeout(sendAll, BUSY_RETRY_MS); // it cannot tell yet
          return;
        }
        const again = frame.error === "busy" || frame.error === "rate_limited";
        goAlong(clientId, settling.item, again ? null : frame.error);
      },
    });
    conn.lastId = after; // none of its conversation is shown: only the replies are read
    conn.start();
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
    const here = [];
    const elsewhere = new Map(); // a conversation left that may have started them → them
    for (const { id, text, failed, session } of messages) {
      const item = { bubble: new VisitorBubble(text, this.lang, this.t), text, state: "queued", ref: null };
      if (typeof failed === "string") Object.assign(item, { state: "failed", error: failed });
      else if (typeof session === "string" && session) {
        Object.assign(item, { sentOn: session, unknown: true }); // kept before its ack came
        if (session !== this.session) {
          elsewhere.set(session, [...(elsewhere.get(session) ?? []), [id, item]]);
          continue;
        }
      }
      here.push([id, item]);
    }
    for (const [session, items] of elsewhere) this.settle(session, items);
    this.carry(here);
  },

  /** A message carried or restored is no longer kept below the conversation once it is in it. */
  release(item) {
    delete item.bubble.node.dataset.held;
  },
};
