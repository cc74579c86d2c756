/* Audit timeline: a product's recorded facts in time order, polled live. */
(function () {
  "use strict";
  var C = window.Console;
  var select = document.getElementById("audit-sku");
  var list = document.getElementById("timeline");
  var summary = document.getElementById("audit-summary");
  var rendered = "";
  var HIDDEN = { sku: true, ts: true, kind: true, at: true };

  function sentence(kind) {
    var words = String(kind || "").replace(/_/g, " ");
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  function facts(event) {
    return Object.keys(event).filter(function (k) { return !HIDDEN[k]; }).sort().map(function (k) {
      var value = event[k];
      var text = typeof value === "object" ? JSON.stringify(value) : String(value);
      if (/_at$/.test(k) && typeof value === "number") { text = C.dateTime(value); }
      if (k === "contact_key" && text.length > 12) { text = text.slice(0, 12) + "…"; }
      return C.el("span", { "class": "fact" }, [C.el("span", { "class": "fact-key", text: k + " " }), C.el("code", { text: text })]);
    });
  }

  function load() {
    var sku = select.value;
    if (!sku) { summary.textContent = "The catalogue is empty."; return null; }
    return C.api("GET", "/api/audit/" + encodeURIComponent(sku)).then(function (result) {
      if (!result.ok) { summary.textContent = result.data.message || "Could not read the audit."; return; }
      var events = result.data.events || [];
      var key = sku + ":" + events.map(function (e) { return e.ts; }).join(",");
      if (key === rendered) { return; }
      rendered = key;
      C.clear(list);
      events.forEach(function (event) {
        list.appendChild(C.el("li", { "class": "event kind-" + event.kind, "data-kind": event.kind }, [
          C.el("time", { datetime: new Date(event.at * 1000).toISOString(), text: C.dateTime(event.at) }),
          C.el("strong", { "class": "kind", text: sentence(event.kind) }),
          C.el("span", { "class": "facts" }, facts(event))
        ]));
      });
      summary.textContent = events.length ? events.length + " fact(s) about " + sku + "." : "Nothing recorded about " + sku + " yet.";
    });
  }

  select.addEventListener("change", function () {
    history.replaceState(null, "", "/audit?sku=" + encodeURIComponent(select.value));
    rendered = "";
    load();
  });
  C.poll(load, 3000);
})();
