// The conversation's items: visitor and agent bubbles (agent text as safe markdown, with
// its time), prompt cards, notices. Each knows how to update itself; the chat decides
// when.

import { renderMarkdown } from "./markdown.js";
import { renderForm } from "./schema-form.js";
import { el } from "./view.js";

/** The time a stream id ("<ms>-<seq>") was written. */
export function timeOf(id) {
  const ms = Number(String(id || "").split("-")[0]);
  return Number.isFinite(ms) && ms > 0 ? new Date(ms) : new Date();
}

function timeElement(date, lang) {
  const node = el("time", "parley-time");
  setTime(node, date, lang);
  return node;
}

function setTime(node, date, lang) {
  const today = new Date().toDateString() === date.toDateString();
  const format = today ? { hour: "2-digit", minute: "2-digit" } : { dateStyle: "medium", timeStyle: "short" };
  node.dateTime = date.toISOString();
  node.textContent = new Intl.DateTimeFormat(lang, format).format(date);
}

export class VisitorBubble {
  constructor(text, lang, t) {
    this.t = t;
    this.text = text;
    this.node = el("div", "parley-msg parley-visitor");
    this.body = el("p", "parley-body", text);
    this.meta = el("div", "parley-meta");
    this.time = timeElement(new Date(), lang);
    this.lang = lang;
    this.note = el("span", "parley-note");
    this.meta.append(this.note, this.time);
    this.node.append(this.body, this.meta);
    this.retry = null;
  }

  /** queued | sending | sent | failed (with a Retry button, or an Edit button for a
   *  refusal no second try can change: its text goes back to the message box). */
  setState(state, { note = "", onRetry = null, onEdit = null } = {}) {
    this.node.dataset.state = state;
    this.note.textContent = note;
    if (this.retry) {
      this.retry.remove();
      this.retry = null;
    }
    const action = state === "failed" ? (onRetry ? ["retry", onRetry] : onEdit ? ["edit", onEdit] : null) : null;
    if (action) {
      this.retry = el("button", "parley-retry", this.t(action[0]));
      this.retry.type = "button";
      this.retry.addEventListener("click", action[1]);
      this.meta.prepend(this.retry);
    }
  }

  confirm(id) {
    setTime(this.time, timeOf(id), this.lang);
    this.setState("sent");
  }
}

export class AgentBubble {
  constructor(id, lang) {
    this.node = el("div", "parley-msg parley-agent");
    this.body = el("div", "parley-body");
    this.node.append(this.body, timeElement(timeOf(id), lang));
    this.text = "";
    this.seq = 0; // the next chunk expected
    this.resumeFrom = 0; // after a re-execution: new text starts past this chunk
    this.scheduled = false;
  }

  /** Apply chunk `seq`: "appended", "duplicate", or "restarted" (the agent re-runs this
   * message after a crash: its text starts again from the first chunk). */
  apply(seq, delta) {
    let outcome = "appended";
    if (seq < this.seq) {
      if (seq !== 0) return "duplicate";
      this.resumeFrom = Math.max(this.resumeFrom, this.seq);
      this.text = "";
      outcome = "restarted";
    }
    this.seq = seq + 1;
    this.text += delta;
    return outcome;
  }

  get caughtUp() {
    return this.seq > this.resumeFrom;
  }

  render() {
    this.body.innerHTML = renderMarkdown(this.text);
  }
}

export class PromptCard {
  constructor(frame, t, onAnswer) {
    this.token = frame.token;
    this.runId = frame.run_id;
    this.schema = frame.schema || null;
    this.state = "pending";
    this.node = el("div", "parley-prompt");
    this.node.setAttribute("role", "group");
    const question = el("p", "parley-question", frame.prompt || t("questionFallback"));
    question.id = `parley-q-${Math.random().toString(36).slice(2, 10)}`;
    this.node.setAttribute("aria-labelledby", question.id);
    this.body = renderForm(frame.schema, frame.prompt, onAnswer, t, question.id);
    this.note = el("p", "parley-prompt-note");
    this.note.setAttribute("aria-live", "polite");
    this.node.append(question, this.body, this.note);
    this.node.dataset.state = "pending";
  }

  controls() {
    return this.body.querySelectorAll("button, input, select");
  }

  firstControl() {
    return this.body.querySelector("button, input, select");
  }

  enable(on) {
    for (const control of this.controls()) control.disabled = !on;
  }

  setState(state, note = "") {
    this.state = state;
    this.node.dataset.state = state;
    this.note.textContent = note;
    this.enable(state === "pending");
  }
}

export function notice(cls, title, body, action) {
  const node = el("div", `parley-notice ${cls}`);
  node.setAttribute("role", "note");
  node.append(el("p", "parley-notice-title", title));
  if (body) node.append(el("p", "parley-notice-body", body));
  if (action) {
    const button = el("button", "parley-notice-action", action.label);
    button.type = "button";
    button.addEventListener("click", action.onClick);
    node.append(button);
  }
  return node;
}
