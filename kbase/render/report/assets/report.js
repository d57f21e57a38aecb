/* kbase report: draw the figures of this page with the vendored plotly-basic bundle.
 * Figures come from <script type="application/json" id="kbase-figures"> ({div id: {data, layout}}):
 * data, never code. When every figure is drawn, window.kbaseReport.ready is true and renderMs says
 * how long it took (the browser test reads both). */
(function () {
  "use strict";
  var state = { ready: false, renderMs: null, sinceNavigationMs: null, figures: 0, error: null };
  window.kbaseReport = state;
  function fail(message) {
    state.error = message;
    var box = document.getElementById("kbase-error");
    if (box) { box.textContent = message; box.hidden = false; }
  }
  var source = document.getElementById("kbase-figures");
  var figures = source ? JSON.parse(source.textContent) : {};
  var ids = Object.keys(figures);
  if (ids.length && typeof window.Plotly === "undefined") {
    fail("assets/plotly-basic.min.js did not load: keep the assets/ folder next to this page.");
    return;
  }
  var t0 = performance.now();
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
  var drawn = ids.map(function (id) {
    var fig = figures[id];
    return window.Plotly.newPlot(document.getElementById(id), fig.data, fig.layout, config);
  });
  Promise.all(drawn).then(function () {
    state.figures = ids.length;
    state.renderMs = performance.now() - t0;
    state.sinceNavigationMs = performance.now();
    state.ready = true;
    document.body.setAttribute("data-kbase-ready", "1");
  }, function (err) { fail("a figure could not be drawn: " + err); });
})();
