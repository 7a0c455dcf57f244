// Parley chat widget. Paste one tag into any page (its origin must be allowed by the
// server's PARLEY_ALLOWED_ORIGINS):
//
//   <script type="module" src="https://chat.example.com/widget/parley-widget.js"
//           data-title="Support"></script>
//
// Without data-target it is a launcher bubble in the corner that opens the chat; with
// data-target="#chat" it fills that element. Other attributes: data-agent (one of the
// server's chat workflows), data-lang ("en", "fr"), data-theme ("auto", "light", "dark"),
// data-open ("true": the launcher starts open), data-slow-after (seconds of silence before
// "still working…"), data-strings (JSON: your own wording), data-manual (do not mount:
// call mount() yourself).
//
// JS API: the mounted chat is window.parley (and the detail of a "parley:ready" event on
// document); chat.open(), chat.close(), chat.send(text), chat.newConversation(), and
// events "open", "close", "message", "prompt", "state", "unread" (also dispatched on the
// page as "parley:<name>" DOM events).

import { ChatWidget } from "./chat.js";

const SERVER = new URL("..", import.meta.url).href; // the server that serves this file
const CSS_URL = new URL("parley-widget.css", import.meta.url).href;

function parseStrings(raw) {
  if (!raw) return {};
  try {
    const value = JSON.parse(raw);
    return value && typeof value === "object" ? value : {};
  } catch {
    console.warn("parley-widget: data-strings is not a JSON object; ignored");
    return {};
  }
}

/**
 * Mount a chat. `target`: an element or a CSS selector to fill, or null for a launcher
 * bubble in the page's corner.
 * @returns {ChatWidget}
 */
export function mount(target = null, options = {}) {
  let node = null;
  if (target) {
    node = typeof target === "string" ? document.querySelector(target) : target;
    if (!node) throw new Error(`parley-widget: expected an element for ${target}, found none`);
  }
  const host = document.createElement("parley-chat"); // a name no page rule targets
  host.className = "parley-host";
  if (node) node.replaceChildren(host);
  else document.body.append(host);
  return new ChatWidget(host, {
    server: options.server || SERVER,
    cssUrl: CSS_URL,
    mode: node ? "inline" : "launcher",
    title: options.title || "Support",
    agent: options.agent || null,
    lang: options.lang || null,
    theme: ["light", "dark"].includes(options.theme) ? options.theme : "auto",
    open: Boolean(options.open),
    slowAfter: Number.isFinite(options.slowAfter) ? options.slowAfter : 5,
    strings: options.strings || {},
  });
}

function optionsOf(script) {
  const data = script.dataset;
  return {
    title: data.title,
    agent: data.agent,
    lang: data.lang,
    theme: data.theme,
    open: data.open === "true",
    slowAfter: data.slowAfter === undefined ? undefined : Number(data.slowAfter),
    strings: parseStrings(data.strings),
  };
}

// Auto-mount for the tag that loaded this module: once per place (a module runs once
// however many tags load it, and the loop sees them all: the snippet pasted twice, by a
// tag manager and by hand, mounted two launchers over each other, one conversation twice).
const placed = new Set();
for (const script of document.querySelectorAll("script[type=module][src]")) {
  if (new URL(script.src, document.baseURI).href !== import.meta.url || "manual" in script.dataset) continue;
  const place = script.dataset.target || "";
  if (placed.has(place)) continue;
  placed.add(place);
  const start = () => {
    const chat = mount(script.dataset.target || null, optionsOf(script));
    window.parley = chat;
    document.dispatchEvent(new CustomEvent("parley:ready", { detail: chat }));
  };
  if (document.body) start();
  else document.addEventListener("DOMContentLoaded", start, { once: true });
}
