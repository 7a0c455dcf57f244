// Agent text as safe markdown: marked (GFM) renders it, raw HTML in the text is escaped
// (markup an agent writes is shown as text, never interpreted), and DOMPurify sanitizes
// the result with a short allow-list (no images, no styles, no scripts, http(s)/mailto
// links only, opened in a new tab without a referrer or an opener). An image is shown as a
// link to it, named by its alt text (no picture loads from what an agent wrote), and a
// relative link goes where it would on the page the chat is on.

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
    image(token) {
      return `<a href="${escapeHtml(token.href)}">${escapeHtml(token.text || token.href)}</a>`;
    },
  },
});

const purifier = DOMPurify(window);
const ALLOWED_TAGS = [
  "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
  "a", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
];
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/** `href` made absolute against the page, if it is one of SAFE_SCHEMES; else null. */
function safeHref(href) {
  try {
    const url = new URL(href, document.baseURI);
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.hasAttribute("href") ? safeHref(node.getAttribute("href")) : null;
    if (href === null) {
      node.removeAttribute("href");
      return;
    }
    node.setAttribute("href", href);
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
