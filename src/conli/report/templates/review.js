// The auditor's marks: each sentence's verdict marked right or wrong, each record's verdict
// approved or rejected with a comment, under a reviewer's name. Kept in localStorage under
// this results file's identity (restored on reload; only the choices and when they were
// made, the texts stay in the page's templates), downloaded as JSON Lines that
// `conli calibrate --file` reads as it is (label true = the text is hallucinated); the
// reviewer, decision, comment, time, results file's hash and conli's version ride along as
// fields calibrate does not read. A sign-off ("reviewed N of M by X on DATE") is a line of
// its own; any change to the marks or the name after it withdraws it.
(function () {
  "use strict";
  var KEY = "conli-report:" + document.body.dataset.report;
  var PAGE = document.body.dataset;
  var store = {reviewer: "", sentences: {}, records: {}, signoff: null};
  var saved = true;
  var el = function (id) { return document.getElementById(id); };

  try {
    var kept = JSON.parse(localStorage.getItem(KEY) || "null");
    if (kept && typeof kept === "object") {
      store = {reviewer: String(kept.reviewer || ""), sentences: kept.sentences || {},
               records: kept.records || {}, signoff: kept.signoff || null};
    }
  } catch (e) { /* no storage (or not ours): the marks live in this page only */ }

  function keep() {
    try { localStorage.setItem(KEY, JSON.stringify(store)); } catch (e) { saved = false; }
  }

  function count() { return Object.keys(store.sentences).length + lines(true).length; }

  function now() { return new Date().toISOString().replace(/\.\d+Z$/, "Z"); }

  // a mark is kept as {mark, at}; a page before issue 65 kept the choice alone
  function choice(kept) { return typeof kept === "string" ? kept : (kept || {}).mark; }
  function when(kept) { return typeof kept === "string" ? "" : (kept || {}).at || ""; }

  function reviewed() {  // records with a mark or a decision
    var seen = {};
    Object.keys(store.sentences).forEach(function (key) { seen[key.split("/")[0]] = true; });
    Object.keys(store.records).forEach(function (n) {
      if (store.records[n].decision) { seen[n] = true; }
    });
    return Object.keys(seen).length;
  }

  function show() {
    el("mark-count").textContent = String(count());
    el("download-marks").disabled = count() === 0 && !store.signoff;
    el("sign-off").disabled = count() === 0 || !store.reviewer.trim();
    var s = store.signoff;
    el("signed").textContent = s ? "reviewed " + s.reviewed + " of " + s.records + " by "
      + s.reviewer + " on " + s.signed_at : "not signed off";
  }

  function changed() { store.signoff = null; }  // a sign-off holds for the marks it saw

  function number(section) { return Number(section.id.slice(1)); }

  // each record's section, shown or not: its inert template holds the texts a mark needs
  function section(n) {
    var t = el("t-r" + n);
    return t ? t.content.querySelector("section.rec") : null;
  }

  function sourceOf(rec) {
    var joiner = el("records").dataset.joiner;
    return Array.from(rec.querySelectorAll(".chunk-text"), function (c) {
      return c.textContent;
    }).join(joiner);
  }

  function mark(button) {  // only the choice is kept: the texts stay in the page
    var row = button.closest("li.review");
    var key = number(row.closest("section.rec")) + "/" + row.dataset.index;
    var picked = button.dataset.mark;
    if (choice(store.sentences[key]) === picked) {
      delete store.sentences[key];
      row.dataset.marked = "";
    } else {
      store.sentences[key] = {mark: picked, at: now()};
      row.dataset.marked = picked;
    }
  }

  function record(rec) {
    var n = number(rec);
    store.records[n] = store.records[n] || {decision: "", comment: ""};
    return store.records[n];
  }

  function decide(button) {
    var entry = record(button.closest("section.rec"));
    entry.decision = entry.decision === button.dataset.decide ? "" : button.dataset.decide;
    entry.at = now();
    button.closest(".decision").dataset.decided = entry.decision;
  }

  function example(rec, response, label, verdict, mark, at) {
    var d = window.conliDecision(number(rec));
    return {id: rec.dataset.id, source: sourceOf(rec), response: response, label: label,
            verdict: verdict, mark: mark, reviewer: store.reviewer, decision: d.decision,
            comment: d.comment, marked_at: at, results_sha256: PAGE.resultsSha256,
            conli_version: PAGE.conli};
  }

  // a marked sentence is an example; so is a decided record's verdict where a label follows
  function lines(onlyRecords) {
    var out = [];
    Object.keys(onlyRecords ? {} : store.sentences).forEach(function (key) {
      var parts = key.split("/"), rec = section(parts[0]);
      var row = rec && rec.querySelector("li.review[data-index='" + parts[1] + "']");
      if (row) {
        var picked = choice(store.sentences[key]);
        var m = example(rec, row.querySelector(".sent").textContent,
                        (row.dataset.flagged === "true") === (picked === "right"),
                        row.dataset.verdict, picked, when(store.sentences[key]));
        m.id += "#" + parts[1];
        out.push(m);
      }
    });
    Object.keys(store.records).forEach(function (n) {
      var r = store.records[n], rec = section(n);
      var box = rec && rec.querySelector(".decision[data-labelled=true]");
      if (r.decision && box) {
        var verdict = box.querySelector("b").textContent;
        out.push(example(rec, rec.querySelector(".response").textContent,
                         (verdict === "hallucinated") === (r.decision === "approve"), verdict,
                         r.decision === "approve" ? "right" : "wrong", r.at || ""));
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
    el("records").querySelectorAll("section.rec").forEach(function (rec) {
      var n = number(rec);
      rec.querySelectorAll("li.review").forEach(function (row) {
        row.dataset.marked = choice(store.sentences[n + "/" + row.dataset.index]) || "";
      });
      var r = store.records[n] || {};
      rec.querySelector(".decision").dataset.decided = r.decision || "";
      rec.querySelector(".decision .comment").value = r.comment || "";
    });
  }

  document.addEventListener("conli:rendered", restore);
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-mark], button[data-decide]");
    if (button) {
      if (button.dataset.mark) { mark(button); } else { decide(button); }
      changed();
      keep();
      show();
      window.conliRefreshIndex();
    } else if (event.target.id === "sign-off") {
      store.signoff = {kind: "sign-off", reviewer: store.reviewer.trim(), signed_at: now(),
                       reviewed: reviewed(), records: Number(PAGE.records),
                       results_sha256: PAGE.resultsSha256, conli_version: PAGE.conli};
      keep();
      show();
    } else if (event.target.id === "download-marks") {
      var out = lines(false).concat(store.signoff ? [store.signoff] : []);
      var text = out.map(function (m) { return JSON.stringify(m); }).join("\n");
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
    changed();
    keep();
    show();
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
