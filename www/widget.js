// Kiln's widget loader, for any site: <script src="KILN_ORIGIN/widget.js" async></script>.
//
// It defines `window.KilnWidget` and does no Kiln work on the host page: it draws a
// launcher (in a shadow root, so the host's CSS does not reach it and its
// own does not leak) and, when the launcher is first opened (or at once with
// `preload: true` or a `container`), an iframe of `widget.html` from Kiln's own
// origin, which runs the chat, its runtime worker, store and model. The two talk
// only through `postMessage`: versioned JSON text (kiln_types::widget), sent to
// Kiln's origin only and read only from the iframe's window.
//
// `KilnWidget.mount(options)` resolves to a handle: open, close, toggle, send,
// newConversation, on(event, callback), registerTool, unregisterTool, destroy.
// A settings object `window.KilnWidgetSettings` set before the script loads is
// mounted by itself; a page's script that runs first waits for the
// `kilnwidget:load` event on window.
(() => {
  "use strict";
  if (window.KilnWidget && window.KilnWidget.version) return;

  const VERSION = 3001;
  const script = document.currentScript;
  const base = new URL(".", script && script.src ? script.src : location.href);
  const kilnOrigin = base.origin;
  const EVENTS = ["ready", "open", "close", "message", "error"];
  const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

  const CSS = `
:host { all: initial; }
.launcher { position: fixed; bottom: 20px; z-index: 2147483646; display: inline-flex; align-items: center;
  gap: 8px; padding: 12px 18px; border: 0; border-radius: var(--kiln-radius, 24px); cursor: pointer;
  background: var(--kiln-accent, #b4451f); color: #fff; font: 600 15px/1.2 var(--kiln-font, system-ui, sans-serif);
  box-shadow: 0 4px 16px rgba(0, 0, 0, .25); }
.launcher:focus-visible { outline: 3px solid #111; outline-offset: 3px; }
.launcher[aria-expanded="true"] .label-open, .launcher[aria-expanded="false"] .label-close { display: none; }
.panel { position: fixed; bottom: 84px; z-index: 2147483647; width: 400px; height: min(640px, calc(100vh - 110px));
  border-radius: var(--kiln-radius, 12px); overflow: hidden; background: #fff;
  box-shadow: 0 8px 32px rgba(0, 0, 0, .3); }
.panel[hidden] { display: none; }
.right { right: 20px; } .left { left: 20px; }
.inline { position: static; width: 100%; height: 100%; box-shadow: none; border-radius: 0; }
iframe { display: block; width: 100%; height: 100%; border: 0; color-scheme: normal; }
@media (max-width: 480px) {
  .panel:not(.inline) { inset: 0; width: 100%; height: 100%; border-radius: 0; }
}`;

  function sheet(root) {
    try {
      const css = new CSSStyleSheet();
      css.replaceSync(CSS);
      root.adoptedStyleSheets = [css];
    } catch {
      const style = document.createElement("style");
      style.textContent = CSS;
      root.append(style);
    }
  }

  // A host tool as the widget takes it; `execute` stays here.
  function declared(tool) {
    if (!tool || typeof tool !== "object") throw new TypeError("registerTool takes {name, description, inputSchema, execute}");
    if (typeof tool.name !== "string" || !NAME.test(tool.name)) {
      throw new TypeError(`the tool name \`${String(tool.name).slice(0, 60)}\` must be 1 to 48 ASCII letters, digits or _, not starting with a digit`);
    }
    if (typeof tool.execute !== "function") throw new TypeError(`the tool \`${tool.name}\` has no execute function`);
    return {
      name: tool.name,
      description: String(tool.description || ""),
      input_schema: tool.inputSchema || { type: "object" },
      read_only: Boolean(tool.annotations && tool.annotations.readOnlyHint),
    };
  }

  function mount(options = {}) {
    return new Promise((resolve) => resolve(new Widget(options)));
  }

  class Widget {
    #options;
    #listeners = new Map(EVENTS.map((name) => [name, new Set()]));
    #tools = new Map();
    #host;
    #root;
    #launcher = null;
    #panel;
    #frame = null;
    #ready = false;
    #queue = [];
    #open = false;
    #onMessage;
    #onKey;

    constructor(options) {
      this.#options = options || {};
      const container = typeof options.container === "string" ? document.querySelector(options.container) : options.container;
      if (options.container && !container) throw new TypeError(`no element matches the container \`${options.container}\``);
      for (const tool of options.tools || []) this.#tools.set(tool.name, { spec: declared(tool), execute: tool.execute });
      this.#host = document.createElement("div");
      this.#host.setAttribute("data-kiln-widget", "");
      if (container) this.#host.style.cssText = "display:block;width:100%;height:100%";
      this.#root = this.#host.attachShadow({ mode: "open" });
      sheet(this.#root);
      const theme = options.theme || {};
      if (theme.accent) this.#host.style.setProperty("--kiln-accent", theme.accent);
      if (theme.radius) this.#host.style.setProperty("--kiln-radius", theme.radius);
      if (theme.font) this.#host.style.setProperty("--kiln-font", theme.font);
      const side = options.position === "bottom-left" ? "left" : "right";
      this.#panel = document.createElement("div");
      this.#panel.className = container ? "panel inline" : `panel ${side}`;
      this.#panel.id = "kiln-panel";
      this.#panel.hidden = !container;
      if (!container) {
        const title = String(options.title || "Kiln");
        this.#launcher = document.createElement("button");
        this.#launcher.type = "button";
        this.#launcher.className = `launcher ${side}`;
        this.#launcher.setAttribute("aria-expanded", "false");
        this.#launcher.setAttribute("aria-controls", "kiln-panel");
        this.#launcher.setAttribute("data-testid", "kiln-launcher");
        const opener = document.createElement("span");
        opener.className = "label-open";
        opener.textContent = options.label || title;
        const closer = document.createElement("span");
        closer.className = "label-close";
        closer.textContent = `Close ${title}`;
        this.#launcher.append(opener, closer);
        this.#launcher.addEventListener("click", () => this.toggle());
        this.#root.append(this.#launcher);
      }
      this.#root.append(this.#panel);
      (container || document.body).append(this.#host);
      this.#onMessage = (event) => this.#receive(event);
      window.addEventListener("message", this.#onMessage);
      this.#onKey = (event) => {
        if (event.key === "Escape" && this.#open && !container) this.close();
      };
      this.#host.addEventListener("keydown", this.#onKey);
      if (container || options.preload || options.open) this.#frameUp();
      if (options.open && !container) this.open();
    }

    // The iframe, made once. Its sandbox keeps what a chat needs: scripts, its own
    // origin's storage and workers (the host cannot reach them: another origin),
    // forms, and links opening in a new tab outside the sandbox; no top navigation,
    // no downloads, no modals over the host.
    #frameUp() {
      if (this.#frame) return;
      const frame = document.createElement("iframe");
      frame.src = new URL("widget.html", base).href;
      frame.title = String(this.#options.title || "Kiln");
      frame.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms allow-popups allow-popups-to-escape-sandbox");
      frame.setAttribute("allow", "clipboard-write; storage-access; tools");
      frame.setAttribute("referrerpolicy", "origin");
      frame.addEventListener("load", () => this.#hello());
      this.#frame = frame;
      this.#panel.append(frame);
    }

    #hello() {
      const o = this.#options;
      const options = {};
      for (const key of ["title", "greeting", "agent", "provider", "theme"]) if (o[key] !== undefined) options[key] = o[key];
      options.tools = [...this.#tools.values()].map((tool) => tool.spec);
      if (typeof o.getToken === "function") options.token = true;
      this.#post({ type: "hello", options }, true);
    }

    #post(msg, now) {
      if (!this.#frame || !this.#frame.contentWindow) return;
      if (!now && !this.#ready) {
        this.#queue.push(msg);
        return;
      }
      this.#frame.contentWindow.postMessage(JSON.stringify({ v: VERSION, msg }), kilnOrigin);
    }

    #emit(name, detail) {
      for (const callback of this.#listeners.get(name)) {
        try {
          callback(detail);
        } catch (error) {
          console.error("Kiln widget: an event listener threw", error);
        }
      }
    }

    async #receive(event) {
      if (!this.#frame || event.source !== this.#frame.contentWindow || event.origin !== kilnOrigin) return;
      let envelope;
      try {
        envelope = JSON.parse(event.data);
      } catch {
        return;
      }
      if (!envelope || envelope.v !== VERSION || !envelope.msg) return;
      const msg = envelope.msg;
      switch (msg.type) {
        case "ready":
          this.#ready = true;
          for (const queued of this.#queue.splice(0)) this.#post(queued);
          if (this.#open) this.#post({ type: "open" });
          this.#emit("ready", { provider: msg.provider });
          break;
        case "refused":
        case "rejected":
        case "error":
          this.#emit("error", { kind: msg.type, message: msg.reason || msg.message });
          break;
        case "close_requested":
          this.close();
          break;
        case "message":
          this.#emit("message", { text: msg.text, value: msg.value });
          break;
        case "tool_call":
          this.#post(await this.#run(msg));
          break;
        case "token_wanted":
          this.#post(await this.#token(msg.request));
          break;
      }
    }

    async #run(msg) {
      const tool = this.#tools.get(msg.name);
      if (!tool) return { type: "tool_result", call: msg.call, error: `this page has no tool \`${msg.name}\`` };
      try {
        const value = await tool.execute(msg.args);
        return { type: "tool_result", call: msg.call, value: value === undefined ? null : value };
      } catch (error) {
        return { type: "tool_result", call: msg.call, error: String(error && error.message ? error.message : error) };
      }
    }

    async #token(request) {
      try {
        const token = await this.#options.getToken();
        return typeof token === "string" ? { type: "token", request, token } : { type: "token", request, error: "getToken gave no string" };
      } catch (error) {
        return { type: "token", request, error: String(error && error.message ? error.message : error) };
      }
    }

    open() {
      this.#frameUp();
      if (this.#open) return;
      this.#open = true;
      this.#panel.hidden = false;
      if (this.#launcher) this.#launcher.setAttribute("aria-expanded", "true");
      this.#frame.focus();
      this.#post({ type: "open" });
      this.#emit("open");
    }

    close() {
      if (!this.#open || !this.#launcher) return;
      this.#open = false;
      this.#panel.hidden = true;
      this.#launcher.setAttribute("aria-expanded", "false");
      this.#launcher.focus();
      this.#post({ type: "close" });
      this.#emit("close");
    }

    toggle() {
      if (this.#open) this.close();
      else this.open();
    }

    send(text) {
      this.open();
      this.#post({ type: "send", text: String(text) });
    }

    newConversation() {
      this.#post({ type: "new_conversation" });
    }

    on(name, callback) {
      const listeners = this.#listeners.get(name);
      if (!listeners) throw new TypeError(`no widget event \`${name}\` (there are ${EVENTS.join(", ")})`);
      listeners.add(callback);
      return () => listeners.delete(callback);
    }

    registerTool(tool) {
      const spec = declared(tool);
      this.#tools.set(spec.name, { spec, execute: tool.execute });
      if (this.#frame) this.#post({ type: "register_tool", tool: spec });
    }

    unregisterTool(name) {
      if (!this.#tools.delete(name)) return;
      if (this.#frame) this.#post({ type: "unregister_tool", name });
    }

    destroy() {
      window.removeEventListener("message", this.#onMessage);
      this.#host.remove();
      this.#frame = null;
      this.#queue = [];
      for (const listeners of this.#listeners.values()) listeners.clear();
    }
  }

  window.KilnWidget = { version: VERSION, origin: kilnOrigin, mount };
  window.dispatchEvent(new Event("kilnwidget:load"));
  const settings = window.KilnWidgetSettings;
  if (settings && typeof settings === "object") {
    mount(settings).then((widget) => {
      window.KilnWidget.widget = widget;
    });
  }
})();
