// Bootstraps the runtime worker: instantiate the wasm, whose start function
// reads the worker's options from its name, installs the message handler and
// posts `ready`. No logic lives here.
import init from "../kiln_runtime.js";

init().catch((error) => {
  // The page reads this as a failed start and says so.
  self.postMessage(JSON.stringify({ v: 1004, msg: { type: "rejected", problem: `the runtime wasm failed to load: ${error}` } }));
});
