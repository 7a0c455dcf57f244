// A session's websocket: reconnects with backoff by itself and resumes after the last
// message id it saw, so a page never gets a message twice.

const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 10000;

function compareIds(a, b) {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am - bm || as - bs;
}

export class Connection {
  /**
   * @param {object} opts
   * @param {string} opts.server  base URL of the Parley server (http[s]://host:port)
   * @param {() => Promise<string>} opts.session  returns the session id (creates one)
   * @param {() => void} opts.onUnknownSession  the server forgot the session
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
    this.unknownSession = false;
    // What the server said of itself in its first frame (limits, close codes).
    this.limits = null;
  }

  async start() {
    this.stopped = false;
    this.opts.onState("connecting");
    let session;
    try {
      session = await this.opts.session();
    } catch (err) {
      this.scheduleReconnect();
      return;
    }
    const url = new URL(`/ws/sessions/${encodeURIComponent(session)}`, this.opts.server);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("after", this.lastId);
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      // The server names the refusal in an error frame before it closes the socket.
      if (this.unknownSession) {
        this.unknownSession = false;
        this.lastId = "0-0";
        this.opts.onUnknownSession();
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
      this.limits = frame.limits || null;
      this.opts.onState("open");
    }
    if (frame.type === "error" && frame.error === "session_not_found" && frame.ref === undefined) {
      this.unknownSession = true;
      return;
    }
    if (typeof frame.id === "string") {
      if (compareIds(frame.id, this.lastId) <= 0) return; // already seen
      this.lastId = frame.id;
    }
    this.opts.onFrame(frame);
  }

  scheduleReconnect() {
    this.opts.onState("lost");
    const delay = Math.min(MAX_DELAY_MS, MIN_DELAY_MS * 2 ** this.attempt);
    this.attempt += 1;
    const jitter = delay * (0.8 + Math.random() * 0.4);
    setTimeout(() => {
      if (!this.stopped) this.start();
    }, jitter);
  }

  /** Send a frame; returns its ref, or null when the socket is not open. */
  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return null;
    const ref = `r${++this.refs}`;
    this.ws.send(JSON.stringify({ ...frame, ref }));
    return ref;
  }

  stop() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }
}
