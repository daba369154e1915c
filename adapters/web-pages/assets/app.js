// Tally web pages: a little progressive enhancement. Every page works without this file.
//
// - [data-tabs]: switch tab panels in place (the tabs are links that also work without it).
// - [data-poll-order]: poll GET /api/payment/query/{id} until the order is no longer pending,
//   then go to data-poll-next. Bounded: every 1.5 s for at most 3 minutes.
// - form[data-busy]: disable the submit button after the first submit (no double orders).
// - form[data-confirm]: ask before submitting.
// - time[datetime][data-format]: the server writes times in UTC (and says "UTC"); this rewrites
//   them with Intl.DateTimeFormat in the reader's own time zone and the page's language, keeping
//   the UTC text as the element's title. Without script, UTC stays.
"use strict";

(function () {
  var POLL_INTERVAL_MS = 1500;
  var POLL_MAX_ATTEMPTS = 120;

  function initTabs(list) {
    var tabs = Array.prototype.slice.call(list.querySelectorAll("[role=tab]"));
    function select(tab, focus) {
      tabs.forEach(function (t) {
        var on = t === tab;
        t.setAttribute("aria-selected", on ? "true" : "false");
        t.setAttribute("tabindex", on ? "0" : "-1");
        var panel = document.getElementById(t.getAttribute("aria-controls"));
        if (panel) { panel.hidden = !on; }
      });
      if (focus) { tab.focus(); }
      if (window.history && window.history.replaceState) {
        var url = new URL(window.location.href);
        url.searchParams.set("tab", tab.getAttribute("data-tab"));
        url.hash = "";
        window.history.replaceState(null, "", url.toString());
      }
    }
    tabs.forEach(function (tab, index) {
      tab.addEventListener("click", function (event) {
        event.preventDefault();
        select(tab, false);
      });
      tab.addEventListener("keydown", function (event) {
        var next = null;
        if (event.key === "ArrowRight") { next = tabs[(index + 1) % tabs.length]; }
        if (event.key === "ArrowLeft") { next = tabs[(index - 1 + tabs.length) % tabs.length]; }
        if (event.key === "Home") { next = tabs[0]; }
        if (event.key === "End") { next = tabs[tabs.length - 1]; }
        if (next) { event.preventDefault(); select(next, true); }
      });
    });
  }

  function initPoll(box) {
    var orderId = box.getAttribute("data-poll-order");
    var next = box.getAttribute("data-poll-next");
    var attempts = 0;
    function done() {
      box.classList.add("is-done");
      var text = box.querySelector("[data-poll-text]");
      if (text) { text.textContent = box.getAttribute("data-poll-done-text") || text.textContent; }
      window.location.assign(next);
    }
    function giveUp() {
      var timeout = box.querySelector("[data-poll-timeout]");
      if (timeout) { timeout.hidden = false; }
    }
    function tick() {
      attempts += 1;
      if (attempts > POLL_MAX_ATTEMPTS) { giveUp(); return; }
      fetch("/api/payment/query/" + encodeURIComponent(orderId), {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        cache: "no-store"
      }).then(function (response) {
        if (!response.ok) { throw new Error("status " + response.status); }
        return response.json();
      }).then(function (order) {
        if (order && order.status && order.status !== "pending") { done(); }
        else { window.setTimeout(tick, POLL_INTERVAL_MS); }
      }).catch(function () {
        window.setTimeout(tick, POLL_INTERVAL_MS * 2);
      });
    }
    window.setTimeout(tick, POLL_INTERVAL_MS);
  }

  function initForms() {
    document.addEventListener("submit", function (event) {
      var form = event.target;
      var question = form.getAttribute("data-confirm");
      if (question && !window.confirm(question)) {
        event.preventDefault();
        return;
      }
      if (form.hasAttribute("data-busy")) {
        if (form.getAttribute("data-submitted") === "true") {
          event.preventDefault();
          return;
        }
        form.setAttribute("data-submitted", "true");
        Array.prototype.forEach.call(form.querySelectorAll("button[type=submit]"), function (b) {
          b.setAttribute("aria-busy", "true");
        });
      }
    });
  }

  // A page restored from the back/forward cache may be submitted again.
  window.addEventListener("pageshow", function () {
    Array.prototype.forEach.call(document.querySelectorAll("form[data-submitted]"), function (form) {
      form.removeAttribute("data-submitted");
    });
  });

  var TIME_FORMATS = {
    date: { year: "numeric", month: "short", day: "numeric" },
    datetime: {
      year: "numeric", month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short"
    }
  };

  function localiseTimes() {
    if (!window.Intl || !Intl.DateTimeFormat) { return; }
    var lang = document.documentElement.lang || undefined;
    var formatters = {};
    Array.prototype.forEach.call(document.querySelectorAll("time[datetime][data-format]"), function (el) {
      var kind = el.getAttribute("data-format");
      var options = TIME_FORMATS[kind];
      var at = new Date(el.getAttribute("datetime"));
      if (!options || isNaN(at.getTime())) { return; }
      try {
        formatters[kind] = formatters[kind] || new Intl.DateTimeFormat(lang, options);
      } catch (e) {
        return;
      }
      if (!el.title) { el.title = el.textContent; }
      el.textContent = formatters[kind].format(at);
      el.setAttribute("data-localised", "true");
    });
  }

  function init() {
    localiseTimes();
    Array.prototype.forEach.call(document.querySelectorAll("[data-tabs]"), initTabs);
    Array.prototype.forEach.call(document.querySelectorAll("[data-poll-order]"), initPoll);
    initForms();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
