// The campaign viewer's transcript pager. A transcript is read as numbered chunk files,
// each a <script> calling ptbChunk(n, text): script tags load from file:// as well as from
// any web server (fetch does not), and the page never holds more than one chunk however
// large the transcript; search walks the chunks one at a time, keeping only matching lines.
(function () {
  "use strict";
  var meta = window.PTB_META, current = -1, pending = {}, searching = null;
  var $ = function (id) { return document.getElementById(id); };
  function chunkName(n) { return "c" + String(n).padStart(5, "0") + ".js"; }
  // Load chunk n by a script tag and resolve with its text; nothing keeps it afterwards.
  function load(n) {
    return new Promise(function (resolve, reject) {
      if (pending[n]) { pending[n].push({ resolve: resolve, reject: reject }); return; }
      pending[n] = [{ resolve: resolve, reject: reject }];
      var s = document.createElement("script");
      s.src = chunkName(n);
      s.onerror = function () {
        var w = pending[n] || []; delete pending[n]; s.remove();
        w.forEach(function (x) { x.reject(new Error("page " + (n + 1) + " is missing")); });
      };
      s.onload = function () { s.remove(); };
      document.head.appendChild(s);
    });
  }
  window.ptbChunk = function (n, text) {
    var w = pending[n] || []; delete pending[n];
    w.forEach(function (x) { x.resolve(text); });
  };
  function show(n, mark) {
    if (n < 0 || n >= meta.chunks) return Promise.resolve();
    return load(n).then(function (text) {
      current = n;
      var el = $("text");
      el.textContent = text;
      $("page").value = String(n + 1);
      $("where").textContent = "page " + (n + 1) + " of " + meta.chunks;
      if (mark) {
        var i = text.indexOf(mark);
        if (i >= 0) {
          el.textContent = "";
          el.append(text.slice(0, i));
          var m = document.createElement("mark"); m.id = "hit"; m.textContent = mark; el.append(m);
          el.append(text.slice(i + mark.length));
          m.scrollIntoView({ block: "center" });
        }
      }
      history.replaceState(null, "", "#p" + (n + 1));
    });
  }
  function search(q) {
    if (!q) return;
    var token = {}, hits = [], list = $("hits"), n = 0, max = 200;
    searching = token;
    list.textContent = "";
    $("status").textContent = "searching...";
    function step() {
      if (searching !== token) return;
      if (n >= meta.chunks || hits.length >= max) {
        $("status").textContent = hits.length + (hits.length >= max ? "+" : "") + " lines match";
        searching = null;
        return show(current < 0 ? 0 : current);
      }
      var page = n;
      load(page).then(function (text) {
        var lower = text.toLowerCase(), needle = q.toLowerCase(), from = 0, i;
        while ((i = lower.indexOf(needle, from)) >= 0 && hits.length < max) {
          var a = text.lastIndexOf("\n", i) + 1, b = text.indexOf("\n", i);
          var line = text.slice(a, b < 0 ? text.length : b);
          hits.push(page);
          var li = document.createElement("li"), link = document.createElement("a");
          link.href = "#p" + (page + 1);
          link.textContent = "p" + (page + 1) + ": ";
          link.onclick = (function (p, w) { return function (e) { e.preventDefault(); show(p, w); }; })(page, text.substr(i, q.length));
          li.append(link, line.length > 300 ? line.slice(0, 300) + "..." : line);
          list.append(li);
          from = b < 0 ? text.length : b + 1;
        }
        $("status").textContent = "searching... page " + (page + 1) + " of " + meta.chunks + ", " + hits.length + " lines";
        n += 1;
        setTimeout(step, 0);
      }, function (err) { $("status").textContent = String(err); searching = null; });
    }
    step();
  }
  document.addEventListener("DOMContentLoaded", function () {
    $("size").textContent = meta.bytes.toLocaleString() + " bytes in " + meta.chunks + " pages";
    $("prev").onclick = function () { show(current - 1); };
    $("next").onclick = function () { show(current + 1); };
    $("page").onchange = function () { show(parseInt($("page").value, 10) - 1); };
    $("go").onclick = function () { search($("q").value); };
    $("q").onkeydown = function (e) { if (e.key === "Enter") search($("q").value); };
    $("stop").onclick = function () { searching = null; $("status").textContent = "stopped"; };
    var m = /^#p(\d+)$/.exec(location.hash);
    if (meta.chunks) show(m ? parseInt(m[1], 10) - 1 : 0); else $("text").textContent = "(empty transcript)";
  });
})();
