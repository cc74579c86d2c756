/* Queue view: a product's waiting list, its states, and the restock counters, polled live. */
(function () {
  "use strict";
  var C = window.Console;
  var select = document.getElementById("queue-sku");
  var tbody = document.querySelector("#queue-table tbody");
  var summary = document.getElementById("queue-summary");
  var restockBox = document.getElementById("restock");
  var auditLink = document.getElementById("audit-link");
  var outboxLink = document.getElementById("outbox-link");
  var lastSummary = "";

  function counter(label, value, id) {
    return C.el("div", { "class": "counter" }, [
      C.el("dt", { text: label }), C.el("dd", { id: id, text: String(value) })
    ]);
  }

  function check(ok, text) {
    return C.el("li", { "class": ok ? "ok" : "bad" }, [C.el("span", { "aria-hidden": "true", text: ok ? "✓ " : "✗ " }), text]);
  }

  function renderRestock(r) {
    C.clear(restockBox);
    if (!r) { restockBox.appendChild(C.el("p", { "class": "empty", text: "No restock yet. Send one from Controls." })); return; }
    var held = r.offers.held, sold = r.offers.converted, live = r.offers.offered;
    restockBox.appendChild(C.el("p", { "class": "restock-id" }, [
      C.el("code", { text: r.restock_id }), " · ", C.el("span", { "class": "state state-" + r.state, text: r.state + (r.open ? " (open)" : "") })
    ]));
    restockBox.appendChild(C.el("dl", { "class": "counters" }, [
      counter("units_total", r.units_total, "units-total"),
      counter("units_available", r.units_available, "units-available"),
      counter("units_offerable", r.units_offerable, "units-offerable"),
      counter("live offers", live, "offers-live"),
      counter("holding", held, "offers-held"),
      counter("sold", sold, "offers-sold"),
      counter("lapsed", r.offers.lapsed, "offers-lapsed"),
      counter("hold expired", r.offers.expired, "offers-expired")
    ]));
    var balanced = r.checks.held_plus_sold_is_total_minus_available && r.checks.live_offers_is_available_minus_offerable;
    var checks = C.el("ul", { "class": "checks", id: "counter-checks", "data-balanced": balanced ? "yes" : "no" }, [
      check(r.checks.held_plus_sold_is_total_minus_available,
        "holding " + held + " + sold " + sold + " = units_total " + r.units_total + " − units_available " + r.units_available),
      check(r.checks.live_offers_is_available_minus_offerable,
        "live offers " + live + " = units_available " + r.units_available + " − units_offerable " + r.units_offerable),
      check(r.checks.never_oversold, "never oversold (holds + sales ≤ units)"),
      check(r.checks.never_over_promised, "never over-promised (live offers ≤ units available)")
    ]);
    restockBox.appendChild(checks);
  }

  function offerText(offer) {
    if (!offer) { return "—"; }
    var until = offer.state === "held" ? offer.hold_expires_at : offer.state === "offered" ? offer.offer_expires_at : null;
    return offer.state + (until ? " until " + C.time(until) : "");
  }

  function renderEntries(data) {
    C.clear(tbody);
    data.entries.forEach(function (e) {
      tbody.appendChild(C.el("tr", { "data-state": e.state, "data-status": e.status }, [
        C.el("td", { text: e.position === null ? "—" : String(e.position) }),
        C.el("td", {}, [C.el("code", { text: e.contact })]),
        C.el("td", { text: e.channel === "sms" ? "SMS" : "Email" }),
        C.el("td", {}, [C.el("span", { "class": "state state-" + e.status.replace(/\s+/g, "-"), text: e.status })]),
        C.el("td", { text: offerText(e.offer) }),
        C.el("td", { text: C.stamp(e.joined_ts) })
      ]));
    });
    if (!data.entries.length) {
      tbody.appendChild(C.el("tr", {}, [C.el("td", { colspan: "6", "class": "empty", text: "Nobody has asked yet. Tap Notify me on the storefront." })]));
    }
    var text = data.waiting + " in line for " + (data.name || data.sku) + "; " + data.entries.length + " request(s) in all.";
    if (text !== lastSummary) { summary.textContent = text; lastSummary = text; }
  }

  function load() {
    var sku = select.value;
    if (!sku) { summary.textContent = "The catalogue is empty."; return null; }
    auditLink.href = "/audit?sku=" + encodeURIComponent(sku);
    outboxLink.href = "/outbox?sku=" + encodeURIComponent(sku);
    return C.api("GET", "/api/queue/" + encodeURIComponent(sku)).then(function (result) {
      if (!result.ok) { summary.textContent = result.data.message || "Could not read the queue."; return; }
      renderRestock(result.data.restock);
      renderEntries(result.data);
    });
  }

  select.addEventListener("change", function () {
    history.replaceState(null, "", "/queue?sku=" + encodeURIComponent(select.value));
    lastSummary = "";
    load();
  });
  C.poll(load, 2000);
})();
