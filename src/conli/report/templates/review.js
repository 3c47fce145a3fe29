// The auditor's marks: each sentence's verdict marked right or wrong, each record's verdict
// approved or rejected with a comment, under a reviewer's name. Kept in localStorage under
// this results file's identity (restored on reload), downloaded as JSON Lines that
// `conli calibrate --file` reads as it is (label true = the text is hallucinated); the
// reviewer, decision and comment ride along as fields calibrate does not read.
(function () {
  "use strict";
  var KEY = "conli-report:" + document.body.dataset.report;
  var store = {reviewer: "", sentences: {}, records: {}};
  var saved = true;
  var el = function (id) { return document.getElementById(id); };

  try {
    var kept = JSON.parse(localStorage.getItem(KEY) || "null");
    if (kept && typeof kept === "object") {
      store = {reviewer: String(kept.reviewer || ""), sentences: kept.sentences || {},
               records: kept.records || {}};
    }
  } catch (e) { /* no storage (or not ours): the marks live in this page only */ }

  function keep() {
    try { localStorage.setItem(KEY, JSON.stringify(store)); } catch (e) { saved = false; }
  }

  function count() { return Object.keys(store.sentences).length + lines(true).length; }

  function show() {
    el("mark-count").textContent = String(count());
    el("download-marks").disabled = count() === 0;
  }

  function number(section) { return Number(section.id.slice(1)); }

  function sourceOf(section) {
    var joiner = el("records").dataset.joiner;
    return Array.from(section.querySelectorAll(".chunk-text"), function (c) {
      return c.textContent;
    }).join(joiner);
  }

  function mark(button) {
    var row = button.closest("li.review");
    var section = row.closest("section.rec");
    var key = number(section) + "/" + row.dataset.index;
    var choice = button.dataset.mark;
    if (row.dataset.marked === choice) {
      delete store.sentences[key];
      row.dataset.marked = "";
    } else {
      store.sentences[key] = {
        id: section.dataset.id + "#" + row.dataset.index,
        source: sourceOf(section),
        response: row.querySelector(".sent").textContent,
        label: (row.dataset.flagged === "true") === (choice === "right"),
        verdict: row.dataset.verdict,
        mark: choice,
        record: number(section)
      };
      row.dataset.marked = choice;
    }
  }

  function record(section) {
    var n = number(section);
    store.records[n] = store.records[n] || {decision: "", comment: ""};
    return store.records[n];
  }

  function decide(button) {
    var section = button.closest("section.rec");
    var box = button.closest(".decision");
    var entry = record(section);
    entry.decision = entry.decision === button.dataset.decide ? "" : button.dataset.decide;
    box.dataset.decided = entry.decision;
    entry.id = section.dataset.id;
    if (box.dataset.labelled === "true") {  // a record's verdict marked right or wrong
      var verdict = section.querySelector(".decision b").textContent;
      entry.source = sourceOf(section);
      entry.response = section.querySelector(".response").textContent;
      entry.verdict = verdict;
      entry.label = (verdict === "hallucinated") === (entry.decision === "approve");
    }
  }

  // a marked record's verdict is an example too, where one follows (supported, hallucinated)
  function lines(onlyRecords) {
    var out = onlyRecords ? [] : Object.keys(store.sentences).map(function (key) {
      var m = store.sentences[key];
      var d = window.conliDecision(m.record);
      return {id: m.id, source: m.source, response: m.response, label: m.label,
              verdict: m.verdict, mark: m.mark, reviewer: store.reviewer,
              decision: d.decision, comment: d.comment};
    });
    Object.keys(store.records).forEach(function (n) {
      var r = store.records[n];
      if (r.decision && r.source !== undefined) {
        out.push({id: r.id, source: r.source, response: r.response, label: r.label,
                  verdict: r.verdict, mark: r.decision === "approve" ? "right" : "wrong",
                  reviewer: store.reviewer, decision: r.decision, comment: r.comment});
      }
    });
    return out;
  }

  window.conliSave = function (text, type, name) {
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text], {type: type}));
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
  };

  window.conliDecision = function (n) {
    var r = store.records[n] || {};
    return {decision: r.decision || "", comment: r.comment || "", reviewer: store.reviewer};
  };

  function restore() {  // a page of records was shown: put back their marks
    el("records").querySelectorAll("section.rec").forEach(function (section) {
      var n = number(section);
      section.querySelectorAll("li.review").forEach(function (row) {
        var m = store.sentences[n + "/" + row.dataset.index];
        row.dataset.marked = m ? m.mark : "";
      });
      var r = store.records[n] || {};
      section.querySelector(".decision").dataset.decided = r.decision || "";
      section.querySelector(".decision .comment").value = r.comment || "";
    });
  }

  document.addEventListener("conli:rendered", restore);
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-mark], button[data-decide]");
    if (button) {
      if (button.dataset.mark) { mark(button); } else { decide(button); }
      keep();
      show();
      window.conliRefreshIndex();
    } else if (event.target.id === "download-marks") {
      var text = lines(false).map(function (m) { return JSON.stringify(m); }).join("\n");
      window.conliSave(text + "\n", "application/x-ndjson", "conli-marks.jsonl");
    }
  });
  document.addEventListener("input", function (event) {
    if (event.target.id === "reviewer") {
      store.reviewer = event.target.value;
    } else if (event.target.classList.contains("comment")) {
      record(event.target.closest("section.rec")).comment = event.target.value;
    } else {
      return;
    }
    keep();
  });
  window.addEventListener("beforeunload", function (event) {
    if (!saved && count() > 0) {  // only when the browser would not keep them
      event.preventDefault();
      event.returnValue = "";
    }
  });
  el("reviewer").value = store.reviewer;
  show();
})();
