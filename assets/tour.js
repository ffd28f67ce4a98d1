/* The guided demo's clientside callback: show or hide the tour card, outline the cards of the
   panels the current step talks about, and open the step that holds the first of them. */
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
      /* the step holding the first card opens; the card scrolls into the side panel's view */
      var side = cards.filter(function (card) { return card.closest("details.step"); })[0];
      if (side) {
        window.dpSteps.openFor(side);
        side.scrollIntoView({block: "nearest"});
      }
      return false;
    }
  }
});
