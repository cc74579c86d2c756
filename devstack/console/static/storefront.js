/* Storefront: the "shop as" switch fills every Notify-me widget with one simulated shopper's details; the platform
   switch rebuilds the app on another store platform; on a store, each card shows the store's own counts. */
(function () {
  "use strict";
  var select = document.getElementById("shop-as");
  var status = document.getElementById("widget-status");
  var KEY = "bisn-console-shopper";

  function fill() {
    var option = select.options[select.selectedIndex];
    var channel = option.getAttribute("data-channel");
    var contact = option.getAttribute("data-contact");
    var name = option.getAttribute("data-name");
    document.querySelectorAll("[data-bisn-sku] form").forEach(function (form) {
      var radio = form.querySelector("input[name=channel][value=" + channel + "]");
      if (radio && !radio.checked) {
        radio.checked = true;
        // The widget relabels its contact field when the channel changes.
        radio.dispatchEvent(new Event("change", { bubbles: true }));
      }
      form.querySelector("input[name=contact]").value = contact;
      form.querySelector("input[name=name]").value = name;
    });
  }

  function start() {
    var saved = window.localStorage ? localStorage.getItem(KEY) : null;
    if (saved !== null) {
      for (var i = 0; i < select.options.length; i++) {
        if (select.options[i].value === saved) { select.selectedIndex = i; }
      }
    }
    if (document.body.getAttribute("data-widget-failed")) {
      status.textContent = "The widget could not be loaded from the API (" + document.body.getAttribute("data-api-base") +
        "). Is the API running?";
      return;
    }
    fill();
  }

  select.addEventListener("change", function () {
    if (window.localStorage) { localStorage.setItem(KEY, select.value); }
    fill();
    status.textContent = "Now shopping as " + (select.options[select.selectedIndex].getAttribute("data-name") || "someone else") + ".";
  });

  var platform = document.getElementById("platform");
  var platformStatus = document.getElementById("platform-status");
  platform.addEventListener("change", function () {
    var chosen = platform.value;
    platform.disabled = true;
    platformStatus.textContent = "Switching to " + chosen + " and syncing the catalogue from its store…";
    window.Console.api("POST", "/api/platform", { platform: chosen }).then(function (result) {
      if (!result.ok) {
        platformStatus.textContent = result.data.message || "The platform could not be switched.";
        platform.disabled = false;
        return;
      }
      window.location.reload();
    });
  });

  function refreshCounts() {
    var cards = document.querySelectorAll("[data-store-sku]");
    return Promise.all(Array.prototype.map.call(cards, function (node) {
      var sku = node.getAttribute("data-store-sku");
      return window.Console.api("GET", "/api/store/" + encodeURIComponent(sku)).then(function (result) {
        if (!result.ok) { node.setAttribute("data-state", "unknown"); return; }
        node.querySelector(".available").textContent = result.data.available;
        node.querySelector(".reserved").textContent = result.data.reserved;
        node.setAttribute("data-available", result.data.available);
        node.setAttribute("data-reserved", result.data.reserved);
      });
    }));
  }
  if (document.querySelector("[data-store-sku]")) { window.Console.poll(refreshCounts, 2000); }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
