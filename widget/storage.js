// Where a visitor's conversation is remembered: localStorage of the host page (so it is
// per site), under a key per Parley server and agent. It holds the session id and the id
// of the last message the visitor has seen (for the unread count); the messages
// themselves always come from the server, except those the visitor wrote and the server
// has not confirmed yet (UnsentStore). Other tabs of the same site follow a change (a new
// conversation) through the `storage` event.

const PREFIX = "parley:v1";

function safeStorage(name = "localStorage") {
  try {
    const storage = window[name];
    const probe = `${PREFIX}:probe`;
    storage.setItem(probe, "1");
    storage.removeItem(probe);
    return storage;
  } catch {
    return null; // storage disabled (privacy mode): the conversation lives as long as the page
  }
}

export class ConversationStore {
  constructor(server, agent) {
    this.key = `${PREFIX}:${new URL(server).origin}:${agent || "default"}`;
    this.storage = safeStorage();
    this.memory = null;
  }

  read() {
    if (!this.storage) return this.memory;
    try {
      const value = JSON.parse(this.storage.getItem(this.key) || "null");
      return value && typeof value.session === "string" ? value : null;
    } catch {
      return null;
    }
  }

  write(value) {
    this.memory = value;
    if (!this.storage) return;
    try {
      if (value === null) this.storage.removeItem(this.key);
      else this.storage.setItem(this.key, JSON.stringify(value));
    } catch {
      // full or disabled: keep it in memory
    }
  }

  get session() {
    return this.read()?.session ?? null;
  }

  set session(session) {
    this.write(session ? { session, seen: "0-0" } : null);
  }

  get seen() {
    return this.read()?.seen ?? "0-0";
  }

  set seen(id) {
    const current = this.read();
    if (current) this.write({ ...current, seen: id });
  }

  /** Call `callback(session)` when another tab changes the conversation. */
  watch(callback) {
    window.addEventListener("storage", (event) => {
      if (event.key !== this.key) return;
      let session = null;
      try {
        session = JSON.parse(event.newValue || "null")?.session ?? null;
      } catch {
        session = null;
      }
      callback(session);
    });
  }
}

// A lock held for as long as the page lives (a Web Lock is released when its page goes).
const FOREVER = new Promise(() => {});

/**
 * The messages a tab's visitor wrote that the server has not confirmed (queued, in flight,
 * or refused), kept so that a reload, or a later tab, still sends them, with their client
 * ids: one the server had already taken is shown and started once.
 *
 * Each tab writes only its own list, under its own key, so two tabs never overwrite each
 * other's. A tab holds a Web Lock named after its key while it lives, and asks for the
 * lock of every other list it finds: granted once that list's tab is gone (its page
 * reloaded or closed), to one tab only, which takes the list over (and keeps the lock, so
 * no later tab takes it again). A list is thus sent by one tab, never by two racing.
 * Without Web Locks (a page not served over https), the list lives in the tab's
 * sessionStorage instead: only a reload of that same tab takes it back.
 */
export class UnsentStore {
  constructor(base) {
    this.prefix = `${base}:unsent:`;
    this.locks = typeof navigator.locks?.request === "function" ? navigator.locks : null;
    this.storage = safeStorage(this.locks ? "localStorage" : "sessionStorage");
    this.key = `${this.prefix}${this.locks ? `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}` : "tab"}`;
    // until this tab holds its own lock, another tab could take a list it wrote
    this.owned = !this.locks;
    this.waiting = null;
    if (this.locks) {
      this.locks.request(this.key, () => {
        this.owned = true;
        if (this.waiting) this.save(this.waiting);
        return FOREVER;
      });
    }
  }

  /** Keep `messages` ([{ id, text, failed? }], in order) as this tab's list. */
  save(messages) {
    this.waiting = messages;
    if (!this.storage || !this.owned) return;
    try {
      if (messages.length) this.storage.setItem(this.key, JSON.stringify(messages));
      else this.storage.removeItem(this.key);
    } catch {
      // full or disabled: the messages are still sent while this page lives
    }
  }

  /** Call `onTaken(messages)` with each list left by a tab that is gone. */
  takeOver(onTaken) {
    if (!this.storage) return;
    const take = (key) => {
      let messages = [];
      try {
        messages = JSON.parse(this.storage.getItem(key) || "[]");
        this.storage.removeItem(key);
      } catch {
        messages = [];
      }
      if (Array.isArray(messages) && messages.length) onTaken(messages.filter(valid));
    };
    if (!this.locks) {
      take(this.key);
      return;
    }
    const keys = [];
    for (let i = 0; i < this.storage.length; i += 1) {
      const key = this.storage.key(i);
      if (key && key.startsWith(this.prefix) && key !== this.key) keys.push(key);
    }
    for (const key of keys) {
      this.locks.request(key, () => {
        take(key);
        return FOREVER;
      });
    }
  }
}

function valid(message) {
  return message && typeof message.id === "string" && typeof message.text === "string";
}
