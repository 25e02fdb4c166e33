/* The "Contents" button of the article header opens the page's contents.
 *
 * The theme wires only the first .secondary-toggle of the page (the navbar's,
 * hidden at laptop widths) to the drawer that holds the page's contents; the
 * visible one in the article header did nothing, so between 992 and 1,499 px,
 * where notes.css hides the right sidebar, the page had no contents menu.
 * Every other .secondary-toggle now forwards its click to the wired one.
 */
(function () {
  "use strict";
  function wire() {
    var toggles = document.querySelectorAll(".secondary-toggle");
    for (var i = 1; i < toggles.length; i++) {
      toggles[i].addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        toggles[0].click();
      });
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
