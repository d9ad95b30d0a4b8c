// Kiln's page API: run agent programs from any page that serves this folder
// (pkg/) from its own origin. Runs happen in Kiln's runtime worker, which
// starts the Boa sandbox workers itself; the page answers its own tools.
//
//   import { Kiln } from "./kiln/kiln.js";
//   const kiln = await Kiln.load();
//   const result = await kiln.run({ code, tools, limits });
//
// `result` is the tool-result/v1 object. See README.md, "Run programs from a page".
// The workspace's stores (IndexedDB + OPFS) are `kiln.memory`, `kiln.files`,
// `kiln.history`, `kiln.runMemory`, `kiln.config`, `kiln.agents`, `kiln.skills`, `kiln.schedules`, `kiln.secrets`, `kiln.exportAll`,
// `kiln.importAll` and `kiln.onChange`; see README.md, "Storage". Code nodes are
// `kiln.codeNode(spec).run(values)`, `kiln.graph({nodes, edges}).run(inputs)` and
// `kiln.authorCode(request)`; see README.md, "Code nodes in a page".
import init, { Kiln as Runtime } from "./kiln_page.js";

let loading;

/** Gives the runtime's storage operations their own methods. */
function withStorage(kiln) {
  const op = (name) => (args) => kiln.store(name, args ?? {});
  kiln.memory = {
    save: (text, { agent } = {}) => op("memory.save")({ text, agent }),
    query: (query, { agent, limit } = {}) => op("memory.query")({ query, agent, limit }),
    list: ({ agent, limit } = {}) => op("memory.list")({ agent, limit }),
    mark: (id, mark) => op("memory.mark")({ id, mark }),
    edit: (id, version, text) => op("memory.edit")({ id, version, text }),
    remove: (id, version) => op("memory.remove")({ id, version }),
  };
  kiln.files = {
    read: (path) => op("files.read")({ path }),
    write: (path, content) =>
      content instanceof Uint8Array
        ? op("files.write")({ path, base64: btoa(Array.from(content, (b) => String.fromCharCode(b)).join("")) })
        : op("files.write")({ path, text: content }),
    list: (path = "") => op("files.list")({ path }),
    stat: (path) => op("files.stat")({ path }),
    mkdir: (path) => op("files.mkdir")({ path }),
    remove: (path) => op("files.remove")({ path }),
  };
  kiln.history = {
    jobs: ({ limit } = {}) => op("history.jobs")({ limit }),
    search: (query, { limit } = {}) => op("history.search")({ query, limit }),
  };
  kiln.threads = {
    list: ({ limit } = {}) => op("threads.list")({ limit }),
    create: (firstMessage, { agent } = {}) => op("threads.create")({ first_message: firstMessage, agent }),
    open: (id) => op("threads.open")({ id }),
    append: (id, role, text) => op("threads.append")({ id, role, text }),
    rename: (id, title) => op("threads.rename")({ id, title }),
    pin: (id, pinned = true) => op("threads.pin")({ id, pinned }),
    remove: (id) => op("threads.delete")({ id }),
    restore: (id) => op("threads.restore")({ id }),
    truncate: (id, seq) => op("threads.truncate")({ id, seq }),
    fork: (id, seq) => op("threads.fork")({ id, seq }),
  };
  kiln.runMemory = (runId) => op("run.list")(runId === undefined ? {} : { run_id: runId });
  kiln.config = {
    get: () => op("config.get")({}),
    webSearch: (webSearch) => op("config.web_search")({ web_search: webSearch ?? null }),
    teamChanges: (allow) => op("config.team_changes")({ allow: Boolean(allow) }),
  };
  kiln.agents = {
    list: () => op("agents.list")({}),
    get: (slug) => op("agents.get")({ slug }),
    put: (agent) => op("agents.put")(agent),
    remove: (slug, version) => op("agents.remove")({ slug, version }),
  };
  kiln.skills = {
    list: () => op("skills.list")({}),
    get: (name) => op("skills.get")({ name }),
    put: (skill, { replacing } = {}) => op("skills.put")({ skill, replacing }),
    remove: (name, version) => op("skills.remove")({ name, version }),
  };
  kiln.schedules = {
    list: () => op("schedules.list")({}),
    put: (schedule) => op("schedules.put")(schedule),
    remove: (id, version) => op("schedules.remove")({ id, version }),
  };
  kiln.secrets = {
    list: () => op("secrets.list")({}),
    put: (secret) => op("secrets.put")(secret),
    remove: (name, version) => op("secrets.remove")({ name, version }),
  };
  kiln.exportAll = ({ includeKeys = false } = {}) => op("export")({ include_keys: includeKeys });
  kiln.importAll = (doc) => kiln.store("import", doc);
  return kiln;
}

/**
 * Gives the runtime's code nodes their handles: `codeNode(spec).run(values, options)`
 * and `.check()` (the problems that would stop it, `[]` when none),
 * `graph({nodes, edges}).run(inputs, options)` (options: a run's `tools`, `limits`,
 * `permission`, `approve`, `mcp`, `secrets`, `builtins`, `allow_net`, `agent`, `signal`;
 * a graph's also `onEvent` and `max_concurrent`). See README.md, "Code nodes in a page".
 */
function withNodes(kiln) {
  kiln.codeNode = (spec) => ({
    spec,
    run: (values = {}, options = {}) => kiln.runNode({ ...options, node: spec, values }),
    check: () => kiln.checkNode(spec),
  });
  kiln.graph = ({ nodes, edges = [] } = {}) => ({
    nodes,
    edges,
    run: (inputs = {}, options = {}) => kiln.runGraph({ ...options, nodes, edges, inputs }),
  });
  return kiln;
}

export const Kiln = {
  /**
   * Loads the runtime, opens the workspace's storage and starts its first sandbox worker.
   * @param {{poolSize?: number, workspace?: string, replyDueMs?: number}} [options] started
   *   workers kept between runs (default 2); the workspace whose memory, history and files runs
   *   use (default "default"); how long a keyed run's `run` waits before it resolves to the
   *   interim result (default and at most 25000)
   */
  async load({ poolSize = 2, workspace = "default", replyDueMs } = {}) {
    loading ??= init({ module_or_path: new URL("./kiln_page_bg.wasm", import.meta.url) });
    await loading;
    const kiln = await Runtime.load(
      new URL("./workers/runtime.js", import.meta.url).href,
      new URL("./workers/sandbox.js", import.meta.url).href,
      poolSize,
      workspace,
      replyDueMs,
    );
    return withNodes(withStorage(kiln));
  },
};

export default Kiln;
