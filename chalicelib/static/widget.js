/* Back-in-stock "Notify me" widget. Paste <div data-bisn-sku="SKU"></div> and this script on a product page, or
   <div data-bisn-product> with a JSON map of variants to follow the page's variant picker (README: "Variants"). */
(function () {
  "use strict";
  if (window.bisn && window.bisn.mount) { return; }
  var script = document.currentScript;
  var apiBase = (script && script.getAttribute("data-bisn-api")) ||
    (script && script.src ? script.src.replace(/\/widget\.js(\?.*)?$/, "") : "");
  var counter = 0;
  var SELECTOR = "[data-bisn-sku], [data-bisn-product]";
  var PRODUCT_FORM = 'form.variations_form, form[action*="/cart/add"]';
  var POLL_MS = 300;
  var followers = [];
  var poll = null;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) { node.textContent = text; }
    return node;
  }

  function mount(root) {
    if (!root || root.nodeType !== 1 || !root.matches(SELECTOR) || root.getAttribute("data-bisn-ready")) { return false; }
    root.setAttribute("data-bisn-ready", "1");
    var id = "bisn-" + (++counter);
    var sku = root.hasAttribute("data-bisn-product") ? "" : root.getAttribute("data-bisn-sku");
    var form = el("form", { "class": "bisn-form", novalidate: "" });
    var fieldset = el("fieldset");
    fieldset.appendChild(el("legend", {}, "Tell me when it is back in stock"));

    var channels = el("div", { "class": "bisn-channels", role: "radiogroup", "aria-label": "How should we tell you?" });
    [["sms", "Text message"], ["email", "Email"]].forEach(function (pair, i) {
      var rid = id + "-" + pair[0];
      var radio = el("input", { type: "radio", name: "channel", value: pair[0], id: rid });
      if (i === 0) { radio.checked = true; }
      var label = el("label", { "for": rid }, " " + pair[1]);
      label.insertBefore(radio, label.firstChild);
      channels.appendChild(label);
    });
    fieldset.appendChild(channels);

    var contactLabel = el("label", { "for": id + "-contact" }, "Mobile number");
    var contact = el("input", { id: id + "-contact", name: "contact", type: "tel", autocomplete: "tel", required: "", maxlength: "254" });
    // Text messages go to mobile numbers only (landlines, toll-free, premium-rate and satellite numbers are refused).
    var hintText = "A mobile number: we cannot text landlines, toll-free or premium-rate numbers.";
    var hint = el("p", { "class": "bisn-hint", id: id + "-hint" }, hintText);
    contact.setAttribute("aria-describedby", id + "-hint");
    var nameLabel = el("label", { "for": id + "-name" }, "Your name (optional)");
    var name = el("input", { id: id + "-name", name: "name", type: "text", autocomplete: "given-name", maxlength: "40" });
    var button = el("button", { type: "submit" }, "Notify me");
    var status = el("p", { "class": "bisn-status", role: "status", "aria-live": "polite" });
    [contactLabel, contact, hint, nameLabel, name, button].forEach(function (n) { fieldset.appendChild(n); });
    form.appendChild(fieldset);
    form.appendChild(status);
    root.appendChild(form);

    channels.addEventListener("change", function () {
      var email = form.querySelector("input[name=channel]:checked").value === "email";
      contactLabel.textContent = email ? "Email address" : "Mobile number";
      hint.hidden = email;
      contact.type = email ? "email" : "tel";
      contact.autocomplete = email ? "email" : "tel";
    });

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var channel = form.querySelector("input[name=channel]:checked").value;
      if (!contact.value.trim()) {
        status.textContent = channel === "email" ? "Please enter your email address." : "Please enter your mobile number.";
        contact.focus();
        return;
      }
      button.disabled = true;
      status.textContent = "Adding you to the list…";
      fetch(apiBase + "/notify-me", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ sku: sku, channel: channel, contact: contact.value, name: name.value })
      }).then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (body) {
          return { status: response.status, body: body };
        });
      }).then(function (result) {
        var body = result.body || {};
        root.setAttribute("data-bisn-result", body.status || body.error || String(result.status));
        status.textContent = "";
        if (result.status === 202) {
          // The same answer for a new place, a repeat tap and an opted-out contact: say what happens next.
          status.textContent = body.confirm_email
            ? "Check your inbox to confirm — we'll email you when it's back."
            : "You're on the list — we'll text you when it's back.";
        } else {
          status.textContent = body.message || "Sorry, something went wrong. Please try again.";
        }
      }).catch(function () {
        status.textContent = "Sorry, we could not reach the shop. Please try again.";
      }).then(function () {
        button.disabled = false;
      });
    });

    if (root.hasAttribute("data-bisn-product")) {
      follow({
        root: root,
        form: undefined,
        key: undefined,
        found: null,
        bound: false,
        show: function (entry) {
          sku = entry && entry.sku ? String(entry.sku) : "";
          var open = Boolean(sku) && entry.available !== true;
          form.hidden = !open;
          form.style.display = open ? "" : "none";
          root.setAttribute("data-bisn-state", !sku ? "none" : open ? "sold-out" : "in-stock");
          if (sku) { root.setAttribute("data-bisn-current-sku", sku); } else { root.removeAttribute("data-bisn-current-sku"); }
          status.textContent = "";
          root.removeAttribute("data-bisn-result");
        }
      });
    }
    return true;
  }

  /* Variants. A widget with data-bisn-product follows a product form: the one its data-bisn-form selector names, or
     else the first found in the smallest element around the widget that holds one. That is a Shopify form posting to
     /cart/add, whose [name=id] field holds the chosen variant id, or WooCommerce's form.variations_form, whose
     [name=variation_id] field does; with no such form, the URL's ?variant= parameter. The id is looked up in the
     widget's own JSON map (a script element of type application/json with a data-bisn-variants attribute:
     {"<id>": {"sku": "...", "available": false}}), then in what WooCommerce said about it (found_variation, or the
     form's data-product_variations). */

  function follow(widget) {
    followers.push(widget);
    check(widget);
    if (!poll) { poll = window.setInterval(checkAll, POLL_MS); }
  }

  // Themes change the chosen variant in ways no single event reports (history.replaceState, a hidden input's value
  // set from script), so a few times a second each widget reads the chosen id and compares it with the last one, rather
  // than patching the page's history methods; a change event or a back/forward navigation checks at once.
  function checkAll() {
    followers = followers.filter(function (w) { return w.root.isConnected; });
    followers.forEach(check);
    if (!followers.length && poll) { window.clearInterval(poll); poll = null; }
  }

  function productForm(w) {
    if (w.form === undefined || (w.form && !w.form.isConnected)) {
      var named = w.root.getAttribute("data-bisn-form");
      var found = null;
      if (named) {
        try { found = document.querySelector(named); } catch (e) { found = null; }
      } else {
        for (var node = w.root; node && !found; node = node.parentElement) { found = node.querySelector(PRODUCT_FORM); }
      }
      w.form = found;
      w.bound = false;
    }
    return w.form;
  }

  function check(w) {
    var form = productForm(w);
    var woo = form && form.classList.contains("variations_form");
    if (woo && !w.bound && window.jQuery) { listenToWooCommerce(w, form); }
    var field = form && (form.elements.namedItem("id") || form.elements.namedItem("variation_id"));
    choose(w, field ? field.value : new URLSearchParams(window.location.search).get("variant"));
  }

  function choose(w, variantId) {
    var id = variantId ? String(variantId) : "";
    if (id === w.key) { return; }
    w.key = id;
    w.show(id ? lookup(w, id) : null);
  }

  // WooCommerce announces variations with jQuery's own events, which addEventListener does not receive.
  function listenToWooCommerce(w, form) {
    w.bound = true;
    window.jQuery(form).on("found_variation", function (event, variation) {
      if (!variation) { return; }
      w.found = { id: String(variation.variation_id), sku: variation.sku, available: variation.is_in_stock === true };
      choose(w, w.found.id);
    }).on("reset_data hide_variation", function () {
      choose(w, "");
    });
  }

  function lookup(w, id) {
    var map = parseJson(w.root.querySelector("script[data-bisn-variants]"));
    var entry = map && Object.prototype.hasOwnProperty.call(map, id) ? map[id] : null;
    if (entry && typeof entry === "object") { return entry; }
    if (w.found && w.found.id === id) { return w.found; }
    var variations = w.form ? parseJson(w.form.getAttribute("data-product_variations")) : null;
    for (var i = 0; Array.isArray(variations) && i < variations.length; i++) {
      if (String(variations[i].variation_id) === id) {
        return { sku: variations[i].sku, available: variations[i].is_in_stock === true };
      }
    }
    return null;
  }

  function parseJson(source) {
    var text = source && typeof source === "object" ? source.textContent : source;
    try { return text ? JSON.parse(text) : null; } catch (e) { return null; }
  }

  function mountWithin(node) {
    if (node.nodeType !== 1) { return; }
    mount(node);
    var roots = node.querySelectorAll(SELECTOR);
    for (var i = 0; i < roots.length; i++) { mount(roots[i]); }
  }

  // Started once the page is parsed, so a widget is never mounted before its JSON map is there.
  function start() {
    mountWithin(document.documentElement);
    document.addEventListener("change", checkAll);
    window.addEventListener("popstate", checkAll);
    new MutationObserver(function (records) {
      followers.forEach(function (w) { if (w.form === null) { w.form = undefined; } });
      records.forEach(function (record) { Array.prototype.forEach.call(record.addedNodes, mountWithin); });
    }).observe(document.documentElement, { childList: true, subtree: true });
  }

  window.bisn = { mount: mount };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
