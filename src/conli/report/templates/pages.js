// The report's index: search, filters, sort and paging over every record, and its CSV.
// The records' rows are JSON data (never run); each record's section is an inert <template>
// that is cloned only when its page is shown, so thousands of records open in seconds.
// review.js keeps the marks; it tells this script how a record was decided (conliDecision).
(function () {
  "use strict";
  var PAGE = 25;
  var BANDS = [0.25, 0.5, 0.75];
  var rows = JSON.parse(document.getElementById("report-index").textContent);
  var byNumber = new Map(rows.map(function (r) { return [r.n, r]; }));
  var texts = null;
  var shown = rows;
  var page = 0;
  var el = function (id) { return document.getElementById(id); };

  function template(n) { return el("t-r" + n); }

  function searchText(row) {
    if (texts === null) {  // built on the first search: each record's id and response
      texts = new Map();
      rows.forEach(function (r) {
        var response = template(r.n).content.querySelector(".response");
        texts.set(r.n, (r.id + "\n" + (response ? response.textContent : "")).toLowerCase());
      });
    }
    return texts.get(row.n);
  }

  function band(score) {
    if (score === null) { return "none"; }
    var b = BANDS.findIndex(function (edge) { return score < edge; });
    return String(b === -1 ? BANDS.length : b);
  }

  function filtered() {
    var query = el("f-search").value.trim().toLowerCase();
    var verdict = el("f-verdict").value, passed = el("f-passed").value;
    var look = el("f-look").checked, wanted = el("f-band").value, sort = el("f-sort").value;
    var split = el("f-split").checked;
    var out = rows.filter(function (r) {
      return (!verdict || r.verdict === verdict)
        && (!passed || r.passed === (passed === "yes"))
        && (!look || r.look.length > 0)
        && (!split || r.agreement === "disagree")
        && (!wanted || band(r.score) === wanted)
        && (!query || searchText(r).indexOf(query) !== -1);
    });
    if (sort) {
      var key = sort.replace(/^-/, ""), sign = sort[0] === "-" ? -1 : 1;
      out.sort(function (a, b) {  // records without that score go last either way
        if (a[key] === null || b[key] === null) {
          return (a[key] === null) - (b[key] === null) || a.n - b.n;
        }
        return sign * (a[key] - b[key]) || a.n - b.n;
      });
    }
    return out;
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function number(value) { return value === null ? "–" : value.toFixed(3); }
  function judged(value) { return value === null ? "–" : String(Math.round(value * 10) / 10); }

  function indexRow(r) {
    var tr = document.createElement("tr");
    tr.dataset.n = r.n;
    cell(tr, String(r.n));
    var link = document.createElement("a");
    link.href = "#r" + r.n;
    link.textContent = r.id;
    cell(tr, "").appendChild(link);
    cell(tr, r.verdict, "badge-cell " + r.verdict);
    cell(tr, r.passed === null ? "–" : r.passed ? "yes" : "no");
    cell(tr, number(r.score));
    cell(tr, judged(r.judge_before) + " → " + judged(r.judge) + (r.rubric === null
      && r.rubric_before === null ? "" : " / rubric " + judged(r.rubric_before) + " → "
      + judged(r.rubric)));
    cell(tr, r.look.join(", "), "muted");
    cell(tr, r.reviewers.join(", ") + (r.agreement ? " (" + r.agreement + ")" : ""),
         r.agreement === "disagree" ? "split" : "muted");
    cell(tr, window.conliDecision ? window.conliDecision(r.n).decision : "", "decided");
    return tr;
  }

  function render() {
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(Math.max(0, page), pages - 1);
    var slice = shown.slice(page * PAGE, (page + 1) * PAGE);
    el("index-rows").replaceChildren.apply(el("index-rows"), slice.map(indexRow));
    el("records").replaceChildren.apply(el("records"), slice.map(function (r) {
      return document.importNode(template(r.n).content, true);
    }));
    el("page-label").textContent = "page " + (page + 1) + " of " + pages + " · "
      + shown.length + " of " + rows.length + " records";
    el("page-prev").disabled = page === 0;
    el("page-next").disabled = page >= pages - 1;
    document.dispatchEvent(new CustomEvent("conli:rendered"));
  }

  function refilter() {
    shown = filtered();
    page = 0;
    render();
  }

  function csvField(value) {
    var text = value === null || value === undefined ? "" : String(value);
    // never a spreadsheet formula (OWASP): a ' before every line of the cell that starts,
    // after spaces or tabs, with = + - @, and before a cell that starts with a tab or CR
    var lines = text.split(/(\r\n|\n|\r)/);  // the line breaks kept, at the odd places
    for (var i = 0; i < lines.length; i += 2) {
      if (/^[ \t]*[=+\-@]/.test(lines[i])) { lines[i] = "'" + lines[i]; }
    }
    text = lines.join("");
    if (/^[\t\r]/.test(text)) { text = "'" + text; }
    return /[",\n\r]/.test(text) ? "\"" + text.replace(/"/g, "\"\"") + "\"" : text;
  }

  function downloadCsv() {
    var head = ["n", "id", "verdict", "passed", "score", "judge", "rubric", "needs_look",
                "decision", "comment", "reviewer", "judge_before", "rubric_before",
                "reviewers", "agreement"];
    var lines = [head.join(",")].concat(shown.map(function (r) {
      var d = window.conliDecision ? window.conliDecision(r.n) : {};
      return [r.n, r.id, r.verdict, r.passed, r.score, r.judge, r.rubric, r.look.join("; "),
              d.decision, d.comment, d.reviewer, r.judge_before, r.rubric_before,
              r.reviewers.join("; "), r.agreement].map(csvField).join(",");
    }));
    window.conliSave(lines.join("\r\n") + "\r\n", "text/csv", "conli-index.csv");
  }

  function go() {  // a link to a record (#r12) or to a span in it (#r12-e3)
    var found = /^#r(\d+)(-.*)?$/.exec(location.hash);
    if (!found || !byNumber.has(Number(found[1]))) { return; }
    var n = Number(found[1]);
    if (!el("r" + n)) {
      if (shown.indexOf(byNumber.get(n)) === -1) {
        ["f-search", "f-verdict", "f-passed", "f-band"].forEach(function (id) { el(id).value = ""; });
        el("f-look").checked = el("f-split").checked = false;
        shown = filtered();
      }
      page = Math.floor(shown.indexOf(byNumber.get(n)) / PAGE);
      render();
    }
    var target = document.getElementById(location.hash.slice(1));
    if (target) {
      for (var up = target.closest("details"); up; up = up.parentElement.closest("details")) {
        up.open = true;
      }
      target.scrollIntoView();
    }
  }

  ["f-search", "f-verdict", "f-passed", "f-look", "f-split", "f-band", "f-sort"].forEach(function (id) {
    el(id).addEventListener("input", refilter);
  });
  el("page-prev").addEventListener("click", function () { page -= 1; render(); scrollTo(0, 0); });
  el("page-next").addEventListener("click", function () { page += 1; render(); scrollTo(0, 0); });
  el("download-csv").addEventListener("click", downloadCsv);
  window.addEventListener("hashchange", go);
  window.conliRefreshIndex = function () {
    el("index-rows").querySelectorAll("tr").forEach(function (tr) {
      tr.querySelector(".decided").textContent = window.conliDecision(Number(tr.dataset.n)).decision;
    });
  };
  document.addEventListener("DOMContentLoaded", function () { render(); go(); });
})();
