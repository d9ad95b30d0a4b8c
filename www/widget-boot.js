// The widget page's start (widget.html, in an iframe on a host page): messages from the
// host are kept from the first moment, until Kiln's wasm takes them over
// (`globalThis.kilnWidgetInbox` becomes its handler), so the host's first message is
// never lost while the wasm loads. Then the app's module starts in widget mode
// (`<body data-kiln="widget">`).
import init from "./kiln_ui.js";

globalThis.kilnWidgetInbox = [];
addEventListener("message", (event) => globalThis.kilnWidgetInbox.push(event));

const loading = document.getElementById("loading");
init().then(
  () => loading.remove(),
  (error) => {
    loading.textContent = `Kiln could not start: ${error}`;
    loading.classList.add("failed");
  },
);
