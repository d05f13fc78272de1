// iterion's admin page: live rows from server-sent events, and keyboard
// shortcuts. The page works without it: every action is a form.
"use strict";
(function () {
  const body = document.body;

  // Live updates: the server renders every fragment; this only swaps
  // them in by id.
  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }
  // count moves the number of open questions the list's caption shows.
  function count(by) {
    const total = document.getElementById("total");
    if (total && by) total.textContent = String(Math.max(0, Number(total.textContent) + by));
  }
  // swap puts a row rendered by the server in place of the one with its
  // id, or on top of the list (its first page) when it is new; it
  // returns how the open rows changed (+1, -1, 0).
  function swap(id, html, insertInto) {
    const next = fragment(html);
    const old = document.getElementById(id);
    if (old) {
      // A row still open that has the focus (moved to by j/k, or an answer
      // being written) stays as it is: replacing it would lose the focus
      // and what was picked.
      const focused = old.contains(document.activeElement);
      if (focused && old.hasAttribute("data-open") && next.hasAttribute("data-open")) return 0;
      const change = (next.hasAttribute("data-open") ? 1 : 0) - (old.hasAttribute("data-open") ? 1 : 0);
      old.replaceWith(next);
      return change;
    }
    if (insertInto && body.hasAttribute("data-first-page")) {
      insertInto.prepend(next);
      return next.hasAttribute("data-open") ? 1 : 0;
    }
    return 0;
  }
  const live = body.dataset.live;
  if (live && window.EventSource) {
    let lostOnce = false;
    const es = new EventSource(live);
    es.addEventListener("hello", function () {
      if (lostOnce) location.reload(); // what changed while we were away
      body.setAttribute("data-connected", "");
    });
    es.addEventListener("error", function () { lostOnce = true; });
    es.addEventListener("resync", function () { location.reload(); });
    es.addEventListener("row", function (e) {
      const d = JSON.parse(e.data);
      const rows = document.querySelector("table.questions tbody");
      count(swap("q-" + d.id, d.html, d.open ? rows : null));
    });
    es.addEventListener("runrow", function (e) {
      const d = JSON.parse(e.data);
      swap("run-" + d.id, d.html, document.querySelector("table.runs tbody"));
    });
    es.addEventListener("runhead", function (e) {
      const d = JSON.parse(e.data);
      const head = document.getElementById("run-head");
      if (head && !head.contains(document.activeElement)) head.replaceWith(fragment(d.html));
    });
    es.addEventListener("timeline", function (e) {
      const d = JSON.parse(e.data);
      const list = document.getElementById("timeline");
      if (list) list.append(fragment(d.html));
    });
  }

  // Keyboard: j/k move between rows, 1-9 pick an option, Ctrl+Enter
  // sends, ? shows the help. Never while typing in a field, but for
  // Ctrl+Enter, which sends the field's form.
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function rows() { return Array.from(document.querySelectorAll("[data-row]")); }
  function current() {
    const a = document.activeElement;
    return a ? a.closest("[data-row]") : null;
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      const form = (document.activeElement && document.activeElement.closest("form.answer")) ||
        (current() && current().querySelector("form.answer"));
      if (form) { e.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    const help = document.getElementById("help");
    if (e.key === "?") {
      e.preventDefault();
      if (help.open) help.close(); else help.showModal();
      return;
    }
    if (e.key === "j" || e.key === "k") {
      const all = rows();
      if (all.length === 0) return;
      let i = all.indexOf(current());
      i = i < 0 ? 0 : Math.min(all.length - 1, Math.max(0, i + (e.key === "j" ? 1 : -1)));
      all[i].tabIndex = -1;
      all[i].focus();
      e.preventDefault();
      return;
    }
    if (/^[1-9]$/.test(e.key)) {
      const row = current();
      const radio = row && row.querySelector('input[type="radio"][data-key="' + e.key + '"]');
      if (radio) { radio.checked = true; e.preventDefault(); }
    }
  });
})();
