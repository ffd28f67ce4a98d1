/* The guided demo's clientside callback: show or hide the tour card, outline the cards of the
   panels the current step talks about and bring the first one into view. */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  tour: {
    focus: function (step, targets) {
      document.querySelectorAll(".tour-focus").forEach(function (el) { el.classList.remove("tour-focus"); });
      if (step === null || step === undefined) { return true; }
      var cards = targets[step].map(function (id) {
        var el = document.getElementById(id);
        return el && el.closest(".card");
      }).filter(Boolean);
      cards.forEach(function (card) { card.classList.add("tour-focus"); });
      if (cards.length) {
        /* in the main column the sticky tour card covers the top of the window */
        var tour = document.getElementById("tour-card");
        var clear = cards[0].closest(".main") && tour ? tour.offsetHeight + 20 : 10;
        var top = cards[0].getBoundingClientRect().top;
        if (top < clear || top > window.innerHeight * 0.5) { window.scrollBy(0, top - clear); }
      }
      return false;
    }
  }
});
