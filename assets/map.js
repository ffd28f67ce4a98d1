/* Small functions dash-leaflet calls by name ({"variable": "dpMap.<name>"}). */
window.dpMap = {
  /* Index of the released region under a (col, row) position in base-grid cells. */
  regionAt: function (g, x, y) {
    if (g.kind === "cells") {
      var k = Math.min(Math.floor(x), g.gx - 1), j = Math.min(Math.floor(y), g.gy - 1);
      return {i: j * g.gx + k, label: "Cell row " + j + ", col " + k};
    }
    var r = g.regions;
    for (var i = 0; i < r.length / 4; i++) {
      if (y >= r[4 * i] && y < r[4 * i + 1] && x >= r[4 * i + 2] && x < r[4 * i + 3]) {
        return {i: i, label: "Leaf " + i};
      }
    }
    return null;
  },
  /* Readout of the region under the mouse, from the values the server sent. */
  hover: function (e) {
    var g = window.dpGrid, out = document.getElementById("map-hover");
    if (!out) { return; }
    if (!g) { return; }   // the readout already says why (too many cells, or no release)
    var b = g.bounds, lng = e.latlng.lng, lat = e.latlng.lat;
    if (lng < b[0] || lng > b[2] || lat < b[1] || lat > b[3]) {
      out.textContent = "Outside the domain."; return;
    }
    var x = (lng - b[0]) / (b[2] - b[0]) * g.gx, y = (lat - b[1]) / (b[3] - b[1]) * g.gy;
    var hit = window.dpMap.regionAt(g, Math.min(x, g.gx - 1e-9), Math.min(y, g.gy - 1e-9));
    if (!hit) { return; }
    var text = hit.label + ": private " + g.noisy[hit.i].toLocaleString("en");
    if (g.area) {
      text += " · area " + g.area[hit.i].toLocaleString("en", {maximumSignificantDigits: 3}) + " km²";
    }
    if (g.eps) { text += " · ε on path " + g.eps[hit.i]; }
    if (g.truth) { text += " · true " + g.truth[hit.i] + " (not private, owner only)"; }
    out.textContent = text;
  },
  /* Base-map tiles: after an error with no tile loaded, the map shows its offline outlines
     and their attribution instead of the tiles' (CSS keys on .tiles-offline). */
  tileError: function (e) {
    var c = e.target._map && e.target._map.getContainer();
    if (c && !c.dataset.tileLoaded) { c.classList.add("tiles-offline"); }
  },
  tileLoad: function (e) {
    var c = e.target._map && e.target._map.getContainer();
    if (c) { c.dataset.tileLoaded = "1"; c.classList.remove("tiles-offline"); }
  },
  leave: function () {
    var out = document.getElementById("map-hover");
    if (out && window.dpGrid) { out.textContent = "Hover over a cell to read its counts."; }
  },
  valueStyle: function (feature) {
    return {color: feature.properties.colour, weight: 3, opacity: 0.9};
  },
  vertex: function (feature, latlng) {
    return L.circleMarker(latlng, {radius: 3, color: "#333", weight: 1,
                                   fillColor: feature.properties.colour, fillOpacity: 1});
  },
  valueTip: function (feature, layer) {
    // written as text, like every tooltip: Leaflet parses a string tooltip as HTML
    var tip = document.createElement("span");
    tip.textContent = "noisy value " + feature.properties.value;
    layer.bindTooltip(tip);
  },
  /* Counts per district or hexagon: fill from the server's colour, its numbers on hover. */
  shapeStyle: function (feature) {
    return {fillColor: feature.properties.colour, fillOpacity: 0.75, color: "#3c4655", weight: 0.8,
            opacity: 0.8};
  },
  shapeTip: function (feature, layer) {
    // a district's name comes from an uploaded file: written as text, never parsed as HTML
    var tip = document.createElement("span");
    tip.textContent = feature.properties.tip;
    layer.bindTooltip(tip, {sticky: true});
  },
  point: function (feature, latlng) {
    return L.circleMarker(latlng, {radius: 2, color: "#222", weight: 0, fillOpacity: 0.6});
  }
};
