// A session's websocket: reconnects with backoff by itself and resumes after the last
// message id it saw, so a page never gets a message twice. The server names a refusal in
// an error frame before it closes the socket: an unknown (expired) session and a page of
// an origin it does not allow end the reconnecting; everything else is retried.

const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 10000;

export function compareIds(a, b) {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am - bm || as - bs;
}

export class Connection {
  /**
   * @param {object} opts
   * @param {string} opts.server  base URL of the Parley server (http[s]://host:port/)
   * @param {string} opts.session  the session id
   * @param {(code: string) => void} opts.onRefused  "session_not_found" | "origin_not_allowed"
   * @param {(frame: object) => void} opts.onFrame  a new frame from the server
   * @param {(state: string) => void} opts.onState  "connecting" | "open" | "lost"
   */
  constructor(opts) {
    this.opts = opts;
    this.lastId = "0-0";
    this.attempt = 0;
    this.ws = null;
    this.refs = 0;
    this.stopped = false;
    this.refusal = null;
    this.timer = null;
    this.limits = null; // what the server said of itself in its first frame
  }

  get open() {
    return Boolean(this.ws && this.ws.readyState === WebSocket.OPEN && this.limits);
  }

  start() {
    this.stopped = false;
    this.opts.onState("connecting");
    const url = new URL(`ws/sessions/${encodeURIComponent(this.opts.session)}`, this.opts.server);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("after", this.lastId);
    let ws;
    try {
      ws = new WebSocket(url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.limits = null;
      if (this.refusal) {
        this.stopped = true;
        this.opts.onRefused(this.refusal);
        return;
      }
      if (!this.stopped) this.scheduleReconnect();
    };
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === "ready") {
      this.attempt = 0;
      this.limits = frame.limits || {};
    }
    if (frame.type === "error" && frame.ref === undefined &&
        (frame.error === "session_not_found" || frame.error === "origin_not_allowed")) {
      this.refusal = frame.error;
      return;
    }
    if (typeof frame.id === "string") {
      if (compareIds(frame.id, this.lastId) <= 0) return; // already seen
      this.lastId = frame.id;
    }
    this.opts.onFrame(frame);
    if (frame.type === "ready") this.opts.onState("open");
  }

  scheduleReconnect() {
    this.opts.onState("lost");
    const delay = Math.min(MAX_DELAY_MS, MIN_DELAY_MS * 2 ** this.attempt);
    this.attempt += 1;
    const jitter = delay * (0.8 + Math.random() * 0.4);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.stopped) this.start();
    }, jitter);
  }

  /** Reconnect now (the browser says it is back online). */
  retryNow() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.timer);
    this.start();
  }

  /** The frame as send() writes it: its ref first, so a server that refuses it unread
   *  (too large) can still read the ref from its head and echo it. */
  encode(frame, ref) {
    return JSON.stringify({ ref, ...frame });
  }

  /** Whether `frame`, as send() would write it now, is over the server's limit (the
   *  `max_frame_bytes` of its first frame), measured in UTF-8 bytes as the server does. */
  tooLarge(frame) {
    const max = this.limits?.max_frame_bytes;
    if (!Number.isInteger(max)) return false;
    return new TextEncoder().encode(this.encode(frame, `r${this.refs + 1}`)).length > max;
  }

  /** Send a frame; returns its ref, or null when the socket is not open or the frame is
   *  too large for the server (callers ask tooLarge() first: it is not sent). */
  send(frame) {
    if (!this.open || this.tooLarge(frame)) return null;
    const ref = `r${++this.refs}`;
    this.ws.send(this.encode(frame, ref));
    return ref;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
  }
}
