// The page of a signed answer link (/a/<link>): the hook's form, rendered from its JSON
// Schema by the widget's own form code, answered with POST /a/<link>; or why the link
// cannot be used. In the visitor's language, chosen as the widget chooses it when its page
// names none (the browser's, navigator.language; English when it is not one the widget
// speaks), with the widget's strings (i18n.js). The server writes the page in English
// (<html lang="en">); in another language its words are replaced here, and the page's
// lang attribute with them.
import { ANSWER_PAGE, pickLanguage, translator } from "./i18n.js";
import { renderForm } from "./schema-form.js";

const lang = pickLanguage(navigator.language);
const t = translator(lang, { ...ANSWER_PAGE.en, ...ANSWER_PAGE[lang] });

/** The string `key` in this language, or `english` (the server's words) without one. */
function said(key, english) {
  const text = t(key);
  return text === key ? english : text;
}

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

/** What a refused POST says for the person: its reason's or its code's words in this
 *  language (the server's own message is English), else the server's message. */
function refusal(reply) {
  if (reply.reason) {
    const text = t(`refusal_${reply.reason}`);
    if (text !== `refusal_${reply.reason}`) return text;
  }
  if (lang === "en") return reply.message || t("pageNotRecorded");
  return said(`answer_${reply.error}`, t("answer_fallback"));
}

/** Say the page's title (its heading and the window's) in this language. */
function title(text) {
  const heading = document.querySelector(".parley-title");
  if (heading) heading.textContent = text;
  document.title = `${text} — Parley`;
}

function answerPage(hook) {
  const holder = document.getElementById("parley-form");
  const error = document.getElementById("parley-error");
  const result = document.getElementById("parley-result");

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
        result.textContent = t("pageThanks");
        holder.closest(".parley-prompt").dataset.state = "received";
        return;
      }
    } catch (exc) {
      reply = { message: t("pageUnreachable") };
    }
    // The server's message is written for the person (what happened, what to do); its code
    // is for a machine only, as is its "detail" (the runtime's own wording), never shown.
    error.textContent = reply.error ? refusal(reply) : reply.message || t("pageNotRecorded");
    if (reply.error) error.dataset.code = reply.error;
    // Only an answer that does not fit, or a server out of reach, may be given again: the
    // form is as the person left it, to correct and send again.
    if (!FINAL.has(reply.error)) {
      const controls = holder.querySelectorAll("button, input, select, textarea");
      for (const control of controls) control.disabled = false;
      controls[0]?.focus();
    }
  }

  if (lang !== "en") title(t("pageTitle"));
  const form = renderForm(hook.schema, hook.prompt, submit, t, "parley-question");
  form.setAttribute("aria-labelledby", "parley-question");
  // choice buttons are a group named by the question (a form is named the same way)
  if (form.tagName !== "FORM") form.setAttribute("role", "group");
  holder.replaceChildren(form);
  if (hook.expires_at) {
    const note = document.createElement("p");
    note.className = "parley-prompt-note";
    const date = new Date(hook.expires_at * 1000).toLocaleString(lang);
    note.textContent = t("pageAnswerBefore", { date });
    holder.append(note);
  }
}

/** A page saying why the link cannot be used (its data-reason): in this language. */
function refusalPage(node) {
  const reason = node.dataset.reason;
  title(said(`title_${reason}`, document.querySelector(".parley-title")?.textContent ?? ""));
  node.textContent = said(`refusal_${reason}`, node.textContent);
}

const hook = document.getElementById("parley-hook");
const refused = document.querySelector("[data-reason]");
if (hook) answerPage(JSON.parse(hook.textContent));
else if (refused) refusalPage(refused);
document.documentElement.lang = lang;
