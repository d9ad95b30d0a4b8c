// Bootstraps the model worker: instantiate the wasm, whose start function
// installs the message handler and posts `ready`. No logic lives here.
import init from "../kiln_model_worker.js";

init().catch((error) => {
  // The runtime worker reads this as a failed start and says so in the chat.
  self.postMessage(JSON.stringify({ v: 2001, msg: { type: "rejected", problem: `the model wasm failed to load: ${error}` } }));
});
