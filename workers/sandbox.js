// Bootstraps the sandbox worker: instantiate the wasm, whose start function
// installs the message handler and posts `ready`. No logic lives here.
import init from "../kiln_sandbox_worker.js";

init().catch((error) => {
  // The host reads this as a failed start and says so on the page.
  self.postMessage(JSON.stringify({ v: 3, msg: { type: "rejected", problem: `the sandbox wasm failed to load: ${error}` } }));
});
