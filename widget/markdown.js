// Agent text as safe markdown: marked (GFM) renders it, raw HTML in the text is escaped
// (markup an agent writes is shown as text, never interpreted), and DOMPurify sanitizes
// the result with a short allow-list (no images, no styles, no scripts, http(s)/mailto
// links only, opened in a new tab without a referrer or an opener).

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    // Raw HTML in the markdown (block or inline) is shown as the text it is.
    html(token) {
      return escapeHtml(token.text);
    },
  },
});

const purifier = DOMPurify(window);
const ALLOWED_TAGS = [
  "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
  "a", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
];
const SAFE_URL = /^(?:https?:|mailto:)/i;

purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_URL.test(href)) {
      node.removeAttribute("href");
      return;
    }
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

/** Sanitized HTML for the markdown `text`. */
export function renderMarkdown(text) {
  const html = marked.parse(String(text), { async: false });
  return purifier.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: ["href", "title", "target", "rel", "start", "align"],
    ALLOW_DATA_ATTR: false,
  });
}
