// The Matryoshka console's one script; every page is complete without it.
//
// Live updates: an element with `data-live` names a stream of server-sent events, and each
// event named by its `data-event` (default `rows`) replaces the element's content with markup
// the server rendered (and escaped).
//
// Copying: a button with `data-copy` (hidden without the script) copies the file at that URL
// (a kubeconfig) to the clipboard.
"use strict";

function reveal(root) {
  for (const b of root.querySelectorAll("button[data-copy]")) {
    b.hidden = false;
  }
}

document.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-copy]");
  if (!button) {
    return;
  }
  const label = button.textContent;
  try {
    const r = await fetch(button.dataset.copy, { credentials: "same-origin" });
    if (!r.ok) {
      throw new Error(r.statusText);
    }
    await navigator.clipboard.writeText(await r.text());
    button.textContent = "Copied";
  } catch (err) {
    button.textContent = "Could not copy: " + err.message;
  }
  setTimeout(() => { button.textContent = label; }, 3000);
});

reveal(document);
for (const el of document.querySelectorAll("[data-live]")) {
  const events = new EventSource(el.dataset.live);
  events.addEventListener(el.dataset.event || "rows", (e) => {
    el.innerHTML = e.data;
    el.dataset.updated = String(Date.now());
    reveal(el);
  });
}
