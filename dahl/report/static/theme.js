// Light/dark theme: the saved choice, else the system's; runs in <head> so there is no flash.
(function () {
  "use strict";
  var key = "dahl-report-theme", saved = null;
  try { saved = localStorage.getItem(key); } catch (e) { /* storage off: follow the system */ }
  var dark = saved ? saved === "dark" : (window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.setAttribute("data-theme", dark ? "dark" : "light");
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme");
    if (!button) return;
    button.addEventListener("click", function () {
      var next = document.documentElement.getAttribute("data-theme") === "dark" ? "light" : "dark";
      document.documentElement.setAttribute("data-theme", next);
      try { localStorage.setItem(key, next); } catch (e) { /* not saved */ }
    });
  });
})();
