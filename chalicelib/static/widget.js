/* Back-in-stock "Notify me" widget. Paste <div data-bisn-sku="SKU"></div> and this script on a product page, or
   <div data-bisn-product> with a JSON map of variants to follow the page's variant picker (README: "Variants").
   The server writes the shop's accent, consent line, the countries SMS may go to (each [region, calling code,
   example mobile], the shop's own first) and every language's strings (a list in the order of C.keys) into C. */
(function () {
  "use strict";
  if (window.bisn && window.bisn.mount) { return; }
  var C = /*bisn-config*/{ "accent": "#1f2937", "consent": "", "regions": [], "keys": [], "strings": { "en": [] } };
  var script = document.currentScript;
  var apiBase = (script && script.getAttribute("data-bisn-api")) ||
    (script && script.src ? script.src.replace(/\/widget\.js(\?.*)?$/, "") : "");
  // Without a stylesheet the shop styles the widget's classes itself (README "Styling").
  var unstyledScript = !!(script && script.hasAttribute("data-bisn-unstyled"));
  var counter = 0;
  var SELECTOR = "[data-bisn-sku], [data-bisn-product]";
  var PRODUCT_FORM = 'form.variations_form, form[action*="/cart/add"]';
  var POLL_MS = 300;
  var followers = [];
  var poll;
  var NAME_OK = /^[\p{L}\p{M} '’-]*$/u;
  // Mail domains shoppers mistype most; an address one or two letters away from one is offered the fix.
  var DOMAINS = ["gmail.com", "googlemail.com", "hotmail.com", "hotmail.co.uk", "hotmail.fr", "hotmail.de", "outlook.com",
    "live.com", "yahoo.com", "yahoo.co.uk", "yahoo.fr", "icloud.com", "me.com", "aol.com", "gmx.de", "gmx.net", "web.de",
    "t-online.de", "orange.fr", "free.fr", "laposte.net", "wanadoo.fr", "ziggo.nl", "kpnmail.nl", "proton.me",
    "protonmail.com", "btinternet.com", "sky.com"];
  // Every selector sits under the widget's root (& below), so no rule reaches the page and its own
  // class-qualified rules outrank a theme's bare element rules. Colours and radius come from custom properties.
  var CSS = "&{--a:var(--bisn-accent," + C.accent + ");--r:var(--bisn-radius,8px);--t:var(--bisn-text,#1a1a1a);" +
    "--b:var(--bisn-bg,#fff);font:inherit;color:var(--t);max-width:28rem;line-height:1.45}" +
    "& *{box-sizing:border-box;font:inherit;color:inherit;letter-spacing:normal;text-transform:none}" +
    "& .bisn-box{background:var(--b);border-radius:var(--r)}" +
    "& .bisn-form{margin:0}& fieldset{border:1px solid #767676;border-radius:var(--r);margin:0;padding:.5rem .9rem .9rem;min-width:0}" +
    "& legend{font-weight:600;padding:0 .3rem}& label{display:block;font-weight:600;margin:.6rem 0 .2rem}" +
    "& .bisn-channels{display:flex;flex-wrap:wrap;gap:0 1rem;border:0;padding:0;margin:0}" +
    "& .bisn-channels label{display:flex;align-items:center;gap:.5rem;min-height:44px;min-width:44px;margin:0;font-weight:400;cursor:pointer}" +
    "& input[type=radio]{width:1.25rem;height:1.25rem;margin:0;accent-color:var(--a)}" +
    "& input[type=tel],& input[type=email],& input[type=text]{display:block;width:100%;min-height:44px;padding:.5rem .7rem;" +
    "border:1px solid #767676;border-radius:var(--r);background:#fff;color:#1a1a1a}" +
    "& input[aria-invalid=true]{border-color:#b3261e;border-width:2px}" +
    "& button,& summary{display:inline-flex;align-items:center;justify-content:center;min-height:44px;min-width:44px;margin:.8rem 0 0;" +
    "padding:.55rem 1.1rem;border:2px solid var(--a);border-radius:var(--r);background:var(--a);color:#fff;font-weight:600;cursor:pointer}" +
    "& .bisn-open{width:100%;margin:0}& button[disabled]{opacity:.6;cursor:wait}" +
    "& .bisn-fix{background:transparent;color:var(--t);border-color:currentColor;margin:.3rem 0 0;font-weight:400}" +
    "& :focus-visible{outline:3px solid var(--a);outline-offset:2px;box-shadow:0 0 0 5px #fff}" +
    "& .bisn-hint,& .bisn-consent{font-size:.875em;margin:.3rem 0 0;color:var(--t)}" +
    "& .bisn-error{color:#b3261e;font-weight:600;margin:.3rem 0 0}& .bisn-error:empty{display:none}" +
    "& .bisn-status{margin:.6rem 0 0}& .bisn-status:empty{display:none}" +
    "& .bisn-done{border-left:4px solid var(--a);padding:.4rem .7rem}& [hidden]{display:none!important}";
  var styled = false;

  function style() {
    if (styled || unstyledScript) { return; }
    styled = true;
    var sheet = document.createElement("style");
    sheet.setAttribute("data-bisn-style", "");
    sheet.textContent = CSS.replace(/&/g, ".bisn:not([data-bisn-unstyled])");
    (document.head || document.documentElement).appendChild(sheet);
  }

  // The page's language, else the browser's, among those the script carries; else English.
  function language() {
    var tags = [document.documentElement.lang, navigator.language].concat(navigator.languages || []);
    for (var i = 0; i < tags.length; i++) {
      var primary = String(tags[i] || "").toLowerCase().split(/[-_]/)[0];
      if (primary && C.strings[primary]) { return primary; }
    }
    return "en";
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) { node.textContent = text; }
    return node;
  }

  // Optimal string alignment distance, cut off above 2: enough to catch a swapped, missing or extra letter.
  function distance(a, b) {
    if (Math.abs(a.length - b.length) > 2) { return 3; }
    var d = [];
    for (var i = 0; i <= a.length; i++) { d[i] = [i]; }
    for (var j = 0; j <= b.length; j++) { d[0][j] = j; }
    for (i = 1; i <= a.length; i++) {
      for (j = 1; j <= b.length; j++) {
        var cost = a[i - 1] === b[j - 1] ? 0 : 1;
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
        if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) { d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1); }
      }
    }
    return d[a.length][b.length];
  }

  // The address with its domain corrected, or "" when the domain is a known one or near none.
  function suggestion(address) {
    var at = address.lastIndexOf("@");
    if (at < 1) { return ""; }
    var domain = address.slice(at + 1).toLowerCase();
    if (!domain || DOMAINS.indexOf(domain) >= 0) { return ""; }
    var best = "", bestD = 3;
    DOMAINS.forEach(function (known) {
      var d = distance(domain, known);
      if (d < bestD) { best = known; bestD = d; }
    });
    return best ? address.slice(0, at + 1) + best : "";
  }

  function mount(root) {
    if (!root || root.nodeType !== 1 || !root.matches(SELECTOR) || root.getAttribute("data-bisn-ready")) { return false; }
    root.setAttribute("data-bisn-ready", "1");
    root.classList.add("bisn");
    style();
    var lang = language();
    var S = C.strings[lang] || C.strings.en;
    var T = function (key, fields) {
      var i = C.keys.indexOf(key);
      return String(S[i] || C.strings.en[i] || "").replace(/\{(\w+)\}/g, function (m, f) { return fields && f in fields ? fields[f] : m; });
    };
    var id = "bisn-" + (++counter);
    // The shopper's countries: those their language tags name ("de-AT"), then their language's home country, which
    // for de, fr, es and nl is spelt as the language (English names none: too many countries speak it). The
    // no-JavaScript page reads them alike (widget.py home_regions).
    var homes = ([document.documentElement.lang, navigator.language].concat(navigator.languages || []).join() + ",-" +
      (lang === "en" ? "" : lang)).toUpperCase().match(/[-_][A-Z]{2}(?![A-Z])/g) || [];
    // [region, calling code, example] of the first of them that we text. A shopper whose languages name only
    // countries we do not text is offered email first.
    var home = null;
    homes.forEach(function (h) { C.regions.forEach(function (r) { if (!home && h.slice(1) === r[0]) { home = r; } }); });
    var sku = root.hasAttribute("data-bisn-product") ? "" : root.getAttribute("data-bisn-sku");
    var box = el("div", { "class": "bisn-box", lang: lang });
    var opener = el("button", { type: "button", "class": "bisn-open", "aria-expanded": "false", "aria-controls": id + "-form" }, T("open"));
    var form = el("form", { "class": "bisn-form", id: id + "-form", method: "post", action: apiBase + "/notify-me", novalidate: "" });
    form.hidden = true;
    var fieldset = el("fieldset");
    fieldset.appendChild(el("legend", {}, T("legend")));

    var channels = el("fieldset", { "class": "bisn-channels" });
    channels.appendChild(el("legend", { "class": "bisn-hint" }, T("how")));
    [["sms", T("sms")], ["email", T("email")]].forEach(function (pair) {
      var rid = id + "-" + pair[0];
      var radio = el("input", { type: "radio", name: "channel", value: pair[0], id: rid });
      if (pair[0] === (home || !homes.length ? "sms" : "email")) { radio.checked = true; }
      var label = el("label", { "for": rid }, " " + pair[1]);
      label.insertBefore(radio, label.firstChild);
      channels.appendChild(label);
    });
    fieldset.appendChild(channels);

    var contactLabel = el("label", { "for": id + "-contact" }, T("phone"));
    var contact = el("input", { id: id + "-contact", name: "contact", type: "tel", autocomplete: "tel", required: "", maxlength: "254" });
    // Text messages go to mobile numbers only (landlines, toll-free, premium-rate and satellite numbers are refused).
    var hint = el("p", { "class": "bisn-hint", id: id + "-hint" }, T("phoneHint"));
    var contactError = el("p", { "class": "bisn-error", id: id + "-error" });
    var fix = el("button", { type: "button", "class": "bisn-fix" });
    fix.hidden = true;
    contact.setAttribute("aria-describedby", id + "-hint " + id + "-error");
    var nameLabel = el("label", { "for": id + "-name" }, T("name"));
    var name = el("input", { id: id + "-name", name: "name", type: "text", autocomplete: "given-name", maxlength: "40", "aria-describedby": id + "-name-error" });
    var nameError = el("p", { "class": "bisn-error", id: id + "-name-error" });
    var consent = el("p", { "class": "bisn-consent" }, C.consent || T("consent"));
    var button = el("button", { type: "submit" }, T("submit"));
    // The shop's optional human check for hot drops (TURNSTILE_SITE_KEY): Cloudflare's box, rendered only when on.
    var human = el("div", { "class": "bisn-human" });
    var humanId = null;
    [contactLabel, contact, hint, contactError, fix, nameLabel, name, nameError, human, button, consent].forEach(function (n) { fieldset.appendChild(n); });
    if (C.turnstile) {
      withTurnstile(function (turnstile) { humanId = turnstile.render(human, { sitekey: C.turnstile }); });
    }
    form.appendChild(fieldset);
    // The result: announced, and focused after a tap so a keyboard or screen reader user lands on it.
    var status = el("p", { "class": "bisn-status", role: "status", "aria-live": "polite", tabindex: "-1" });
    var optin = el("div", { "class": "bisn-optin" });
    optin.hidden = true;
    box.appendChild(opener);
    box.appendChild(form);
    box.appendChild(status);
    box.appendChild(optin);
    root.appendChild(box);

    function channelNow() { return form.querySelector("input[name=channel]:checked").value; }

    function fieldError(input, errorNode, message) {
      errorNode.textContent = message || "";
      if (message) { input.setAttribute("aria-invalid", "true"); } else { input.removeAttribute("aria-invalid"); }
    }

    function offerFix() {
      var better = channelNow() === "email" ? suggestion(contact.value.trim()) : "";
      fix.hidden = !better;
      fix.textContent = better ? T("mean", { address: better }) : "";
      fix.setAttribute("data-address", better);
    }

    opener.addEventListener("click", function () {
      opener.hidden = true;
      opener.setAttribute("aria-expanded", "true");
      form.hidden = false;
      form.querySelector("input[name=channel]:checked").focus();
    });

    channels.addEventListener("change", function () {
      var email = channelNow() === "email";
      contactLabel.textContent = email ? T("address") : T("phone");
      hint.hidden = email;
      contact.type = email ? "email" : "tel";
      contact.autocomplete = email ? "email" : "tel";
      fieldError(contact, contactError, "");
      offerFix();
    });
    channels.dispatchEvent(new Event("change"));
    contact.addEventListener("input", offerFix);
    fix.addEventListener("click", function () {
      contact.value = fix.getAttribute("data-address");
      fix.hidden = true;
      fieldError(contact, contactError, "");
      contact.focus();
    });

    // An example mobile of the country whose calling code the number starts with, else of the shopper's own country
    // among those we text, else of the shop's.
    function example() {
      var typed = contact.value.replace(/[^0-9+]/g, "").replace(/^00/, "+");
      return (C.regions.filter(function (r) { return !typed.indexOf("+" + r[1]); })[0] || home || C.regions[0])[2];
    }

    // What an error code from the server means to the shopper, and which field it belongs to. An invalid number's
    // reason (too_short, too_long) is the key of its own words.
    function explain(code, channel, reason) {
      var sms = channel === "sms";
      var byCode = {
        invalid_phone: [T(reason) ? reason : "phoneFix", contact], invalid_email: ["badEmail", contact], sms_number_type: ["mobileOnly", contact],
        sms_country_not_allowed: ["country", contact], contact_channel_mismatch: [sms ? "looksEmail" : "looksPhone", contact],
        missing_field: [sms ? "needPhone" : "needEmail", contact], too_many_places: ["places", contact],
        invalid_field: [NAME_OK.test(name.value) ? "failed" : "nameBad", NAME_OK.test(name.value) ? null : name],
        unknown_sku: ["gone"], discontinued: ["gone"], waiting_list_full: ["full"], busy: ["busy"],
        rate_limited: ["tooMany"], number_rate_limited: ["tooMany"], prefix_rate_limited: ["tooMany"]
      };
      return byCode[code] || ["failed"];
    }

    function refuse(code, channel, reason) {
      var why = explain(code, channel, reason);
      var message = T(why[0]) + (code === "invalid_phone" ? " " + T("eg", { example: example() }) : "");
      if (why[1]) {
        fieldError(why[1], why[1] === name ? nameError : contactError, message);
        why[1].focus();
      } else {
        status.textContent = message;
        status.focus();
      }
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var channel = channelNow();
      fieldError(contact, contactError, "");
      fieldError(name, nameError, "");
      status.textContent = "";
      if (!contact.value.trim()) { refuse("missing_field", channel); return; }
      if (!NAME_OK.test(name.value)) { refuse("invalid_field", channel); return; }
      button.disabled = true;
      status.textContent = T("sending");
      var body = { sku: sku, channel: channel, contact: contact.value, name: name.value, lang: lang };
      if (C.turnstile && window.turnstile && humanId !== null) {
        body.challenge = window.turnstile.getResponse(humanId) || "";
        // A token is good once: the next tap gets a fresh one.
        window.turnstile.reset(humanId);
      }
      post("/notify-me", body).then(function (result) {
        var answer = result.body;
        root.setAttribute("data-bisn-result", answer.status || answer.error || String(result.status));
        status.textContent = "";
        if (result.status === 202) {
          // The same answer for a new place, a repeat tap and an opted-out contact, so the words say only what is
          // true for each: "confirm" says an email went only if the address still needed confirming.
          form.hidden = true;
          status.className = "bisn-status bisn-done";
          status.textContent = channel === "email" ? T("onListEmail") + (answer.confirm_email ? " " + T("confirm") : "") : T("onList");
          status.focus();
          if (channel === "sms") { offerOptIn(body); }
        } else if ("note" in answer) {
          // A refusal with words of its own (a product sold on backorder: the shop's note that it can be ordered
          // now), shown as any refusal is; with none, no widget at all.
          box.hidden = !(status.textContent = answer.note);
        } else {
          refuse(answer.error, channel, answer.reason);
        }
      }, function () {
        status.textContent = T("offline");
        status.focus();
      }).then(function () {
        button.disabled = false;
      });
    });

    // After any accepted SMS tap (the answer is the same for everyone): a number that had texted STOP was just sent a
    // code, and only its owner knows. So every SMS tap is asked, and the code field opens only for one who has a code.
    function offerOptIn(tap) {
      optin.textContent = "";
      optin.hidden = false;
      var more = el("details");
      more.appendChild(el("summary", { "class": "bisn-fix" }, T("optin")));
      var codeForm = el("form", { "class": "bisn-code", novalidate: "" });
      var codeLabel = el("label", { "for": id + "-code" }, T("code"));
      var code = el("input", { id: id + "-code", name: "code", type: "text", inputmode: "numeric", autocomplete: "one-time-code",
        pattern: "[0-9 ]*", "aria-describedby": id + "-code-error" });
      var codeError = el("p", { "class": "bisn-error", id: id + "-code-error" });
      var send = el("button", { type: "submit" }, T("codeSend"));
      [codeLabel, code, codeError, send].forEach(function (n) { codeForm.appendChild(n); });
      more.appendChild(codeForm);
      optin.appendChild(more);
      codeForm.addEventListener("submit", function (event) {
        event.preventDefault();
        fieldError(code, codeError, "");
        var digits = code.value.replace(/\s+/g, "");
        if (!/^[0-9]{6}$/.test(digits)) { fieldError(code, codeError, T("codeNeed")); code.focus(); return; }
        send.disabled = true;
        post("/notify-me/code", { sku: tap.sku, channel: "sms", contact: tap.contact, code: digits, lang: lang }).then(function (result) {
          if (result.status === 200 && result.body.status === "resubscribed") {
            root.setAttribute("data-bisn-result", "resubscribed");
            optin.hidden = true;
            status.textContent = T("resubscribed");
            status.focus();
          } else if (result.body.error === "wrong_code") {
            fieldError(code, codeError, T("codeWrong"));
            code.focus();
          } else {
            fieldError(code, codeError, T(result.status === 429 ? "tooMany" : "failed"));
            code.focus();
          }
        }, function () {
          fieldError(code, codeError, T("offline"));
        }).then(function () { send.disabled = false; });
      });
    }

    if (root.hasAttribute("data-bisn-product")) {
      follow({
        root: root,
        form: undefined,
        key: undefined,
        found: null,
        bound: false,
        show: function (entry) {
          sku = entry && entry.sku ? String(entry.sku) : "";
          var open = !!sku && entry.available !== true;
          box.hidden = !open;
          box.style.display = open ? "" : "none";
          root.setAttribute("data-bisn-state", !sku ? "none" : open ? "sold-out" : "in-stock");
          if (sku) { root.setAttribute("data-bisn-current-sku", sku); } else { root.removeAttribute("data-bisn-current-sku"); }
          // A new SKU: the form comes back (keeping what was typed) and the last answer goes.
          form.hidden = !opener.hidden;
          status.textContent = "";
          status.className = "bisn-status";
          optin.hidden = true;
          root.removeAttribute("data-bisn-result");
        }
      });
    }
    return true;
  }

  // Cloudflare's script, loaded once for every widget on the page, and only when the human check is on.
  var turnstileWaiting = null;
  function withTurnstile(ready) {
    if (window.turnstile) { ready(window.turnstile); return; }
    if (turnstileWaiting) { turnstileWaiting.push(ready); return; }
    turnstileWaiting = [ready];
    var script = document.createElement("script");
    script.src = "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit";
    script.async = true;
    script.onload = function () {
      turnstileWaiting.forEach(function (each) { each(window.turnstile); });
      turnstileWaiting = [];
    };
    document.head.appendChild(script);
  }

  function post(path, body) {
    return fetch(apiBase + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (answer) {
        return { status: response.status, body: answer || {} };
      });
    }, function (error) {
      // A CORS refusal reaches a script only as this failure; the shop's developer reads why in the console.
      // The words avoid ": " and ", " (the build's SPACING would close them up).
      console.error("bisn widget - no answer from " + apiBase + path + " to a page on " + location.origin +
        ". If the API is up then its CORS_ORIGINS lacks " + location.origin + ".");
      throw error;
    });
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
