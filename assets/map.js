/* Small functions dash-leaflet calls by name ({"variable": "dpMap.<name>"}). */
window.dpMap = {
  /* Readout of the cell under the mouse, from the per-cell values the server sent. */
  hover: function (e) {
    var g = window.dpGrid, out = document.getElementById("map-hover");
    if (!out) { return; }
    if (!g) { out.textContent = "Hover readout is off for very fine grids."; return; }
    var b = g.bounds, lng = e.latlng.lng, lat = e.latlng.lat;
    if (lng < b[0] || lng > b[2] || lat < b[1] || lat > b[3]) {
      out.textContent = "Outside the domain."; return;
    }
    var k = Math.min(Math.floor((lng - b[0]) / (b[2] - b[0]) * g.gx), g.gx - 1);
    var j = Math.min(Math.floor((lat - b[1]) / (b[3] - b[1]) * g.gy), g.gy - 1);
    var i = j * g.gx + k;
    var text = "Cell row " + j + ", col " + k + ": private " + g.noisy[i].toFixed(1);
    if (g.truth) { text += " · true " + g.truth[i] + " (not private, owner only)"; }
    out.textContent = text;
  },
  leave: function () {
    var out = document.getElementById("map-hover");
    if (out) { out.textContent = "Hover over a cell to read its counts."; }
  },
  point: function (feature, latlng) {
    return L.circleMarker(latlng, {radius: 2, color: "#222", weight: 0, fillOpacity: 0.6});
  }
};
