// Where a visitor's conversation is remembered: localStorage of the host page (so it is
// per site), under a key per Parley server and agent. It holds the session id and the id
// of the last message the visitor has seen (for the unread count); the messages
// themselves always come from the server. Other tabs of the same site follow a change
// (a new conversation) through the `storage` event.

const PREFIX = "parley:v1";

function safeStorage() {
  try {
    const probe = `${PREFIX}:probe`;
    window.localStorage.setItem(probe, "1");
    window.localStorage.removeItem(probe);
    return window.localStorage;
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
