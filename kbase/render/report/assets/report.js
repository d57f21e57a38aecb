/* kbase report: draw the figures of this page with the vendored plotly-basic bundle.
 * Figures come from <script type="application/json" id="kbase-figures"> ({div id: {data, layout, narrow}}):
 * data, never code. A chart narrower than NARROW_PX (a phone) takes its figure's "narrow" overrides (layout,
 * and per-trace changes): no side legend, short titles, fewer ticks; it is drawn again when the window crosses
 * that width. When every figure is drawn, window.kbaseReport.ready is true and renderMs says how long it took
 * (the browser test reads both). */
(function () {
  "use strict";
  var NARROW_PX = 640;
  var state = { ready: false, renderMs: null, sinceNavigationMs: null, figures: 0, error: null, narrow: {} };
  window.kbaseReport = state;
  function fail(message) {
    state.error = message;
    var box = document.getElementById("kbase-error");
    if (box) { box.textContent = message; box.hidden = false; }
  }
  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function merge(base, over) {  /* a copy of base with over's keys; objects merged, everything else replaced */
    var out = {}, k;
    for (k in base) { if (Object.prototype.hasOwnProperty.call(base, k)) { out[k] = base[k]; } }
    for (k in over) {
      if (Object.prototype.hasOwnProperty.call(over, k)) {
        out[k] = isObject(out[k]) && isObject(over[k]) ? merge(out[k], over[k]) : over[k];
      }
    }
    return out;
  }
  function variant(fig, narrow) {
    if (!narrow || !fig.narrow) { return { data: fig.data, layout: fig.layout }; }
    var traces = fig.narrow.traces || [];
    return {
      data: fig.data.map(function (t, i) { return traces[i] ? merge(t, traces[i]) : t; }),
      layout: merge(fig.layout, fig.narrow.layout || {})
    };
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
  function isNarrow(el) { return (el.clientWidth || window.innerWidth) < NARROW_PX; }
  var drawn = ids.map(function (id) {
    var el = document.getElementById(id);
    var narrow = isNarrow(el);
    state.narrow[id] = narrow;
    var v = variant(figures[id], narrow);
    return window.Plotly.newPlot(el, v.data, v.layout, config);
  });
  Promise.all(drawn).then(function () {
    state.figures = ids.length;
    state.renderMs = performance.now() - t0;
    state.sinceNavigationMs = performance.now();
    state.ready = true;
    document.body.setAttribute("data-kbase-ready", "1");
  }, function (err) { fail("a figure could not be drawn: " + err); });
  var pending = null;
  window.addEventListener("resize", function () {  /* crossing NARROW_PX: the other variant */
    if (pending) { clearTimeout(pending); }
    pending = setTimeout(function () {
      ids.forEach(function (id) {
        var el = document.getElementById(id);
        var narrow = isNarrow(el);
        if (narrow !== state.narrow[id]) {
          state.narrow[id] = narrow;
          var v = variant(figures[id], narrow);
          window.Plotly.react(el, v.data, v.layout, config);
        }
      });
    }, 150);
  });
})();
