/* Outbox: SMS as bubbles, emails rendered in a sandboxed frame, staff alerts; newest first, filterable. */
(function () {
  "use strict";
  var C = window.Console;
  var list = document.getElementById("messages");
  var summary = document.getElementById("outbox-summary");
  var skuFilter = document.getElementById("filter-sku");
  var contactFilter = document.getElementById("filter-contact");
  var messages = [];
  var products = {};
  var rendered = "";
  var OFFER_LABELS = { offered: "offer live", held: "unit held", converted: "bought", lapsed: "offer lapsed", expired: "hold expired" };
  var LINK_LABELS = { confirm: "Confirm my email", reserve: "Reserve one", manage: "See my place", unsubscribe: "Unsubscribe" };

  var params = new URLSearchParams(window.location.search);
  if (params.get("contact")) { contactFilter.value = params.get("contact"); }
  // The product asked for in the address filters from the first render: its option is added now, not when the
  // product list answers, which may be after the first outbox poll (a select cannot hold a value it has no option for).
  if (params.get("sku")) {
    skuFilter.appendChild(C.el("option", { value: params.get("sku"), text: params.get("sku") }));
    skuFilter.value = params.get("sku");
  }

  function normal(text) { return String(text || "").toLowerCase().replace(/[\s()-]/g, ""); }

  function matches(message) {
    if (skuFilter.value && message.sku !== skuFilter.value) { return false; }
    var wanted = normal(contactFilter.value);
    if (wanted) {
      var to = normal(message.to);
      // "07400…" and "+447400…" should both find a UK number.
      if (to.indexOf(wanted) < 0 && to.indexOf(wanted.replace(/^0/, "")) < 0) { return false; }
    }
    return true;
  }

  function meta(message, label) {
    var parts = [C.el("span", { "class": "chip chip-" + message.channel, text: label })];
    if (message.kind === "confirmation") { parts.push(" ", C.el("span", { "class": "chip chip-confirmation", text: "Confirmation" })); }
    parts.push(" to ",
      C.el("strong", { text: message.to }), " · ",
      C.el("time", { datetime: new Date(message.sent_at * 1000).toISOString(), text: C.time(message.sent_at) }));
    if (message.sku) {
      var name = products[message.sku] ? products[message.sku] + " " : "";
      parts.push(" · ", C.el("a", { href: document.body.getAttribute("data-dashboard") + "#waiting/" + encodeURIComponent(message.sku), text: name + "(" + message.sku + ")" }));
    }
    if (message.reservation) {
      var state = message.reservation.state;
      parts.push(" · ", C.el("span", { "class": "state state-" + state, text: OFFER_LABELS[state] || state }));
    }
    return C.el("p", { "class": "msg-meta" }, parts);
  }

  function linkButtons(message) {
    var links = message.links || {};
    var names = Object.keys(LINK_LABELS).filter(function (n) { return links[n]; });
    if (!names.length) { return null; }
    return C.el("p", { "class": "link-row" }, names.map(function (n) {
      return C.el("a", { "class": "button-link", href: links[n], "data-link": n, text: LINK_LABELS[n] });
    }));
  }

  function markLinks(node, message) {
    var links = message.links || {};
    node.querySelectorAll("a").forEach(function (a) {
      Object.keys(links).forEach(function (name) {
        if (a.getAttribute("href") === links[name]) { a.setAttribute("data-link", name); }
      });
    });
    return node;
  }

  function sms(message) {
    var bubble = C.el("p", { "class": "bubble" });
    bubble.appendChild(C.linkify(message.body || ""));
    markLinks(bubble, message);
    return [meta(message, "SMS"), C.el("div", { "class": "phone" }, [bubble])];
  }

  function emailMessage(message) {
    var nodes = [meta(message, "Email"), C.el("h2", { "class": "subject", text: message.subject || "(no subject)" })];
    if (message.from) { nodes.push(C.el("p", { "class": "from", text: "From " + message.from })); }
    nodes.push(linkButtons(message));
    if (message.html) {
      var frame = C.el("iframe", {
        title: "Email: " + (message.subject || ""),
        // No scripts, no same-origin: the email is shown, never run. A tapped link opens in this tab.
        sandbox: "allow-popups allow-popups-to-escape-sandbox allow-top-navigation-by-user-activation",
        referrerpolicy: "no-referrer",
        "class": "email-frame"
      });
      frame.srcdoc = '<base target="_top">' + message.html;
      nodes.push(frame);
    }
    var details = C.el("details", {}, [C.el("summary", { text: message.html ? "Text part and headers" : "Text and headers" })]);
    details.appendChild(C.el("pre", { "class": "text-part", text: message.body || "" }));
    var headers = message.headers || {};
    Object.keys(headers).forEach(function (name) {
      details.appendChild(C.el("p", { "class": "header-line" }, [C.el("code", { text: name + ": " + headers[name] })]));
    });
    nodes.push(details);
    return nodes;
  }

  function alertMessage(message) {
    return [meta(message, "Staff alert"), C.el("h2", { "class": "subject", text: message.subject || "Alert" }),
      C.el("p", { "class": "alert-body", text: message.body || "" })];
  }

  function render() {
    var shown = messages.filter(matches).slice().reverse();
    var key = JSON.stringify([skuFilter.value, contactFilter.value, shown.map(function (m) {
      return [m.id, m.reservation && m.reservation.state];
    })]);
    if (key === rendered) { return; }
    rendered = key;
    C.clear(list);
    shown.forEach(function (message) {
      var body = message.channel === "sms" ? sms(message) : message.channel === "email" ? emailMessage(message) : alertMessage(message);
      list.appendChild(C.el("li", { "class": "msg msg-" + message.channel, "data-channel": message.channel,
        "data-kind": message.kind || "", "data-sku": message.sku || "" }, body));
    });
    summary.textContent = messages.length === 0 ? "No messages yet. Restock a product that shoppers wait for." :
      shown.length + " of " + messages.length + " message(s) shown.";
  }

  function skuLabel(sku) { return products[sku] ? products[sku] + " (" + sku + ")" : sku; }

  function addSkuOptions() {
    var present = {};
    Array.prototype.forEach.call(skuFilter.options, function (o) {
      present[o.value] = true;
      // An option added before its product's name was known is named once it is.
      if (o.value) { o.textContent = skuLabel(o.value); }
    });
    var skus = Object.keys(products);
    messages.forEach(function (m) { if (m.sku && skus.indexOf(m.sku) < 0) { skus.push(m.sku); } });
    skus.sort().forEach(function (sku) {
      if (!present[sku]) { skuFilter.appendChild(C.el("option", { value: sku, text: skuLabel(sku) })); }
    });
  }

  function load() {
    return C.api("GET", "/api/outbox").then(function (result) {
      if (!result.ok) { summary.textContent = result.data.message || "Could not read the outbox."; return; }
      messages = result.data.messages || [];
      addSkuOptions();
      render();
    });
  }

  C.api("GET", "/api/products").then(function (result) {
    (result.data.products || []).forEach(function (p) { products[p.sku] = p.name; });
    addSkuOptions();
    render();
  });
  skuFilter.addEventListener("change", render);
  contactFilter.addEventListener("input", render);
  C.poll(load, 2000);
})();
