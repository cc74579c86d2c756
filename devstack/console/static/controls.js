/* Controls: restock, run the notifier and sweep, advance the clock, edit product settings. */
(function () {
  "use strict";
  var C = window.Console;
  var CAPABILITIES = {
    notify_me: "Notify me (POST /notify-me)",
    inventory_webhook: "Restock detection (POST /webhooks/inventory)",
    notifier: "Notifier (SQS jobs → SMS and email)",
    reserve: "Reserve links (GET page, POST /reserve/{token} holds)",
    orders_webhook: "Orders (POST /webhooks/orders)",
    sweep: "Sweep (lapses, expiries, top-ups, stale places, owed jobs)",
    unsubscribe: "Unsubscribe links"
  };

  // tone: true (it happened), false (refused), or "neutral" (answered, but nothing to celebrate: say why).
  function say(id, text, tone) {
    var node = document.getElementById(id);
    node.textContent = text;
    node.className = "result " + (tone === "neutral" ? "neutral" : tone ? "ok" : "bad");
  }

  function apiAnswer(data) {
    var body = data.api ? data.api.body : null;
    var detail = body && typeof body === "object" ? (body.status || body.error || "") + (body.reason ? " (" + body.reason + ")" : "") +
      (body.message ? ": " + body.message : "") : String(body || "");
    return "API answered " + data.api.status + (detail ? " — " + detail : "");
  }

  function refreshJobs() {
    return C.api("GET", "/api/status").then(function (result) {
      if (!result.ok) { return; }
      var jobs = result.data.jobs;
      document.getElementById("jobs-pending").textContent = jobs.pending;
      document.getElementById("jobs-in-flight").textContent = jobs.in_flight;
      document.getElementById("jobs-dead").textContent = jobs.dead_lettered;
      var caps = result.data.capabilities;
      var list = document.getElementById("capabilities");
      C.clear(list);
      Object.keys(CAPABILITIES).forEach(function (name) {
        list.appendChild(C.el("li", { "class": caps[name] ? "ok" : "missing" }, [
          C.el("span", { "aria-hidden": "true", text: caps[name] ? "✓ " : "… " }),
          CAPABILITIES[name] + (caps[name] ? "" : " — missing from the app")
        ]));
      });
      document.querySelectorAll("[data-needs]").forEach(function (button) {
        var have = caps[button.getAttribute("data-needs")];
        button.setAttribute("aria-disabled", have ? "false" : "true");
        button.title = have ? "" : "Missing: the app does not have this entry point.";
      });
    });
  }

  function describeRun(what, data) {
    if (data.available === false) { return what + ": not available. " + (data.message || ""); }
    var text = what + ": processed " + data.processed;
    if (data.failed) { text += ", " + data.failed + " failed (left on the queue for a retry)"; }
    return text + ".";
  }

  document.getElementById("restock-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var sku = document.getElementById("restock-sku").value;
    var available = parseInt(document.getElementById("restock-available").value, 10);
    say("restock-result", "Sending…", true);
    C.api("POST", "/api/restock", { sku: sku, available: available }).then(function (result) {
      if (!result.ok) { say("restock-result", result.data.message || "Failed.", false); return; }
      var meaning = result.data.meaning;
      var text = "Sent " + sku + " at " + available + " unit(s). " + apiAnswer(result.data) + (meaning ? ". " + meaning.text : "");
      say("restock-result", text, meaning ? (meaning.tone === "ok" ? true : "neutral") : result.data.api.status < 400);
      refreshJobs();
    });
  });

  document.getElementById("run-notifier").addEventListener("click", function () {
    say("run-result", "Running the notifier…", true);
    C.api("POST", "/api/run/notifier").then(function (result) {
      say("run-result", result.ok ? describeRun("Notifier", result.data) : result.data.message, result.ok && result.data.available !== false);
      refreshJobs();
    });
  });

  function runSweep(now) {
    return C.api("POST", "/api/run/sweep", now ? { now: now } : undefined).then(function (result) {
      say("run-result", result.ok ? describeRun("Sweep", result.data) : result.data.message, result.ok && result.data.available !== false);
      refreshJobs();
      return result;
    });
  }

  document.getElementById("run-sweep").addEventListener("click", function () {
    say("run-result", "Running the sweep…", true);
    runSweep();
  });

  function advance(thenSweep) {
    var minutes = parseFloat(document.getElementById("clock-minutes").value);
    C.api("POST", "/api/clock/advance", { minutes: minutes }).then(function (result) {
      if (!result.ok) { say("clock-result", result.data.message || "Failed.", false); return; }
      say("clock-result", "Stack time is now " + C.dateTime(result.data.now) + ".", true);
      C.refreshStatus();
      if (thenSweep) { runSweep(); }
    });
  }

  document.getElementById("clock-form").addEventListener("submit", function (event) {
    event.preventDefault();
    advance(false);
  });
  document.getElementById("advance-and-sweep").addEventListener("click", function () { advance(true); });

  var fields = ["name", "threshold", "offer_window_s", "hold_window_s", "voice", "checkout_url"];
  var skuInput = document.getElementById("product-sku");
  var form = document.getElementById("product-form");
  var known = {};

  function loadProducts() {
    return C.api("GET", "/api/products").then(function (result) {
      (result.data.products || []).forEach(function (p) { known[p.sku] = p; });
    });
  }

  skuInput.addEventListener("change", function () {
    var p = known[skuInput.value];
    fields.forEach(function (f) { form.elements[f].value = p && p[f] !== null && p[f] !== undefined ? p[f] : ""; });
    say("product-result", p ? "Editing " + p.name + "." : "A new product: give it a name and a checkout URL.", true);
  });

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var body = {};
    fields.forEach(function (f) {
      var value = form.elements[f].value.trim();
      if (value === "") { return; }
      body[f] = form.elements[f].type === "number" ? Number(value) : value;
    });
    C.api("PUT", "/api/catalog/" + encodeURIComponent(skuInput.value.trim()), body).then(function (result) {
      if (!result.ok) { say("product-result", result.data.message || "Failed.", false); return; }
      known[result.data.product.sku] = result.data.product;
      say("product-result", (result.data.created ? "Added " : "Saved ") + result.data.product.name + ".", true);
    });
  });

  loadProducts().then(function () {
    var first = document.getElementById("restock-sku").value;
    if (first) { skuInput.value = first; skuInput.dispatchEvent(new Event("change")); say("product-result", "", true); }
  });
  C.poll(refreshJobs, 3000);
})();
