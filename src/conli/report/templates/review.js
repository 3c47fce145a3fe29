// The auditor's marks: each sentence's verdict marked right or wrong, downloaded as JSON Lines
// that `conli calibrate --file` reads as it is (label true = the sentence is hallucinated).
// Runs offline from a file; the page's CSP allows this script by its hash and nothing else.
(function () {
  "use strict";
  var marks = new Map();
  var saved = true;

  function show() {
    document.getElementById("mark-count").textContent = String(marks.size);
    document.getElementById("download-marks").disabled = marks.size === 0;
  }

  function mark(button) {
    var row = button.closest("li.review");
    var section = row.closest("section.rec");
    var source = section.querySelector("[data-role=source]");
    var key = section.id + "/" + row.dataset.index;
    var choice = button.dataset.mark;
    if (row.dataset.marked === choice) {
      marks.delete(key);
      row.dataset.marked = "";
    } else {
      var flagged = row.dataset.flagged === "true";
      marks.set(key, {
        id: section.dataset.id + "#" + row.dataset.index,
        source: source.textContent,
        response: row.querySelector(".sent").textContent,
        label: flagged === (choice === "right"),
        verdict: row.dataset.verdict,
        mark: choice
      });
      row.dataset.marked = choice;
    }
    saved = false;
    show();
  }

  function download() {
    var lines = Array.from(marks.values()).map(function (m) { return JSON.stringify(m); });
    var blob = new Blob([lines.join("\n") + "\n"], {type: "application/x-ndjson"});
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "conli-marks.jsonl";
    document.body.appendChild(link);
    link.click();
    link.remove();
    saved = true;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-mark]");
    if (button) {
      mark(button);
    } else if (event.target.id === "download-marks") {
      download();
    }
  });
  window.addEventListener("beforeunload", function (event) {
    if (!saved && marks.size > 0) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
  show();
})();
