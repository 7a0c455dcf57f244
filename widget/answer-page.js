// The page of a signed answer link (/a/<link>): the hook's form, rendered from its JSON
// Schema by the widget's own form code, answered with POST /a/<link>.
import { t } from "./console/strings.js";
import { renderForm } from "./schema-form.js";

const hook = JSON.parse(document.getElementById("parley-hook").textContent);
const holder = document.getElementById("parley-form");
const error = document.getElementById("parley-error");
const result = document.getElementById("parley-result");

// The refusals of POST /a/<link> (server/links.py) that no second try can change: the
// question answered, expired (or its link), withdrawn, closed by a first(), its run ended
// or gone, the link altered or signed with a retired key.
const FINAL = new Set([
  "hook_already_answered", "hook_expired", "hook_cancelled", "hook_closed", "run_finished",
  "hook_not_found", "run_not_found", "invalid_link",
]);

function lock(form) {
  for (const control of form.querySelectorAll("button, input, select, textarea")) control.disabled = true;
}

async function submit(payload) {
  error.textContent = "";
  delete error.dataset.code;
  lock(holder);
  let reply;
  try {
    const response = await fetch(location.pathname, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ payload }),
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
    reply = await response.json();
    if (response.ok) {
      result.textContent = "Thank you — your answer was recorded.";
      holder.closest(".parley-prompt").dataset.state = "received";
      return;
    }
  } catch (exc) {
    reply = { message: "The server could not be reached; try again." };
  }
  // The server's message is written for the person (what happened, what to do); its code
  // is for a machine only, as is its "detail" (the runtime's own wording), never shown.
  error.textContent = reply.message || "Your answer was not recorded. Send it again in a moment.";
  if (reply.error) error.dataset.code = reply.error;
  // Only an answer that does not fit, or a server out of reach, may be given again: the
  // form is as the person left it, to correct and send again.
  if (!FINAL.has(reply.error)) {
    const controls = holder.querySelectorAll("button, input, select, textarea");
    for (const control of controls) control.disabled = false;
    controls[0]?.focus();
  }
}

const form = renderForm(hook.schema, hook.prompt, submit, t, "parley-question");
form.setAttribute("aria-labelledby", "parley-question");
// choice buttons are a group named by the question (a form is named the same way)
if (form.tagName !== "FORM") form.setAttribute("role", "group");
holder.replaceChildren(form);
if (hook.expires_at) {
  const note = document.createElement("p");
  note.className = "parley-prompt-note";
  note.textContent = `Please answer before ${new Date(hook.expires_at * 1000).toLocaleString()}.`;
  holder.append(note);
}
