/* Shared helpers for the dev console's pages: calling the JSON API, formatting, building elements. */
(function () {
  "use strict";

  function api(method, path, body) {
    var options = { method: method, headers: {} };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(path, options).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        return { ok: response.ok, status: response.status, data: data };
      });
    });
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) { return; }
      if (key === "text") { node.textContent = value; } else { node.setAttribute(key, value === true ? "" : value); }
    });
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) { return; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function time(unix) {
    if (unix === null || unix === undefined) { return "—"; }
    var d = new Date(unix * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function dateTime(unix) {
    if (unix === null || unix === undefined) { return "—"; }
    var d = new Date(unix * 1000);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + time(unix);
  }

  function stamp(joinedTs) {
    // "2026-11-30T08:01:02.123456Z#abc123" -> local time of day
    var iso = String(joinedTs || "").split("#")[0];
    var parsed = Date.parse(iso);
    return isNaN(parsed) ? iso : dateTime(parsed / 1000);
  }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  // Turns text into nodes with every http(s) URL as a link (never as HTML: the text may be anything).
  function linkify(text) {
    var fragment = document.createDocumentFragment();
    var pattern = /https?:\/\/[^\s<>"']+/g;
    var last = 0;
    var match;
    while ((match = pattern.exec(text)) !== null) {
      var url = match[0].replace(/[.,;:!?)]+$/, "");
      fragment.appendChild(document.createTextNode(text.slice(last, match.index)));
      fragment.appendChild(el("a", { href: url, text: url }));
      last = match.index + url.length;
    }
    fragment.appendChild(document.createTextNode(text.slice(last)));
    return fragment;
  }

  function poll(fn, everyMs) {
    var timer = null;
    function tick() {
      Promise.resolve(fn()).catch(function () { return null; }).then(function () {
        timer = setTimeout(tick, document.hidden ? everyMs * 4 : everyMs);
      });
    }
    tick();
    return function stop() { clearTimeout(timer); };
  }

  var banner = document.getElementById("banner");
  var clock = document.getElementById("stack-clock");
  var capabilities = {};
  var readyCallbacks = [];

  function showBanner(text) {
    if (!banner) { return; }
    banner.textContent = text || "";
    banner.hidden = !text;
  }

  function refreshStatus() {
    return api("GET", "/api/status").then(function (result) {
      if (!result.ok) { return; }
      var status = result.data;
      capabilities = status.capabilities || {};
      if (clock) {
        var offset = status.clock.offset_s ? " (+" + Math.round(status.clock.offset_s / 60) + " min)" : "";
        clock.textContent = "Stack time " + time(status.clock.now) + offset;
      }
      var problems = [];
      if (status.api && status.api.indexOf("exited") === 0) {
        problems.push("The API process has stopped (" + status.api + "). Restart `make dev`.");
      }
      if (status.jobs && status.jobs.dead_lettered) {
        problems.push(status.jobs.dead_lettered + " job(s) are in the dead-letter queue.");
      }
      showBanner(problems.join(" "));
      readyCallbacks.splice(0).forEach(function (cb) { cb(capabilities); });
    }, function () { showBanner("The console is not answering. Is `make dev` still running?"); });
  }

  poll(refreshStatus, 5000);

  window.Console = {
    api: api,
    el: el,
    time: time,
    dateTime: dateTime,
    stamp: stamp,
    clear: clear,
    linkify: linkify,
    poll: poll,
    refreshStatus: refreshStatus,
    capabilities: function () { return capabilities; },
    whenStatus: function (cb) { readyCallbacks.push(cb); }
  };
})();
