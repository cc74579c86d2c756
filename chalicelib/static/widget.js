/* Back-in-stock "Notify me" widget. Paste <div data-bisn-sku="SKU"></div> and this script on a product page. */
(function () {
  "use strict";
  var script = document.currentScript;
  var apiBase = (script && script.getAttribute("data-bisn-api")) ||
    (script && script.src ? script.src.replace(/\/widget\.js(\?.*)?$/, "") : "");
  var counter = 0;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) { node.textContent = text; }
    return node;
  }

  function ordinalPlace(n) {
    return "You are number " + n + " in line.";
  }

  function mount(root) {
    if (root.getAttribute("data-bisn-ready")) { return; }
    root.setAttribute("data-bisn-ready", "1");
    var id = "bisn-" + (++counter);
    var sku = root.getAttribute("data-bisn-sku");
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
    var nameLabel = el("label", { "for": id + "-name" }, "Your name (optional)");
    var name = el("input", { id: id + "-name", name: "name", type: "text", autocomplete: "given-name", maxlength: "40" });
    var button = el("button", { type: "submit" }, "Notify me");
    var status = el("p", { "class": "bisn-status", role: "status", "aria-live": "polite" });
    [contactLabel, contact, nameLabel, name, button].forEach(function (n) { fieldset.appendChild(n); });
    form.appendChild(fieldset);
    form.appendChild(status);
    root.appendChild(form);

    channels.addEventListener("change", function () {
      var email = form.querySelector("input[name=channel]:checked").value === "email";
      contactLabel.textContent = email ? "Email address" : "Mobile number";
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
        if (result.status === 201 || result.status === 200) {
          status.textContent = (result.status === 201 ? "You are on the list. " : "You were already on the list; your place is kept. ") +
            ordinalPlace(body.position) + " We will tell you when it is back.";
          if (body.manage_url) {
            var link = el("a", { href: body.manage_url }, "See or change your requests");
            status.appendChild(document.createTextNode(" "));
            status.appendChild(link);
          }
        } else if (result.status === 202) {
          status.textContent = "Thank you. We have noted your request.";
        } else {
          status.textContent = body.message || "Sorry, something went wrong. Please try again.";
        }
      }).catch(function () {
        status.textContent = "Sorry, we could not reach the shop. Please try again.";
      }).then(function () {
        button.disabled = false;
      });
    });
  }

  function mountAll() {
    var roots = document.querySelectorAll("[data-bisn-sku]");
    for (var i = 0; i < roots.length; i++) { mount(roots[i]); }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mountAll);
  } else {
    mountAll();
  }
})();
