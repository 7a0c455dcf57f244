// Small DOM helpers (text is always set as text, never parsed as HTML).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

export function when(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  return new Date(seconds * 1000).toLocaleString();
}

export function age(seconds) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function json(value) {
  return JSON.stringify(value);
}

export function statusBadge(status) {
  return el("span", { class: "pc-status", "data-status": status, text: status });
}

export function toast(text) {
  const node = document.getElementById("pc-toast");
  node.textContent = text;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { node.textContent = ""; }, 4000);
}
