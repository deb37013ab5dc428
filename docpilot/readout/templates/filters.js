(function () {
  var form = document.getElementById('filters');
  if (!form) { return; }
  form.hidden = false;
  var kind = document.getElementById('f-kind');
  var split = document.getElementById('f-split');
  var failing = document.getElementById('f-failing');
  var count = document.getElementById('f-count');
  var rows = document.querySelectorAll('#records tbody tr');
  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = (!kind.value || row.dataset.kind === kind.value) &&
        (!split.value || row.dataset.split === split.value) &&
        (!failing.checked || row.dataset.failing === '1');
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' records shown';
  }
  [kind, split, failing].forEach(function (el) { el.addEventListener('change', apply); });
  apply();
})();
