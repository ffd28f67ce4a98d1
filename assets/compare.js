/* The compare panel's two maps move together (a clientside callback, see compare_panel.py). */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  dpCompare: {
    /* Viewports for maps A and B: the map the user moved stays, the other takes its centre and
       zoom exactly (a reset view, not a pan rounded to whole pixels). Nothing changes when both
       already agree, so the second map's move ends the loop. */
    sync: function (centerA, zoomA, centerB, zoomB, idB) {
      var none = window.dash_clientside.no_update;
      if (!centerA || !centerB || zoomA === undefined || zoomB === undefined) { return [none, none]; }
      if (zoomA === zoomB && Math.abs(centerA.lat - centerB.lat) < 1e-9 &&
          Math.abs(centerA.lng - centerB.lng) < 1e-9) { return [none, none]; }
      var moved = (window.dash_clientside.callback_context.triggered || []).map(function (t) {
        return t.prop_id.split(".")[0];
      });
      if (moved.length && moved.every(function (m) { return m === idB; })) {   /* B moved, A did not */
        return [{center: [centerB.lat, centerB.lng], zoom: zoomB, options: {reset: true}}, none];
      }
      return [none, {center: [centerA.lat, centerA.lng], zoom: zoomA, options: {reset: true}}];
    }
  }
});
