// Leaderboard: sort rows by a column heading or the metric menu (missing values last).
(function () {
  "use strict";
  var table = document.getElementById("board");
  if (!table) return;
  var body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;

  function value(row, key, type) {
    var v = row.getAttribute("data-" + key);
    if (type === "text") return v;
    return v === "" || v === null ? null : parseFloat(v);
  }

  function sort(key, type, descending) {
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, key, type), y = value(b, key, type);
      if (x === null || y === null) return (x === null) - (y === null);
      var c = type === "text" ? x.localeCompare(y) : x - y;
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) {
      var k = heads[i].getAttribute("data-key");
      if (k === key) heads[i].setAttribute("aria-sort", descending ? "descending" : "ascending");
      else heads[i].removeAttribute("aria-sort");
    }
    var menu = document.getElementById("metric");
    if (menu && type === "num" && menu.querySelector('option[value="' + key + '"]')) menu.value = key;
  }

  Array.prototype.forEach.call(heads, function (th) {
    var key = th.getAttribute("data-key");
    var button = th.querySelector("button");
    if (!key || !button) return;
    var type = th.getAttribute("data-type");
    button.addEventListener("click", function () {
      var now = th.getAttribute("aria-sort");
      // Scores sort best first; rank and names ascending first.
      var first = !(type === "text" || key === "rank");
      sort(key, type, now ? now !== "descending" : first);
    });
  });
  var menu = document.getElementById("metric");
  if (menu) menu.addEventListener("change", function () { sort(menu.value, "num", true); });
})();
