/* A table wider than its column scrolls sideways inside its own box (course.css), but a phone
   shows no scrollbar until the table is touched: the last columns of a table read as missing
   (reader passes 5 and 6, chapters 9 and 9b at 375 px). Where a table is wider than the column,
   a line above it says so; where it fits (a laptop, or after a resize), the line goes.
   tests/built_book/test_site.py: test_a_table_wider_than_its_column_says_it_scrolls. */
(function () {
  "use strict";
  var HINT = "course-scroll-hint";

  function mark() {
    document.querySelectorAll("article.bd-article table").forEach(function (table) {
      var before = table.previousElementSibling;
      var hinted = before !== null && before.classList.contains(HINT);
      var wide = table.scrollWidth > table.clientWidth + 1;
      if (wide && !hinted) {
        var line = document.createElement("p");
        line.className = HINT;
        line.textContent = "wide table: scroll it sideways to see every column \u2192";
        table.parentNode.insertBefore(line, table);
      } else if (!wide && hinted) {
        before.remove();
      }
    });
  }

  function watch() {
    mark();
    // a table's width can change after the page has loaded (fonts, typeset math, an output
    // unfolded): look again whenever one's box changes size
    if (window.ResizeObserver) {
      var seen = new ResizeObserver(mark);
      document.querySelectorAll("article.bd-article table").forEach(function (t) {
        seen.observe(t);
      });
    }
  }

  // as soon as the tables are there (the page's "load" can come long after: a widget's
  // script still loading)
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
