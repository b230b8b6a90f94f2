// The dashboard's own script: say whether the page is following the server, and go to the login page when the
// session is gone (a fragment answered 401). Served from the package, as the Content-Security-Policy requires.
(function () {
  "use strict";
  function status(text, ok) {
    var el = document.getElementById("live-status");
    if (el) {
      el.textContent = text;
      el.className = ok ? "live" : "live stale";
    }
  }
  document.addEventListener("htmx:sseOpen", function () { status("live", true); });
  document.addEventListener("htmx:sseError", function () { status("reconnecting…", false); });
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (xhr && xhr.status === 401) {
      window.location.reload();
    } else {
      status("update failed (" + (xhr ? xhr.status : "?") + "), retrying on the next change", false);
    }
  });
})();
