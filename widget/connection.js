// A session's websocket: reconnects with backoff by itself and resumes after the last
// message id it saw, so a page never gets a message twice. The server names a refusal in
// an error frame before it closes the socket: an unknown (expired) session and a page of
// an origin it does not allow end the reconnecting; everything else is retried.
//
// A socket can also die silently (the laptop slept, the phone changed networks: no close,
// no error, its bytes go nowhere for minutes). The server answers every frame (an ack, an
// error or a pong), so whatever is sent must be followed by some frame within
// ANSWER_WITHIN_MS, else the socket is dropped and a new one made (what was sent unacked is
// sent again with its client id: started once). An idle socket is pinged every
// IDLE_PING_MS, and at once when the browser says it is back online or the page is shown
// again (probe()).

const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 10000;
const ANSWER_WITHIN_MS = 8000;
const IDLE_PING_MS = 25000;

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
    this.deadline = null; // a frame was sent: some frame must come before this fires
    this.idle = null;
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
    // its first frame (ready) is due too: a handshake into a dead line never ends
    this.quiet();
    this.expectAnswer();
    ws.onmessage = (event) => {
      if (this.ws === ws) this.receive(event.data);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.limits = null;
      this.quiet();
      if (this.refusal) {
        this.stopped = true;
        this.opts.onRefused(this.refusal);
        return;
      }
      if (!this.stopped) this.scheduleReconnect();
    };
  }

  receive(data) {
    this.heard();
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

  /** Reconnect now (the browser says it is back online); an open socket is probed. */
  retryNow() {
    if (this.stopped) return;
    if (this.ws) {
      this.probe();
      return;
    }
    clearTimeout(this.timer);
    this.start();
  }

  /** Ask the server for a frame: none within ANSWER_WITHIN_MS, and the socket is dropped. */
  probe() {
    if (this.open) this.send({ type: "ping" });
  }

  // A frame came: the socket lives; the next ping is due after IDLE_PING_MS of silence.
  heard() {
    clearTimeout(this.deadline);
    this.deadline = null;
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.probe(), IDLE_PING_MS);
  }

  // A frame went: an answer is due (the first unanswered frame sets the deadline).
  expectAnswer() {
    if (this.deadline !== null) return;
    const ws = this.ws;
    this.deadline = setTimeout(() => this.dead(ws), ANSWER_WITHIN_MS);
  }

  quiet() {
    clearTimeout(this.deadline);
    clearTimeout(this.idle);
    this.deadline = null;
    this.idle = null;
  }

  // No frame came after one was sent: the socket is dead though the browser does not say
  // so (its close would wait on the dead line too). Forget it and make another.
  dead(ws) {
    this.deadline = null;
    if (this.ws !== ws || this.stopped) return;
    this.ws = null;
    this.limits = null;
    this.quiet();
    ws.onmessage = null;
    ws.onclose = null;
    try {
      ws.close();
    } catch {
      // already closing
    }
    this.scheduleReconnect();
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
    this.expectAnswer();
    return ref;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.quiet();
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
  }
}
