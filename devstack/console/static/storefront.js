/* Storefront: the "shop as" switch fills every Notify-me widget with one simulated shopper's details. */
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

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
