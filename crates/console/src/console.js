// Live updates for the Matryoshka console: an element with `data-live` names a stream of
// server-sent events, and each event named by its `data-event` (default `rows`) replaces the
// element's content with markup the server rendered (and escaped). Without this script the
// pages are the same, only not live.
"use strict";
for (const el of document.querySelectorAll("[data-live]")) {
  const events = new EventSource(el.dataset.live);
  events.addEventListener(el.dataset.event || "rows", (e) => {
    el.innerHTML = e.data;
    el.dataset.updated = String(Date.now());
  });
}
