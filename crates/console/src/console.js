// Live updates for the Matryoshka console: an element with `data-live` names a stream of
// server-sent events, and each `rows` event replaces its content with markup the server
// rendered (and escaped). Without this script the pages are the same, only not live.
"use strict";
for (const el of document.querySelectorAll("[data-live]")) {
  const events = new EventSource(el.dataset.live);
  events.addEventListener("rows", (e) => {
    el.innerHTML = e.data;
  });
}
