/* Accessible names for controls whose Dash component takes no aria-label: a slider's thumb
   (role=slider) gets the data-a11y-label of the element wrapping its slider, whenever Dash
   draws one. */
(function () {
  var pending = false;
  function nameThumbs() {
    pending = false;
    document.querySelectorAll("[data-a11y-label] [role=slider]:not([aria-label])").forEach(function (el) {
      el.setAttribute("aria-label", el.closest("[data-a11y-label]").getAttribute("data-a11y-label"));
    });
  }
  new MutationObserver(function () {
    if (!pending) { pending = true; window.requestAnimationFrame(nameThumbs); }
  }).observe(document.documentElement, {childList: true, subtree: true});
})();
