// mdmem ui: reload a live page (activity, review) when memory changes. The page works
// without this script; it only saves pressing Reload. Same origin only (CSP connect-src).
(function () {
  "use strict";
  var marker = document.getElementById("live");
  if (!marker || !window.fetch) return;
  var shown = marker.getAttribute("data-version");
  var busy = false;
  function check() {
    if (busy || document.hidden) return;
    busy = true;
    fetch("/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        busy = false;
        if (data && data.v && data.v !== shown) window.location.reload();
      })
      .catch(function () { busy = false; });
  }
  marker.classList.add("on");
  window.setInterval(check, 3000);
  document.addEventListener("visibilitychange", check);
})();
