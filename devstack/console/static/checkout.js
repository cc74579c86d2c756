/* Fake checkout: "place order" sends the shop's signed orders webhook; "abandon" walks away from the hold. */
(function () {
  "use strict";
  var C = window.Console;
  var box = document.getElementById("checkout");
  var placeButton = document.getElementById("place-order");
  if (!box || !placeButton) { return; }
  var reservationId = box.getAttribute("data-reservation");
  var holdExpires = parseFloat(box.getAttribute("data-hold-expires"));
  var result = document.getElementById("checkout-result");
  var state = document.getElementById("hold-state");
  var abandonButton = document.getElementById("abandon");

  ["hold-until", "abandon-until"].forEach(function (id) {
    var node = document.getElementById(id);
    if (node && !isNaN(holdExpires)) { node.textContent = C.time(holdExpires); }
  });

  function done(text, ok) {
    result.textContent = text;
    result.className = "result " + (ok ? "ok" : "bad");
  }

  placeButton.addEventListener("click", function () {
    placeButton.disabled = true;
    abandonButton.disabled = true;
    done("Placing your order…", true);
    C.api("POST", "/api/orders", { reservation_id: reservationId }).then(function (response) {
      var data = response.data;
      if (!response.ok) {
        done(data.message || "The order could not be sent.", false);
        placeButton.disabled = false;
        abandonButton.disabled = false;
        return;
      }
      var body = data.api.body || {};
      if (data.api.status < 300) {
        state.setAttribute("data-state", "converted");
        state.textContent = "Your order is placed (order " + data.order_id + "). Thank you!";
        var hook = data.platform === "generic" ? "The shop's orders webhook" : "The " + data.platform + " store's order webhook";
        done(hook + " answered " + data.api.status + (body.status ? " (" + body.status + ")" : "") + ".", true);
      } else {
        done("The order webhook answered " + data.api.status + ": " + (body.message || body.error || "refused") + ".", false);
      }
    });
  });

  abandonButton.addEventListener("click", function () {
    placeButton.disabled = true;
    abandonButton.disabled = true;
    document.getElementById("abandoned").hidden = false;
    done("", true);
  });

  var endHold = document.getElementById("end-hold");
  endHold.addEventListener("click", function () {
    endHold.disabled = true;
    var at = isNaN(holdExpires) ? undefined : { now: holdExpires + 1 };
    C.api("POST", "/api/run/sweep", at).then(function (response) {
      var data = response.data;
      if (!response.ok || data.available === false) {
        done(data.message || "The sweep is not available yet.", false);
        endHold.disabled = false;
        return;
      }
      state.setAttribute("data-state", "expired");
      state.textContent = "Your hold has ended, unbought.";
      done("The sweep ran: " + data.processed + " offer(s) or hold(s) came due. The unit goes to the next shopper in line, if anyone waits, once the notifier runs the top-up job the sweep queued.", true);
    });
  });
})();
