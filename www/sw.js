// Kiln's service worker: the app offline, and from this browser's cache on
// later loads. `cargo xtask build` writes the build's id and its files into
// BUILD and FILES (so a new build is a new worker, which the browser sees);
// the shell is cached under that id. A new worker waits until the page asks
// it to take over ("a new version is ready — reload"), so a page never runs
// on two builds at once. Everything else (the model's files, which the model
// worker keeps itself; local-provider.json) goes to the network as usual.
// Plain static hosting is enough: no header is needed.
const BUILD = "__KILN_BUILD__";
const FILES = ["__KILN_FILES__"];
const SHELL = `kiln-shell-${BUILD}`;

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(SHELL).then((cache) => cache.addAll(FILES.map((file) => new Request(file, { cache: "no-cache" })))),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((key) => key.startsWith("kiln-shell-") && key !== SHELL).map((key) => caches.delete(key))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("message", (event) => {
  if (event.data === "kiln:take-over") self.skipWaiting();
  if (event.data === "kiln:build") event.source?.postMessage({ build: BUILD });
});

/** The path of `url` inside this worker's scope ("" for the scope itself), or null outside it. */
function inScope(url) {
  const scope = new URL(self.registration.scope);
  if (url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return null;
  return url.pathname.slice(scope.pathname.length);
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const path = inScope(new URL(request.url));
  if (path === null) return;
  const file = path === "" ? "index.html" : path;
  if (!FILES.includes(file)) return;
  event.respondWith(
    caches.open(SHELL).then(async (cache) => (await cache.match(file, { ignoreSearch: true })) ?? fetch(request)),
  );
});
