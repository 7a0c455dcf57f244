// The server's frames, for the chat: visitor messages (this tab's, confirmed, or another
// tab's), the agent's streamed text (a chunk seen twice is ignored; a message restarted
// after a crash is shown as recovering), prompts and how they end (answered, expired,
// withdrawn, closed), and run status.
//
// These are methods of ChatWidget (chat.js installs them on its prototype).

import { AgentBubble, PromptCard, VisitorBubble } from "./messages.js";
import { describeAnswer } from "./schema-form.js";
import { el } from "./view.js";

export const frames = {
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
  },

  applyLimits(limits) {
    // The server's own limits, from its first frame: nothing here copies them.
    if (limits && Number.isInteger(limits.max_message_chars)) this.view.input.maxLength = limits.max_message_chars;
  },

  onVisitor(frame) {
    if (frame.client_id) this.shown.add(frame.client_id);
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
  },

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
  },

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
  },

  onAnswered(frame) {
    const card = this.prompts.get(frame.token);
    this.settlePrompt(frame.token, "received", frame.payload);
    if (card) this.touch();
  },

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
  },

  onStatus(frame) {
    this.ended.add(frame.run_id);
    if (frame.reason === "lost_first") {
      // a child run whose branch of its parent's first() lost: its prompts were closed, and
      // the conversation goes on in the parent (no "stopped" notice), which the chat now
      // waits on; a message the visitor wrote meanwhile goes once that run is free
      if (frame.run_id === this.activeRun) {
        const next = frame.continues_in;
        this.activeRun = typeof next === "string" && !this.ended.has(next) ? next : null;
      }
      this.refresh();
      this.flush();
      return;
    }
    if (frame.status === "continued" && frame.continued_to) {
      // continue_as_new: the conversation goes on in the run that continues this one
      if (frame.run_id === this.activeRun) this.activeRun = frame.continued_to;
      this.refresh();
      return;
    }
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
  },
};
