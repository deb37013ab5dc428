(function () {
  var form = document.getElementById('filters');
  if (!form) { return; }
  form.hidden = false;
  var tag = document.getElementById('f-tag');
  var disagree = document.getElementById('f-disagree');
  var count = document.getElementById('f-count');
  var rows = document.querySelectorAll('#matrix tbody tr.q');
  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = (!tag.value || row.dataset.tags.indexOf('|' + tag.value + '|') >= 0) &&
        (!disagree.checked || row.dataset.disagree === '1');
      row.hidden = !keep;
      if (!keep) { row.nextElementSibling.hidden = true; row.setAttribute('aria-expanded', 'false'); }
      if (keep) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' questions shown';
  }
  rows.forEach(function (row) {
    row.addEventListener('click', function () {
      var answers = row.nextElementSibling;
      answers.hidden = !answers.hidden;
      row.setAttribute('aria-expanded', answers.hidden ? 'false' : 'true');
    });
  });
  [tag, disagree].forEach(function (el) { el.addEventListener('change', apply); });
  apply();
})();
