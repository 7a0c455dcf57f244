// The console's calls to the server: the API key (kept in this tab's session storage) as a
// Bearer header on every request, JSON in and out, and the live stream of pending hooks.
const KEY = "parley-console-key";

export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.code = body.error;
  }
}

export const auth = {
  get key() { return sessionStorage.getItem(KEY); },
  set key(value) { value ? sessionStorage.setItem(KEY, value) : sessionStorage.removeItem(KEY); },
};

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Authorization: `Bearer ${auth.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Server-sent events read with fetch (EventSource cannot send the Authorization header).
// Calls onEvent(name, data) for each event; reconnects after a drop until stop() is called.
export function live(path, onEvent, onState = () => {}) {
  let stopped = false;
  let controller = null;
  async function run() {
    while (!stopped) {
      controller = new AbortController();
      try {
        const response = await fetch(path, {
          headers: { Authorization: `Bearer ${auth.key}`, Accept: "text/event-stream" },
          signal: controller.signal, cache: "no-store",
        });
        if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => ({})));
        onState("live");
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let name = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) name = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            }
            if (data.length) onEvent(name, JSON.parse(data.join("\n")));
          }
        }
      } catch (exc) {
        if (stopped) return;
        if (exc instanceof ApiError && (exc.status === 401 || exc.status === 403)) { onState("denied"); return; }
      }
      if (!stopped) { onState("reconnecting"); await new Promise((r) => setTimeout(r, 1000)); }
    }
  }
  run();
  return { stop() { stopped = true; if (controller) controller.abort(); } };
}
