/* The side panel's steps: opening one closes the others, a reload reopens the step that was
   open (kept for this tab), and the map is told when the panel beside it changes width (a wide
   step opened or closed) so Leaflet redraws to its new size. */
(function () {
  var KEY = "dp-open-step";
  document.addEventListener("toggle", function (e) {
    var opened = e.target;
    if (!(opened.matches && opened.matches("details.step")) || !opened.open) { return; }
    document.querySelectorAll("details.step[open]").forEach(function (d) {
      if (d !== opened) { d.open = false; }
    });
    try { window.sessionStorage.setItem(KEY, opened.id); } catch (err) { /* storage off */ }
  }, true);

  var restore = new MutationObserver(function () {
    if (!document.querySelector("details.step")) { return; }
    restore.disconnect();
    var saved = null;
    try { saved = window.sessionStorage.getItem(KEY); } catch (err) { /* storage off */ }
    var d = saved && document.getElementById(saved);
    if (!d) { return; }
    /* the step the page opens with is closed first: its own "opened" event then changes nothing */
    document.querySelectorAll("details.step[open]").forEach(function (x) { x.open = false; });
    d.open = true;
  });
  restore.observe(document.documentElement, {childList: true, subtree: true});

  /* a "Next" button opens the step it names and moves the keyboard focus to its title */
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-opens-step]");
    var d = button && document.getElementById(button.getAttribute("data-opens-step"));
    if (!d) { return; }
    d.open = true;
    d.querySelector("summary").focus();
    d.scrollIntoView({block: "start"});
  });

  /* every Leaflet map on the page redraws when its box changes size, keeping its centre */
  if (window.L && window.ResizeObserver) {
    window.L.Map.addInitHook(function () {
      var map = this;
      new ResizeObserver(function () { map.invalidateSize({animate: false}); }).observe(map.getContainer());
    });
  }
})();

/* Open the step holding an element (the guided demo opens the step it talks about). */
window.dpSteps = {
  openFor: function (el) {
    var d = el && el.closest("details.step");
    if (d && !d.open) { d.open = true; }
    return d;
  }
};
