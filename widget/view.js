// The widget's DOM, built inside a shadow root (the host page's styles do not reach in,
// the widget's do not leak out): an optional launcher button with an unread badge, and
// the chat panel — header, conversation log with a "new messages" jump, activity line,
// composer.

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

let instances = 0;

const CHAT_ICON =
  '<svg viewBox="0 0 24 24" width="28" height="28" aria-hidden="true" focusable="false">' +
  '<path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/></svg>';
const CLOSE_ICON =
  '<svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" focusable="false">' +
  '<path fill="currentColor" d="M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z"/></svg>';

/**
 * Build the widget under `host` (its shadow root). Returns the elements the chat drives.
 * @param {HTMLElement} host
 * @param {{mode: string, title: string, theme: string, cssUrl: string, t: Function}} opts
 */
export function buildView(host, { mode, title, theme, cssUrl, t }) {
  const shadow = host.attachShadow({ mode: "open" });
  host.dataset.mode = mode;
  host.dataset.theme = theme;
  const n = ++instances;
  const css = el("link");
  css.rel = "stylesheet";
  css.href = cssUrl;
  const ready = new Promise((resolve) => {
    css.addEventListener("load", resolve, { once: true });
    css.addEventListener("error", resolve, { once: true });
  });

  const panel = el("section", "parley-widget");
  panel.id = `parley-panel-${n}`;
  panel.setAttribute("aria-label", t("chatLabel", { title }));

  const header = el("header", "parley-header");
  const heading = el("h2", "parley-title", title);
  const connection = el("span", "parley-connection", t("connecting"));
  connection.setAttribute("role", "status");
  const titles = el("div", "parley-titles");
  titles.append(heading, connection);
  const newButton = el("button", "parley-new", t("newConversation"));
  newButton.type = "button";
  header.append(titles, newButton);
  let closeButton = null;
  if (mode === "launcher") {
    closeButton = el("button", "parley-close");
    closeButton.type = "button";
    closeButton.innerHTML = CLOSE_ICON;
    closeButton.setAttribute("aria-label", t("closeChat"));
    header.append(closeButton);
  }

  const logWrap = el("div", "parley-log-wrap");
  const log = el("div", "parley-log");
  log.setAttribute("role", "log");
  log.setAttribute("aria-live", "polite");
  log.setAttribute("tabindex", "0");
  log.setAttribute("aria-label", t("conversation"));
  const jump = el("button", "parley-jump", `${t("newMessages")} ↓`);
  jump.type = "button";
  jump.hidden = true;
  logWrap.append(log, jump);

  const activity = el("p", "parley-activity");
  activity.setAttribute("role", "status");
  activity.setAttribute("aria-live", "polite");

  const form = el("form", "parley-composer");
  const inputId = `parley-input-${n}`;
  const label = el("label", "parley-visually-hidden", t("yourMessage"));
  label.htmlFor = inputId;
  const input = el("input", "parley-input");
  input.id = inputId;
  input.type = "text";
  input.placeholder = t("placeholder");
  input.autocomplete = "off";
  const send = el("button", "parley-send", t("send"));
  send.type = "submit";
  form.append(label, input, send);
  panel.append(header, logWrap, activity, form);

  let launcher = null;
  let badge = null;
  if (mode === "launcher") {
    launcher = el("button", "parley-launcher");
    launcher.type = "button";
    launcher.innerHTML = CHAT_ICON;
    launcher.setAttribute("aria-controls", panel.id);
    launcher.setAttribute("aria-expanded", "false");
    launcher.setAttribute("aria-label", t("openChat"));
    badge = el("span", "parley-badge");
    badge.setAttribute("aria-hidden", "true");
    badge.hidden = true;
    launcher.append(badge);
    panel.hidden = true;
  }
  shadow.append(css, panel);
  if (launcher) shadow.append(launcher);
  return { shadow, ready, panel, connection, newButton, closeButton, log, jump, activity, form, input, send, launcher, badge };
}
