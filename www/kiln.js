// Kiln's page API: run agent programs in Boa sandbox workers from any page
// that serves this folder (pkg/) from its own origin.
//
//   import { Kiln } from "./kiln/kiln.js";
//   const kiln = await Kiln.load();
//   const result = await kiln.run({ code, tools, limits });
//
// `result` is the tool-result/v1 object. See README.md, "Run programs from a page".
import init, { Kiln as Runtime } from "./kiln_page.js";

let loading;

export const Kiln = {
  /**
   * Loads the runtime and starts its first sandbox worker.
   * @param {{poolSize?: number}} [options] started workers kept between runs (default 2)
   */
  async load({ poolSize = 2 } = {}) {
    loading ??= init({ module_or_path: new URL("./kiln_page_bg.wasm", import.meta.url) });
    await loading;
    return Runtime.load(new URL("./workers/sandbox.js", import.meta.url).href, poolSize);
  },
};

export default Kiln;
