// shardproof report: draws every view of report.html from the page's own data element (sp-data,
// schema docs/formats/report_data.md) with Chart.js, which the page inlines. It fetches nothing, keeps
// no state beyond the page, and computes nothing the data do not hold except sums for display.
// Every table cell that shows a number carries the exact value in a data-* attribute.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('sp-data').textContent);
  const PALETTE = ['#0969da', '#cf222e', '#1a7f37', '#8250df', '#bc4c00', '#1b7c83', '#bf3989', '#6e7781',
                   '#4d2d00', '#0550ae', '#a40e26', '#116329'];
  // backward_input / backward_weight: ZB-H1's B and W passes (docs/formats/timeline.md).
  const KIND_COLORS = {forward: '#0969da', backward: '#8250df', backward_input: '#8250df', backward_weight: '#1a7f37',
                       send: '#bc4c00', recv: '#e09b2d', wait: '#bf3989', idle: '#d0d7de', grad_sync: '#1b7c83'};
  const CATEGORY_COLORS = {param: '#0969da', grad: '#8250df', optim: '#1a7f37', activation: '#bc4c00',
                           comm: '#bf3989', workspace: '#1b7c83', io: '#6e7781'};
  const RUN_COLORS = {reference: '#1f2328', parallel: '#0969da', fault: '#cf222e', recovery: '#1a7f37', run: '#0969da'};

  if (typeof Chart !== 'undefined') {
    Chart.defaults.animation = false;
    Chart.defaults.responsive = true;
    Chart.defaults.maintainAspectRatio = false;
    Chart.defaults.font.size = 12;
  }

  // ---- small DOM helpers ----
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return '–';
    const a = Math.abs(b);
    if (a < 1024) return b + ' B';
    if (a < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
    if (a < 1024 * 1024 * 1024) return (b / 1048576).toFixed(2) + ' MiB';
    return (b / 1073741824).toFixed(2) + ' GiB';
  }
  function fmtNum(x, digits) {
    if (x === null || x === undefined) return '–';
    if (typeof x !== 'number') return String(x);
    if (x !== 0 && (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e6)) return x.toExponential(digits === undefined ? 2 : digits);
    return x.toFixed(digits === undefined ? 4 : digits);
  }
  function numCell(text, attrs) { return el('td', Object.assign({class: 'num'}, attrs || {}), text); }
  function table(head, rows, attrs) {
    return el('table', attrs || {}, el('thead', {}, el('tr', {}, head.map((h) => el('th', {}, h)))),
              el('tbody', {}, rows));
  }
  function chartBox(cls) {
    const canvas = el('canvas', {});
    return {box: el('div', {class: 'sp-chart' + (cls ? ' ' + cls : '')}, canvas), canvas: canvas};
  }
  function makeChart(canvas, config) {
    const old = Chart.getChart(canvas);
    if (old) old.destroy();
    return new Chart(canvas, config);
  }
  function select(label, options, onChange, id) {
    const s = el('select', {id: id});
    for (const [value, text] of options) s.append(el('option', {value: value}, text));
    s.addEventListener('change', () => onChange(s.value));
    return {label: el('label', {}, label + ' ', s), select: s};
  }
  function color(i) { return PALETTE[i % PALETTE.length]; }
  function logTick(v) {  // 1e-5, 1e-4, ... and nothing between the decades
    const e = Math.log10(v);
    return Math.abs(e - Math.round(e)) < 1e-9 ? '1e' + Math.round(e) : '';
  }
  function fileList(files) { return files.map((f) => el('code', {}, f)).reduce((acc, x, i) => acc.concat(i ? [', ', x] : [x]), []); }
  // A vertical marker on a linear x axis: a two-point line dataset.
  function marker(label, x, y0, y1, colorText, dash) {
    return {type: 'line', label: label, data: [{x: x, y: y0}, {x: x, y: y1}], borderColor: colorText,
            borderDash: dash || [6, 4], borderWidth: 2, pointRadius: 0, fill: false, spMarker: true};
  }

  // ---- views ----
  const views = {};

  // The free-running parallel run's drift from the reference per step (drift.json, which the gate derives):
  // information, never a criterion; what is judged is each step of the anchored replay (docs/equivalence.md).
  function drift(sec, d) {
    const dr = d.drift;
    sec.append(el('h3', {}, 'Trajectory drift of the free-running ' + dr.run + ' run (reported only)'));
    sec.append(el('p', {}, 'Largest relative difference of any record from the ', dr.reference, ' run, per step; largest ',
                  'loss drift ', el('b', {'data-max-loss-drift': dr.max_loss_drift}, fmtNum(dr.max_loss_drift, 3)),
                  ', final held-out loss ', el('b', {'data-eval-difference': dr.eval_difference}, fmtNum(dr.eval_difference, 3)),
                  ' (relative). Rounding grows along two trajectories that differ in summation order; the gate judges ',
                  'the anchored replay instead, and the reference\'s final state evaluated on this topology within ',
                  el('b', {'data-eval-tolerance': dr.eval_tolerance}, fmtNum(dr.eval_tolerance, 3)), '.'));
    const box = chartBox();
    box.canvas.id = 'divergence-drift';
    sec.append(box.box);
    const points = dr.steps.filter((s) => s.max_rel_diff !== null && s.max_rel_diff > 0)
                           .map((s) => ({x: s.step, y: s.max_rel_diff}));
    const datasets = [{type: 'line', label: 'drift: max relative difference', data: points, borderColor: RUN_COLORS.parallel,
                       backgroundColor: RUN_COLORS.parallel, pointRadius: 2, borderWidth: 2}];
    const t = d.tolerances ? d.tolerances.grad_first : null;
    if (t && dr.steps.length)
      datasets.push({type: 'line', label: 'single-step gradient tolerance (' + fmtNum(t, 2) + ')',
                     data: [{x: dr.steps[0].step, y: t}, {x: dr.steps[dr.steps.length - 1].step, y: t}],
                     borderColor: '#9a6700', borderDash: [3, 3], pointRadius: 0, borderWidth: 1.5, spMarker: true});
    makeChart(box.canvas, {type: 'line', data: {datasets: datasets},
      options: {scales: {x: {type: 'linear', title: {display: true, text: 'step'}, ticks: {stepSize: 1}},
                         y: {type: 'logarithmic', title: {display: true, text: 'max |Δ| / |x| (log)'},
                             ticks: {callback: logTick}}},
                plugins: {title: {display: true, text: dr.run + ' vs ' + dr.reference + ', free-running'}}}});
    sec.append(el('p', {class: 'sp-source'}, 'From ', el('code', {}, d.drift_file), ' (derived by the gate from ',
                  el('code', {}, dr.run + '/checksums.jsonl'), ' and ', el('code', {}, dr.reference + '/checksums.jsonl'),
                  '). A step whose records are all bit-identical has no point on the log axis.'));
  }

  views.gate = function (sec, d) {
    sec.append(el('p', {}, el('span', {class: 'sp-verdict ' + verdictClass(d.verdict),
                                       'data-verdict': d.verdict}, 'Verdict: ' + d.verdict)));
    sec.append(el('p', {class: 'sp-line', 'data-first-divergence': ''}, d.first_divergence));
    const rows = d.criteria.map((c) => el('tr', {class: c.required && !c.passed ? 'fail' : '', 'data-criterion': c.name,
                                                 'data-passed': c.passed, 'data-required': c.required},
      el('td', {}, c.name),
      el('td', {class: !c.required ? 'info' : (c.passed ? 'pass' : 'fail')}, !c.required ? 'info' : (c.passed ? 'pass' : 'FAIL')),
      el('td', {'data-measured': c.measured}, c.measured), el('td', {}, c.threshold), el('td', {}, el('code', {}, c.evidence)),
      el('td', {}, c.detail)));
    sec.append(table(['criterion', 'result', 'measured', 'threshold', 'evidence', 'first problem'], rows,
                     {id: 'gate-criteria'}));
    if (d.notes && d.notes.length) sec.append(el('ul', {}, d.notes.map((n) => el('li', {}, n))));
    sec.append(el('p', {class: 'sp-source'}, 'Derived by ' + d.derived_by + '.'));
  };

  function verdictClass(v) { return v === 'PASS' ? 'pass' : (v === 'UNVERIFIED' ? 'unverified' : 'fail'); }

  // A judged recording's map (judge/steps.jsonl): one table per view, a row per tensor, a column per step; a cell is
  // the tensor's ratio to the view's tolerance at that step (≤ 1 passes), blank where the step was not checked.
  views['judge-map'] = function (sec, d) {
    const unchecked = new Set(d.unchecked);
    const cell = (r, step) => {
      if (unchecked.has(step) || r === null || r === undefined)
        return el('td', {class: 'sp-map-none', 'data-ratio': 'none', title: 'step ' + step + ': not checked'}, '');
      const bad = r === 'inf' || r > 1;
      const shade = bad ? 'sp-map-bad' : (r === 0 ? 'sp-map-exact' : 'sp-map-ok');
      return el('td', {class: shade, 'data-ratio': String(r), title: 'step ' + step + ': ' + (r === 'inf' ? '∞' : fmtNum(r, 3)) +
                       ' × the tolerance'}, r === 'inf' ? '∞' : (r === 0 ? '=' : fmtNum(r, 2)));
    };
    sec.append(el('p', {class: 'sp-source'}, 'Each cell: ‖run − engine‖ / tolerance (gradients: the derived foreign ',
                  'tolerance; update: = where the replay is bit for bit, else a lower bound over 16u). Red: outside; ',
                  'blank: the step was not checked (UNVERIFIED). Loss per step: ',
                  d.loss.map((r, i) => (r === null ? '–' : (r === 'inf' ? '∞' : fmtNum(r, 2)))).join(' ')));
    for (const v of d.views) {
      sec.append(el('h3', {}, v.name));
      const head = ['tensor'].concat(d.steps.map(String));
      const rows = v.rows.map((row) => el('tr', {'data-map-view': v.name, 'data-tensor': row.tensor},
        [el('td', {}, row.tensor)].concat(row.ratios.map((r, i) => cell(r, d.steps[i])))));
      sec.append(table(head, rows, {class: 'sp-map', id: 'judge-map-' + v.name}));
    }
  };

  // A judged PyTorch recording (docs/judge.md): every view's first finding, as the judge derived it.
  views.judge = function (sec, d) {
    sec.append(el('p', {class: 'sp-line', 'data-judge-line': ''}, d.line));
    const rows = d.views.map((v) => el('tr', {'data-view': v.view, 'data-found': v.found, 'data-step': v.found ? v.step : null,
                                              class: v.found ? 'fail' : ''},
      el('td', {}, v.view), el('td', {}, v.found ? 'differs' : 'no difference'), numCell(v.found ? v.step : '–'),
      el('td', {}, v.phase || ''), el('td', {}, v.tensor || ''), el('td', {}, v.ranks && v.ranks.length ? v.ranks.join(', ') : ''),
      el('td', {}, v.detail || ''), el('td', {}, el('code', {}, v.evidence || ''))));
    sec.append(table(['view', 'verdict', 'step', 'phase', 'tensor / group', 'ranks', 'detail', 'evidence'], rows,
                     {id: 'judge-views'}));
  };

  views.divergence = function (sec, d) {
    sec.append(el('p', {}, 'Fault ', el('code', {'data-fault': d.fault}, d.fault), ': ', d.breaks || '',
                  '. Injected at step ', el('b', {'data-injected-step': d.injected_step}, String(d.injected_step)),
                  ', rank ', String(d.injected_rank), '; expected first detector: ', d.expected_view || '?', '.'));
    if (d.line) sec.append(el('p', {class: 'sp-line'}, d.line));
    if (d.views) {
      const rows = d.views.map((v) => el('tr', {'data-view': v.view, 'data-found': v.found, 'data-step': v.found ? v.step : null,
                                                class: v.found ? 'fail' : ''},
        el('td', {}, v.view), el('td', {}, v.recorded ? (v.found ? 'differs' : 'no difference') : 'not recorded'),
        numCell(v.found ? v.step : '–'), el('td', {}, v.found ? v.phase : ''),
        el('td', {}, v.found && v.ranks ? v.ranks.join(', ') : ''), el('td', {}, v.tensor || ''),
        el('td', {}, v.detail || ''), el('td', {}, el('code', {}, v.evidence))));
      sec.append(el('h3', {}, 'What each evidence view saw of the fault'));
      sec.append(table(['view', 'verdict', 'step', 'phase', 'ranks', 'tensor / group', 'detail', 'evidence'], rows,
                       {id: 'divergence-views'}));
    }
    if (d.propagation && d.propagation.length)
      sec.append(el('p', {}, 'Propagation (checksum records out of class per step): ',
                    d.propagation.map((p) => el('span', {'data-prop-step': p.step, 'data-prop-records': p.records},
                                                'step ' + p.step + ': ' + p.records + '  '))));
    // The per-tensor series first, the drift of the free-running run below them.
    const seriesBox = el('div', {});
    sec.append(seriesBox);
    if (d.drift) drift(sec, d);
    if (!d.series || !d.series.length) return;
    seriesBox.append(el('h3', {}, 'Relative L2 difference against the reference, per tensor and step'));
    seriesBox.append(el('p', {}, 'The contract promises ', el('b', {'data-promised': d.promised}, d.promised || '?'),
                  d.promised === 'bitwise-equal' ? ': every changed bit diverges.'
                    : ': each compared step starts from the reference\'s state (an anchored replay) and must stay ' +
                      'within the single-step tolerances (docs/equivalence.md).'));
    const controls = el('div', {class: 'sp-controls'});
    seriesBox.append(controls);
    const box = chartBox('tall');
    box.canvas.id = 'divergence-chart';
    seriesBox.append(box.box);
    const caption = el('p', {class: 'sp-source'});
    seriesBox.append(caption);
    const tableBox = el('div', {});
    seriesBox.append(tableBox);
    let current = {series: 0, phase: 'grad'};
    function draw() {
      const s = d.series[current.series];
      const rows = s.rows.filter((r) => r.phase === current.phase);
      // The first record out of the promised class, as the comparison the gate runs judged it: under a
      // bitwise promise the first changed bit, else the first record outside its tolerance (docs/prove.md).
      const first = s.first_divergent;
      const datasets = [];
      let lo = Infinity, hi = 0;
      // Ranked (issue 33): the TOP tensors with the largest difference each as a line (the first divergent one
      // always), the others merged per layer as the largest difference of the layer's tensors at each step.
      const TOP = 8;
      const peak = (r) => r.rel.reduce((m, v) => (v !== null && v > m ? v : m), 0);
      const isFirstRow = (r) => first && first.row === r.name && first.phase === r.phase;
      const ranked = rows.slice().sort((a, b) => peak(b) - peak(a));
      const shown = ranked.filter((r, i) => i < TOP || isFirstRow(r));
      const layers = new Map();
      ranked.filter((r) => !shown.includes(r)).forEach((r) => {
        const m = /layers\.(\d+)\./.exec(r.name);
        const key = m ? 'layer ' + m[1] : 'embedding, norm and head';
        const g = layers.get(key) || {name: key, n: 0, phase: r.phase, rel: r.rel.map(() => null)};
        g.n += 1;
        r.rel.forEach((v, j) => { if (v !== null && (g.rel[j] === null || v > g.rel[j])) g.rel[j] = v; });
        layers.set(key, g);
      });
      const drawn = shown.map((r, i) => ({name: '#' + (i + 1) + ' ' + r.name, row: r}))
        .concat([...layers.values()].map((g) => ({name: g.name + ': max of ' + g.n + ' tensors', row: g})));
      if (layers.size)
        caption.setAttribute('data-ranked', shown.length + ' of ' + rows.length);
      drawn.forEach((dr, i) => {
        const r = dr.row;
        const points = [];
        r.rel.forEach((v, j) => {
          if (v !== null && v > 0) { points.push({x: s.steps[j], y: v}); lo = Math.min(lo, v); hi = Math.max(hi, v); }
        });
        const isFirst = isFirstRow(r);
        datasets.push({type: 'line', label: dr.name, data: points, borderColor: isFirst ? '#cf222e' : color(i + 1) + '99',
                       backgroundColor: isFirst ? '#cf222e' : color(i + 1), borderWidth: isFirst ? 3 : 1,
                       pointRadius: isFirst ? 3 : 1.5, spanGaps: false});
      });
      // Under a bitwise promise no tolerance applies; otherwise the one the comparison used for this phase.
      const t = s.tolerance ? s.tolerance[current.phase] : null;
      if (t) {
        lo = Math.min(lo, t / 10);
        hi = Math.max(hi, t * 10);
      }
      if (!(hi > 0)) { lo = 1e-8; hi = 1; }
      const steps = s.steps;
      if (t && steps.length)
        datasets.push({type: 'line', label: 'tolerance (' + fmtNum(t, 2) + ')',
                       data: [{x: steps[0], y: t}, {x: steps[steps.length - 1], y: t}], borderColor: '#9a6700',
                       borderDash: [3, 3], pointRadius: 0, borderWidth: 1.5, spMarker: true});
      if (d.injected_step !== undefined && s.role === 'fault')
        datasets.push(marker('fault injected (step ' + d.injected_step + ')', d.injected_step, lo, hi, '#cf222e'));
      if (first && first.phase === current.phase && first.rel > 0)
        datasets.push({type: 'scatter', label: 'first divergent record: step ' + first.step + ', ' + first.tensor,
                       data: [{x: first.step, y: first.rel}], backgroundColor: '#cf222e', borderColor: '#000',
                       pointRadius: 8, pointStyle: 'rectRot', spFirst: true});
      makeChart(box.canvas, {type: 'line', data: {datasets: datasets},
        options: {parsing: true, scales: {x: {type: 'linear', title: {display: true, text: 'step'}, ticks: {stepSize: 1}},
                                          y: {type: 'logarithmic', title: {display: true, text: '|ΔL2| / L2 (log)'},
                                              ticks: {callback: logTick}}},
                  plugins: {legend: {display: drawn.length <= 24, position: 'right'},
                            title: {display: true, text: s.run + ' vs ' + s.against + ': ' + s['class'] + ', phase ' + current.phase}}}});
      caption.replaceChildren('From ', el('code', {}, s.file), ' against ', el('code', {}, s.against_file), ' (' + s.records +
        ' records; rows are ' + s.rows_are + '; promised ' + s.promised + (s.anchored ? ', anchored replay' : '') +
        '): ' + s.summary + '. ' + (s.problems.length ? 'Problems: ' + s.problems.join('; ') + '. ' : '') +
        'A difference of 0 (equal L2) has no point on the log axis. ' +
        (layers.size ? 'Ranked by the largest difference: the ' + shown.length + ' largest of ' + rows.length +
                       ' tensors drawn, the others as the maximum per layer. ' : '') +
        (first ? 'First divergent record: step ' + first.step + ' ' + first.phase + ' ' + first.tensor + ' (relative difference ' +
                 fmtNum(first.rel, 3) + ').' : (s.first_mismatch ? 'No record leaves its tolerance.' : 'Every record is bit-identical.')));
      const trs = rows.map((r) => {
        const max = r.rel.reduce((m, v) => (v !== null && v > m ? v : m), 0);
        return el('tr', {'data-row': r.name, 'data-phase': r.phase, class: r.out.length ? 'fail' : ''},
                  el('td', {}, r.name), numCell(r.first_mismatch === null ? '–' : r.first_mismatch),
                  el('td', {}, r.out.join(', ')), numCell(fmtNum(max, 3), {'data-max-rel': max}));
      });
      tableBox.replaceChildren(table(['tensor', 'first step not bitwise', 'steps out of class', 'max relative difference'],
                                     trs, {id: 'divergence-rows'}));
    }
    const sel = select('run', d.series.map((s, i) => [String(i), s.run + ' vs ' + s.against + ' (' + s['class'] + ')']),
                       (v) => { current.series = Number(v); draw(); }, 'divergence-series');
    const phases = [...new Set(d.series[0].rows.map((r) => r.phase))];
    if (!phases.length) return;
    const psel = select('phase', phases.map((p) => [p, p]), (v) => { current.phase = v; draw(); }, 'divergence-phase');
    if (phases.indexOf('grad') < 0) current.phase = phases[0];
    const f = d.series[0].first_divergent;
    if (f && phases.indexOf(f.phase) >= 0) current.phase = f.phase;
    psel.select.value = current.phase;
    controls.append(sel.label, psel.label);
    draw();
  };

  views.pipeline = function (sec, d) {
    const shape = 'pp ' + d.pp + ' × dp ' + d.dp + ' × tp ' + d.tp + ', schedule ' + d.schedule +
                  (d.schedule === 'interleaved' ? ' (v = ' + d.virtual_stages + ')' : '') + ', m = ' + d.micro_batches +
                  ' micro-batches per dp rank';
    sec.append(el('p', {}, 'Run ', el('b', {}, d.run), ': ', shape, '. Bubble measured (mean over stages) ',
                  el('b', {'data-bubble-measured': d.measured}, fmtNum(d.measured, 3)), ', theory ',
                  el('b', {'data-bubble-theory': d.theory}, fmtNum(d.theory, 3)), ' (Narayanan et al. SC\'21 §2.2).'));
    const stageRows = d.stages.map((s) => el('tr', {'data-stage': s.stage},
      numCell(s.stage), numCell(s.ranks), numCell(fmtNum(s.span_ms, 2)), numCell(fmtNum(s.compute_ms, 2)),
      numCell(fmtNum(s.comm_ms, 2)),
      numCell(fmtNum(s.bubble, 3) + ' (' + fmtNum(s.bubble_min, 3) + '–' + fmtNum(s.bubble_max, 3) + ')', {'data-bubble': s.bubble}),
      numCell(s.model_bubble === null ? '–' : fmtNum(s.model_bubble, 3)), numCell(fmtNum(d.theory, 3))));
    sec.append(table(['stage', 'ranks', 'span ms', 'compute ms', 'p2p ms', 'bubble measured (min–max)', 'stage-cost model',
                      'theory'], stageRows, {id: 'pipeline-stages'}));
    if (d.warnings && d.warnings.length) sec.append(el('ul', {class: 'sp-notes'}, d.warnings.map((w) => el('li', {}, w))));
    if (!d.steps.length) return;
    const controls = el('div', {class: 'sp-controls'});
    sec.append(controls);
    const box = chartBox(d.ranks.length > 8 ? 'tall' : '');
    sec.append(box.box);
    const rankBox = el('div', {});
    sec.append(rankBox);
    if (d.steps_omitted > 0)
      sec.append(el('p', {class: 'sp-notes'}, d.steps_omitted + ' later steps are not drawn (the Gantt keeps at most ' +
                                                  'its first ' + d.max_intervals + ' intervals); the bubble table covers every step.'));
    function draw(step) {
      const kinds = ['forward', 'backward', 'backward_input', 'backward_weight', 'send', 'recv', 'wait', 'idle',
                     'grad_sync'];
      // A rank's dp gradient syncs (grad_sync: started at a unit's last backward, completed later when they
      // overlap it) get their own row under the rank's, so they never hide its compute.
      const rankLabel = (r) => 'rank ' + r.rank + ' · stage ' + r.stage;
      const syncLabel = (r) => 'rank ' + r.rank + ' · dp sync';
      const hasSync = d.ranks.some((r) => r.steps.some((s) => s.intervals.some((iv) => iv[0] === 'grad_sync')));
      const labels = [];
      d.ranks.forEach((r) => { labels.push(rankLabel(r)); if (hasSync) labels.push(syncLabel(r)); });
      const datasets = kinds.map((k) => ({label: k, data: [], backgroundColor: KIND_COLORS[k], grouped: false,
                                          borderWidth: k === 'idle' ? 0 : 0.5, borderColor: '#fff', barPercentage: 0.8,
                                          categoryPercentage: 1.0}));
      const rows = [];
      d.ranks.forEach((r, i) => {
        const st = r.steps.find((s) => s.step === step);
        if (!st) return;
        for (const iv of st.intervals) {
          const k = kinds.indexOf(iv[0]);
          if (k < 0) continue;
          const sync = iv[0] === 'grad_sync';
          datasets[k].data.push({x: [iv[1] / 1000, iv[2] / 1000], y: sync ? syncLabel(r) : rankLabel(r),
                                 mb: sync ? -1 : iv[3], unit: sync ? iv[5] : -1});
        }
        rows.push(el('tr', {'data-rank': r.rank, 'data-step': step},
          numCell(r.rank), numCell(r.stage), numCell(fmtNum(st.span_us / 1000, 2), {'data-span-us': st.span_us}),
          numCell(fmtNum(st.compute_us / 1000, 2), {'data-compute-us': st.compute_us}),
          numCell(fmtNum(st.comm_us / 1000, 2), {'data-comm-us': st.comm_us}),
          numCell(fmtNum(st.idle_us / 1000, 2), {'data-idle-us': st.idle_us}),
          numCell(fmtNum(st.bubble, 3), {'data-bubble': st.bubble})));
      });
      makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
        options: {indexAxis: 'y', scales: {x: {type: 'linear', min: 0, title: {display: true, text: 'ms since the step began on the rank'}},
                                           y: {stacked: false}},
                  plugins: {title: {display: true, text: 'step ' + step + ': forward, backward, send, recv, wait and idle per rank' +
                                                                  (hasSync ? '; each unit\'s dp gradient sync' : '')},
                            tooltip: {callbacks: {label: (c) => c.dataset.label + (c.raw.mb >= 0 ? ' mb ' + c.raw.mb : '') +
                                                                (c.raw.unit >= 0 ? ' unit ' + c.raw.unit : '') + ': ' +
                                                                fmtNum(c.raw.x[0], 2) + '–' + fmtNum(c.raw.x[1], 2) + ' ms'}}}}});
      rankBox.replaceChildren(table(['rank', 'stage', 'span ms', 'compute ms', 'p2p ms', 'idle ms', 'bubble'], rows,
                                    {id: 'pipeline-ranks'}));
    }
    const s = select('step', d.steps.map((x) => [String(x), String(x)]), (v) => draw(Number(v)), 'pipeline-step');
    controls.append(s.label);
    draw(d.steps[0]);
  };

  // Where each rank's step went, by kind (timeline/'s split lines, core/time_split.h): one stacked bar per
  // rank, for the mean of the steps ≥ 1 or for one step, and the same numbers in a table.
  const TIME_COLORS = {gemm: '#0969da', attention: '#8250df', memory_bound: '#1b7c83', comm: '#bc4c00',
                       wait: '#e09b2d', optimizer: '#1a7f37', evidence: '#bf3989', other: '#d0d7de'};
  views.time = function (sec, d) {
    sec.append(el('p', {}, 'Run ', el('b', {}, d.run), ': each rank\'s step by kind, timed at the kernels\' entry ',
                  'points (gemm: the linear layers; attention: all of it, its own products included; memory_bound: ',
                  'norms, SwiGLU, RoPE, cross-entropy, embedding, casts, residual and gradient sums), in the traced ',
                  'communicator (comm: collectives and sends, waiting for the slowest member included; wait: ',
                  'blocking receives and completions) and around the optimizer and evidence; other is the rest of ',
                  'the step. Each part is measured once, so the parts add up to the step.'));
    const steps = [...new Set(d.ranks.flatMap((r) => r.steps.map((s) => s.step)))].sort((a, b) => a - b);
    if (!steps.length) {
      sec.append(el('p', {class: 'sp-notes'}, 'The timeline holds no split line.'));
      return;
    }
    const controls = el('div', {class: 'sp-controls'});
    sec.append(controls);
    const box = chartBox(d.ranks.length > 8 ? 'tall' : 'short');
    sec.append(box.box);
    const tableBox = el('div', {});
    sec.append(tableBox);
    function partsOf(r, which) {  // [step µs, µs per kind] of the mean or of one step; null if the rank lacks it
      if (which === 'mean') return r.steps_averaged > 0 ? [r.mean_step_us, r.mean_us] : null;
      const st = r.steps.find((s) => s.step === Number(which));
      return st ? [st.step_us, st.us] : null;
    }
    function draw(which) {
      const labels = d.ranks.map((r) => 'rank ' + r.rank + ' · stage ' + r.stage);
      const datasets = d.kinds.map((k, i) => ({label: k, backgroundColor: TIME_COLORS[k] || color(i),
        data: d.ranks.map((r) => { const p = partsOf(r, which); return p ? p[1][i] / 1000 : 0; })}));
      makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
        options: {indexAxis: 'y', scales: {x: {stacked: true, title: {display: true, text: 'ms'}}, y: {stacked: true}},
                  plugins: {title: {display: true, text: (which === 'mean' ? 'mean of the steps ≥ 1' : 'step ' + which) +
                                                         ': where each rank\'s step went'}}}});
      const rows = [];
      for (const r of d.ranks) {
        const p = partsOf(r, which);
        if (!p) continue;
        rows.push(el('tr', {'data-rank': r.rank, 'data-step-us': p[0]}, numCell(r.rank), numCell(r.stage),
          numCell(fmtNum(p[0] / 1000, 2)),
          d.kinds.map((k, i) => numCell(fmtNum(p[1][i] / 1000, 2) + ' (' + pct(p[0] > 0 ? p[1][i] / p[0] : null) + ')',
                                        {'data-kind': k, 'data-us': p[1][i]}))));
      }
      tableBox.replaceChildren(table(['rank', 'stage', 'step ms'].concat(d.kinds.map((k) => k + ' ms (share)')), rows,
                                     {id: 'time-ranks'}));
    }
    const s = select('steps', [['mean', 'mean of the steps ≥ 1']].concat(steps.map((x) => [String(x), 'step ' + x])),
                     draw, 'time-step');
    controls.append(s.label);
    draw('mean');
  };

  views.memory = function (sec, d) {
    sec.append(el('p', {}, 'Run ', el('b', {}, d.run), ': measured = predicted on every rank, category and tensor: ',
                  el('b', {'data-ledger-equal': d.equal, class: d.equal ? '' : 'sp-error'}, d.equal ? 'yes' : 'NO'),
                  '; largest peak ', el('b', {'data-max-peak': d.max_peak_bytes}, fmtBytes(d.max_peak_bytes)),
                  d.budget_bytes > 0 ? '; budget ' + fmtBytes(d.budget_bytes) + (d.within_budget ? ' (within)' : ' (EXCEEDED)') : '',
                  '. Peaks are over the whole run (the ledger records no per-step peak).'));
    const cats = d.categories;
    const labels = d.ranks.map((r) => 'rank ' + r.rank + ' ' + r.coords);
    const datasets = [];
    cats.forEach((c) => {
      datasets.push({label: c + ' measured', stack: 'measured', backgroundColor: CATEGORY_COLORS[c] || '#888',
                     data: d.ranks.map((r) => (r.categories[c] ? r.categories[c].measured_peak : 0))});
      datasets.push({label: c + ' predicted', stack: 'predicted', backgroundColor: (CATEGORY_COLORS[c] || '#888') + '66',
                     data: d.ranks.map((r) => (r.categories[c] ? r.categories[c].predicted_peak : 0))});
    });
    const limit = d.device_limit_bytes || (d.budget_bytes > 0 ? d.budget_bytes : null);
    if (limit) datasets.push({type: 'line', label: d.device_limit_bytes ? 'device limit' : 'budget', stack: 'limit',
                              data: d.ranks.map(() => limit), borderColor: '#cf222e', borderDash: [6, 4], pointRadius: 0});
    const box = chartBox('tall');
    sec.append(box.box);
    makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
      options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'peak bytes'},
                                                  ticks: {callback: (v) => fmtBytes(v)}}},
                plugins: {title: {display: true, text: 'peak bytes per rank by category: left bar measured, right bar predicted'},
                          tooltip: {callbacks: {label: (c) => c.dataset.label + ': ' + fmtBytes(c.raw) + ' (' + c.raw + ' B)'}}}}});
    const rows = d.ranks.map((r) => el('tr', {'data-rank': r.rank, class: r.equal ? '' : 'fail'},
      numCell(r.rank), el('td', {}, r.coords),
      cats.map((c) => {
        const x = r.categories[c] || {measured_peak: 0, predicted_peak: 0};
        return numCell(fmtBytes(x.measured_peak) + (x.measured_peak === x.predicted_peak ? '' : ' ≠ ' + fmtBytes(x.predicted_peak)),
                       {'data-category': c, 'data-measured': x.measured_peak, 'data-predicted': x.predicted_peak,
                        title: x.measured_peak + ' B measured, ' + x.predicted_peak + ' B predicted'});
      }),
      numCell(fmtBytes(r.total.measured_peak), {'data-category': 'total', 'data-measured': r.total.measured_peak,
                                                'data-predicted': r.total.predicted_peak}),
      el('td', {}, r.equal ? 'equal' : 'DIFFERS')));
    sec.append(table(['rank', 'coords'].concat(cats.map((c) => c + ' peak')).concat(['total peak', 'measured = predicted']),
                     rows, {id: 'memory-ranks'}));
    const det = el('details', {}, el('summary', {}, 'largest named tensors per rank'));
    for (const r of d.ranks)
      det.append(el('h3', {}, 'rank ' + r.rank),
                 table(['tensor', 'category', 'measured peak', 'predicted peak'],
                       r.largest_tensors.map((t) => el('tr', {}, el('td', {}, t.name), el('td', {}, t.category),
                                                       numCell(fmtBytes(t.measured_peak)), numCell(fmtBytes(t.predicted_peak))))));
    sec.append(det);
  };

  views.traffic = function (sec, d) {
    const controls = el('div', {class: 'sp-controls'});
    sec.append(controls);
    const body = el('div', {});
    sec.append(body);
    let runIndex = 0, phase = 'all';
    function draw() {
      const t = d.runs[runIndex];
      body.replaceChildren();
      body.append(el('p', {}, 'Run ', el('b', {}, t.run), ': ', t.records + ' records; traces consistent: ',
                     el('b', {'data-consistent': t.consistent, class: t.consistent ? '' : 'sp-error'}, t.consistent ? 'yes' : 'NO (' + t.mismatches + ')'),
                     '; traced = predicted in every rank × step × group × phase cell: ',
                     t.prediction_found || !t.prediction_elsewhere
                       ? el('b', {'data-matches-prediction': t.matches_prediction, class: t.matches_prediction ? '' : 'sp-error'},
                            t.prediction_found ? (t.matches_prediction ? 'yes' : 'NO (' + t.prediction_mismatches + ' of ' + t.prediction_cells + ' cells)')
                                               : 'no prediction')
                       : el('span', {'data-prediction-elsewhere': t.prediction_elsewhere}, 'compared by ' + t.prediction_elsewhere),
                     '.'));
      const firsts = t.first_mismatches.concat(t.first_prediction_mismatches);
      if (firsts.length) body.append(el('ul', {class: 'sp-view-problems'}, firsts.map((m) => el('li', {}, m))));
      // Bytes per step, stacked by group, traced next to predicted.
      const cells = t.cells.filter((c) => phase === 'all' || c.phase === phase);
      const steps = [...new Set(cells.map((c) => c.step))].sort((a, b) => a - b);
      const datasets = [];
      t.groups.forEach((g, i) => {
        const traced = steps.map((s) => cells.filter((c) => c.group === g && c.step === s).reduce((a, c) => a + c.bytes, 0));
        const predicted = steps.map((s) => cells.filter((c) => c.group === g && c.step === s && c.predicted_bytes !== null)
                                                .reduce((a, c) => a + c.predicted_bytes, 0));
        if (traced.some((x) => x > 0)) datasets.push({label: g + ' traced', stack: 'traced', backgroundColor: color(i), data: traced});
        if (predicted.some((x) => x > 0)) datasets.push({label: g + ' predicted', stack: 'predicted', backgroundColor: color(i) + '66', data: predicted});
      });
      const box = chartBox('tall');
      body.append(box.box);
      const lastOf = new Map(cells.map((c) => [c.step, c.last_step]));
      const stepLabel = (s) => (s < 0 ? 'setup/eval (−1)' : lastOf.get(s) > s ? 'steps ' + s + '–' + lastOf.get(s) : 'step ' + s);
      makeChart(box.canvas, {type: 'bar', data: {labels: steps.map(stepLabel), datasets: datasets},
        options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'payload bytes (all members)'},
                                                    ticks: {callback: (v) => fmtBytes(v)}}},
                  plugins: {title: {display: true, text: 'bytes per step by group (' + (phase === 'all' ? 'every phase' : 'phase ' + phase) +
                                                         '): left bar traced, right bar predicted'},
                            tooltip: {callbacks: {label: (c) => c.dataset.label + ': ' + fmtBytes(c.raw) + ' (' + c.raw + ' B)'}}}}});
      // Group × phase over every step.
      const rows = t.totals.map((s) => {
        const differs = s.predicted_bytes !== null && (s.predicted_bytes !== s.bytes || s.predicted_ops !== s.ops);
        return el('tr', {'data-group': s.group, 'data-phase': s.phase, class: differs ? 'fail' : ''},
          el('td', {}, s.group), el('td', {}, s.phase), numCell(s.ops, {'data-ops': s.ops}),
          numCell(fmtBytes(s.bytes), {'data-bytes': s.bytes, title: s.bytes + ' B'}),
          numCell(s.predicted_ops === null ? 'not predicted' : s.predicted_ops, {'data-predicted-ops': s.predicted_ops}),
          numCell(s.predicted_bytes === null ? 'not predicted' : fmtBytes(s.predicted_bytes),
                  {'data-predicted-bytes': s.predicted_bytes, title: s.predicted_bytes === null ? '' : s.predicted_bytes + ' B'}));
      });
      body.append(el('h3', {}, 'Per group and phase, summed over every step'));
      body.append(table(['group', 'phase', 'ops traced', 'bytes traced', 'ops predicted', 'bytes predicted'], rows,
                        {id: 'traffic-groups'}));
      // Rank × rank.
      const m = t.matrix;
      if (m === null) {
        body.append(el('p', {class: 'sp-notes'}, 'The rank × rank matrix is left out for this many ranks (docs/report.md).'));
        return;
      }
      let max = 1;
      for (let i = 0; i < m.world; i++) for (let j = 0; j < m.world; j++) max = Math.max(max, m.p2p[i][j] + m.collective[i][j]);
      const mrows = [];
      for (let i = 0; i < m.world; i++) {
        const cellsRow = [el('th', {}, 'rank ' + i)];
        for (let j = 0; j < m.world; j++) {
          const p = m.p2p[i][j], c = m.collective[i][j], v = p + c;
          cellsRow.push(el('td', {'data-from': i, 'data-to': j, 'data-p2p': p, 'data-collective': c,
                                  title: 'p2p ' + p + ' B, collective ' + c + ' B',
                                  style: 'background: rgba(9,105,218,' + (0.08 + 0.6 * v / max).toFixed(3) + ')'},
                                 v ? fmtBytes(v) : '·'));
        }
        mrows.push(el('tr', {}, cellsRow));
      }
      body.append(el('h3', {}, 'Who sent how much: sender (row) × receiver (column), whole run'));
      body.append(el('table', {class: 'sp-matrix', id: 'traffic-matrix'},
                     el('thead', {}, el('tr', {}, el('th', {}, 'from \\ to'),
                                        [...Array(m.world).keys()].map((j) => el('th', {}, 'rank ' + j)))),
                     el('tbody', {}, mrows)));
      body.append(el('p', {class: 'sp-source'}, 'p2p bytes go from the sender to its receiver exactly (send and isend records); ' +
                     'a rank\'s collective wire bytes (the ring volume the planner models: 2(n−1)/n of the payload for an all-reduce) ' +
                     'are split evenly over the other members of the group, since the trace does not record MPI\'s own routing.'));
    }
    if (d.runs.length > 1) {
      const s = select('run', d.runs.map((r, i) => [String(i), r.run]), (v) => { runIndex = Number(v); draw(); }, 'traffic-run');
      controls.append(s.label);
    }
    const phases = ['all'].concat([...new Set(d.runs.flatMap((r) => r.cells.map((c) => c.phase)))]);
    const p = select('phase', phases.map((x) => [x, x]), (v) => { phase = v; draw(); }, 'traffic-phase');
    controls.append(p.label);
    draw();
  };

  views.curves = function (sec, d) {
    const marks = d.marks || {};
    function lineChart(title, key, yTitle, withEval) {
      const datasets = [];
      let lo = Infinity, hi = -Infinity;
      d.runs.forEach((r, i) => {
        const c = RUN_COLORS[r.run] || color(i);
        const points = [];
        r.step.forEach((s, j) => {
          const y = r[key][j];
          if (y !== null) { points.push({x: s, y: y}); lo = Math.min(lo, y); hi = Math.max(hi, y); }
        });
        datasets.push({type: 'line', label: r.run, data: points, borderColor: c, backgroundColor: c, pointRadius: 2,
                       borderWidth: r.run === 'fault' ? 2.5 : 1.5, borderDash: r.run === 'recovery' ? [5, 3] : undefined});
        if (withEval && r.eval.length) {
          const ev = r.eval.map((e) => ({x: e.step, y: e.eval_loss}));
          ev.forEach((p) => { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); });
          datasets.push({type: 'scatter', label: r.run + ' eval', data: ev, backgroundColor: c, borderColor: '#fff',
                         pointStyle: 'rectRot', pointRadius: 6});
        }
      });
      // Bit-identical series hide behind each other: say so, and dash the later one (issue 33).
      const overlaps = [];
      const lines = datasets.filter((ds) => ds.type === 'line');
      lines.forEach((ds, i) => {
        const same = lines.slice(0, i).find((o) => o.data.length > 0 && o.data.length === ds.data.length &&
                                                    o.data.every((p, j) => p.x === ds.data[j].x && p.y === ds.data[j].y));
        if (!same) return;
        overlaps.push(ds.label + ' = ' + same.label);
        ds.label += ' (= ' + same.label + ' bit for bit: overlapping)';
        ds.borderDash = [6, 4];
      });
      if (isFinite(lo)) {
        if (marks.fault_step !== undefined) datasets.push(marker('fault step ' + marks.fault_step, marks.fault_step, lo, hi, '#cf222e'));
        if (marks.checkpoint_step !== undefined)
          datasets.push(marker('checkpoint step ' + marks.checkpoint_step, marks.checkpoint_step, lo, hi, '#1a7f37', [2, 3]));
      }
      const box = chartBox('short');
      makeChart(box.canvas, {type: 'line', data: {datasets: datasets},
        options: {scales: {x: {type: 'linear', title: {display: true, text: 'step'}}, y: {title: {display: true, text: yTitle}}},
                  plugins: {title: {display: true, text: title}}}});
      if (!overlaps.length) return box.box;
      return el('div', {}, box.box, el('p', {class: 'sp-notes', 'data-overlap': overlaps.join('; ')},
                                       'Overlapping, bit for bit: ' + overlaps.join('; ') + ' (one line hides the other; the later is dashed).'));
    }
    const strided = d.runs.filter((r) => r.every_kth_step > 1);
    if (strided.length)
      sec.append(el('p', {class: 'sp-notes'}, strided.map((r) => r.run + ': every ' + r.every_kth_step + 'th step').join('; ') +
                                            ' (and the last) is drawn; metrics.jsonl holds every step.'));
    sec.append(lineChart('training loss, and eval loss (diamonds; step −1 = before training)', 'loss', 'loss (nats)', true));
    sec.append(el('div', {class: 'sp-grid'}, lineChart('tokens/s (reported only: speed proves nothing)', 'tokens_per_s', 'tokens/s', false),
                  lineChart('gradient norm (before clipping)', 'grad_norm', 'L2 norm', false)));
    const rows = d.runs.map((r) => {
      const n = r.step.length;
      const lastEval = r.eval.length ? r.eval[r.eval.length - 1] : null;
      const tps = r.tokens_per_s.filter((x, j) => x !== null && r.step[j] >= 1).slice().sort((a, b) => a - b);
      return el('tr', {'data-run': r.run},
        el('td', {}, r.run), numCell(n), numCell(n ? fmtNum(r.loss[n - 1], 6) : '–', {'data-final-loss': n ? r.loss[n - 1] : ''}),
        numCell(lastEval ? fmtNum(lastEval.eval_loss, 6) + ' (step ' + lastEval.step + ')' : '–',
                {'data-final-eval': lastEval ? lastEval.eval_loss : ''}),
        numCell(tps.length ? fmtNum(tps[Math.floor(tps.length / 2)], 0) : '–'), el('td', {}, el('code', {}, r.file)));
    });
    sec.append(table(['run', 'steps', 'final loss', 'last eval loss', 'median tokens/s (steps ≥ 1)', 'file'], rows,
                     {id: 'curves-runs'}));
  };

  views.checkpoints = function (sec, d) {
    for (const r of d.runs) {
      sec.append(el('h3', {}, r.run + ': ', el('code', {}, r.dir), r.latest === null ? ' (no LATEST)' : ' · LATEST = step ' + r.latest));
      if (!r.checkpoints.length) { sec.append(el('p', {class: 'sp-notes'}, 'no checkpoint')); continue; }
      const rows = r.checkpoints.map((c) => el('tr', {'data-run': r.run, 'data-step': c.step, 'data-verified': c.verified,
                                                      class: c.verified ? '' : 'fail'},
        numCell(c.step), el('td', {class: c.verified ? 'pass' : 'fail'}, c.verified ? 'verified' : 'FAILS'),
        numCell(c.shards === undefined ? '–' : c.shards), numCell(c.bytes === undefined ? '–' : fmtBytes(c.bytes), {'data-bytes': c.bytes}),
        numCell(c.optimizer_steps === undefined ? '–' : c.optimizer_steps), el('td', {}, c.problem)));
      sec.append(table(['step (resumes at)', 'verification', 'shards', 'bytes', 'optimizer steps', 'problem'], rows,
                       {class: 'sp-ckpt'}));
      const extra = [].concat(r.leftovers.map((x) => 'leftover ' + x), r.refused.map((x) => 'refused ' + x), r.unknown.map((x) => 'unknown ' + x));
      if (extra.length) sec.append(el('p', {class: 'sp-notes'}, extra.join('; ')));
    }
    const res = d.resume || {};
    if (res.run)
      sec.append(el('p', {'data-resume-from': res.checkpoint_step, 'data-resume-traced': res.first_traced_step},
                    'Resume point: ', el('b', {}, res.run), ' resumed from ', res.from, '\'s step-' + res.checkpoint_step +
                    ' checkpoint; its own trace starts at step ' + (res.first_traced_step === null ? '?' : res.first_traced_step) +
                    (res.first_traced_step === res.checkpoint_step ? ' (it resumed, it did not restart).' : ' (NOT the checkpoint step).')));
    else if (d.runs.length === 1 && d.runs[0].latest !== null)
      sec.append(el('p', {}, 'A restart of this run resumes at step ' + d.runs[0].latest + ' (LATEST).'));
  };

  views.compare = function (sec, d) {
    const rows = d.rows;
    const ok = rows.filter((r) => !r.error);
    sec.append(el('p', {}, 'Strategies: ', el('code', {}, d.strategies), '; every row ok: ',
                  el('b', {'data-compare-ok': d.ok, class: d.ok ? '' : 'sp-error'}, d.ok ? 'yes' : 'NO'), '.'));
    const trs = rows.map((r) => {
      if (r.error) return el('tr', {'data-label': r.label, class: 'fail'}, el('td', {}, r.label), numCell(r.world),
                             el('td', {colspan: 8}, 'ERROR: ' + r.error));
      const eq = r.equivalence;
      const b = r.bubble;
      return el('tr', {'data-label': r.label, class: r.ok ? '' : 'fail'},
        el('td', {}, r.label), numCell(r.world),
        el('td', {}, 'dp ' + r.dp + ' · tp ' + r.tp + ' · pp ' + r.pp + ' · zero ' + r.zero + (r.pp > 1 ? ' · ' + r.schedule : '')),
        el('td', {'data-class': eq['class']}, eq['class']),
        numCell(eq['class'] === 'reference' ? '–' : fmtNum(eq.max_rel_loss, 2) + ' / ' + fmtNum(eq.max_rel_param, 2) + ' / ' +
                fmtNum(Math.max(eq.max_rel_grad_first_step, eq.max_rel_grad_later), 2)),
        numCell(fmtNum(r.time.step_s_median, 4), {'data-step-s': r.time.step_s_median}),
        numCell(fmtNum(r.time.ratio_vs_dp1, 2), {'data-ratio': r.time.ratio_vs_dp1}),
        numCell(b ? fmtNum(b.measured, 3) + ' / ' + fmtNum(b.theory, 3) : '–', {'data-bubble': b ? b.measured : ''}),
        numCell(fmtBytes(r.memory.max_peak_bytes), {'data-max-peak': r.memory.max_peak_bytes}),
        el('td', {class: r.ok ? 'pass' : 'fail'}, r.ok ? 'ok' : 'FAIL'));
    });
    sec.append(table(['strategy', 'world', 'grid', 'equivalence vs dp1', 'max rel diff loss / param / grad', 'step s (median)',
                      '× dp1', 'bubble measured / theory', 'max peak memory', 'verdict'], trs, {id: 'compare-rows'}));
    const labels = ok.map((r) => r.label);
    const grid = el('div', {class: 'sp-grid'});
    sec.append(grid);
    function chart(title, datasets, yTitle, opts) {
      const box = chartBox();
      grid.append(box.box);
      makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
        options: Object.assign({plugins: {title: {display: true, text: title}}}, opts || {},
                               {scales: Object.assign({x: {stacked: !!(opts && opts.stacked)},
                                                       y: {stacked: !!(opts && opts.stacked), title: {display: true, text: yTitle},
                                                           type: opts && opts.log ? 'logarithmic' : 'linear',
                                                           ticks: opts && opts.bytes ? {callback: (v) => fmtBytes(v)} :
                                                                  (opts && opts.log ? {callback: logTick} : {})}})})});
    }
    chart('step time split (median over steps ≥ 1; rank 0)', [
      {label: 'forward + backward', backgroundColor: '#0969da', data: ok.map((r) => r.time.compute_s_median_rank0)},
      {label: 'rest of the step (sync, optimizer, evidence)', backgroundColor: '#bc4c00',
       data: ok.map((r) => Math.max(0, r.time.step_s_median - r.time.compute_s_median_rank0))}], 'seconds', {stacked: true});
    const axes = [...new Set(ok.flatMap((r) => Object.keys(r.traffic.bytes_per_step_by_axis)))];
    const bytesSets = [];
    axes.forEach((a, i) => {
      bytesSets.push({label: a + ' traced', stack: 'traced', backgroundColor: color(i),
                      data: ok.map((r) => (r.traffic.bytes_per_step_by_axis[a] || {traced: 0}).traced)});
      bytesSets.push({label: a + ' predicted', stack: 'predicted', backgroundColor: color(i) + '66',
                      data: ok.map((r) => { const x = r.traffic.bytes_per_step_by_axis[a]; return x && x.predicted !== null ? x.predicted : 0; })});
    });
    chart('bytes per training step by axis: traced (left) vs predicted (right)', bytesSets, 'bytes', {stacked: true, bytes: true});
    const cats = [...new Set(ok.flatMap((r) => Object.keys(r.peak_by_category)))];
    chart('peak memory per category (largest rank)', cats.map((c) => ({label: c, backgroundColor: CATEGORY_COLORS[c] || '#888',
      data: ok.map((r) => (r.peak_by_category[c] ? r.peak_by_category[c].measured_peak : 0))})), 'bytes', {stacked: true, bytes: true});
    const notRef = ok.filter((r) => r.equivalence['class'] !== 'reference');
    const relSets = [['loss', 'max_rel_loss'], ['param', 'max_rel_param'], ['grad', 'max_rel_grad_later']].map(([name, key], i) => ({
      label: name, backgroundColor: color(i),
      data: ok.map((r) => (r.equivalence['class'] === 'reference' || !(r.equivalence[key] > 0) ? null :
                           (key === 'max_rel_grad_later' ? Math.max(r.equivalence.max_rel_grad_first_step, r.equivalence.max_rel_grad_later) : r.equivalence[key])))}));
    if (notRef.some((r) => r.equivalence['class'] !== 'bitwise-equal'))
      chart('max relative difference vs dp1 (bitwise-equal rows have none; log)', relSets, 'relative difference', {log: true});
    else grid.append(el('p', {}, 'Every strategy is bitwise-equal to dp1: no relative difference to draw.'));
    const piped = ok.filter((r) => r.bubble && r.pp > 1);
    if (piped.length) {
      const box = chartBox();
      grid.append(box.box);
      makeChart(box.canvas, {type: 'bar', data: {labels: piped.map((r) => r.label), datasets: [
        {label: 'measured', backgroundColor: '#0969da', data: piped.map((r) => r.bubble.measured)},
        {label: 'theory', backgroundColor: '#6e7781', data: piped.map((r) => r.bubble.theory)}]},
        options: {plugins: {title: {display: true, text: 'pipeline bubble: measured vs theory'}},
                  scales: {y: {min: 0, title: {display: true, text: 'fraction of the span'}}}}});
    }
  };

  // ---- plan views (kind "plan": a `shardproof plan --out` directory; docs/plan.md §8) ----
  const AXIS_COLORS = {dp: '#0969da', tp: '#8250df', pp: '#bc4c00', world: '#1b7c83', ps: '#6e7781'};
  function pct(x) { return x === null || x === undefined ? '–' : (100 * x).toFixed(1) + ' %'; }
  function planInputs(i) {
    const st = i.strategy;
    return el('p', {}, 'Model ', el('b', {}, i.model), i.params ? ' (' + fmtNum(i.params / 1e9, 3) + ' billion parameters)' : '',
              ' on ', el('b', {}, i.cluster), ' (' + i.nodes + ' nodes × ' + i.devices_per_node + ' devices)',
              st ? [', strategy ', el('code', {'data-strategy': st.name}, st.name)] : '',
              ', global batch ' + i.global_batch + ' sequences of ' + i.seq_len + ' tokens; GEMMs at ' +
              fmtNum(100 * i.efficiency, 0) + ' % of the ' + i.dtype + ' peak.');
  }
  function assumptions(sec, list) {
    const det = el('details', {}, el('summary', {}, 'assumptions (' + list.length + ')'));
    det.append(el('ul', {}, list.map((a) => el('li', {}, a))));
    sec.append(det);
  }

  views['plan-time'] = function (sec, d) {
    const s = d.step, p = d.pipeline;
    sec.append(planInputs(d.inputs));
    sec.append(el('p', {}, 'Step ', el('b', {'data-step-s': s.seconds}, fmtNum(s.seconds, 4) + ' s'), ', ',
                  el('b', {'data-tokens-per-s': s.tokens_per_second}, fmtNum(s.tokens_per_second, 0)), ' tokens/s, MFU ',
                  el('b', {'data-mfu': s.mfu}, pct(s.mfu)), ', HFU ', el('b', {'data-hfu': s.hfu}, pct(s.hfu)),
                  '; dominant communication: ', el('b', {}, s.dominant_comm), '. Pipeline bubble simulated ',
                  el('b', {'data-bubble-simulated': p.bubble_fraction}, pct(p.bubble_fraction)), ', closed form ',
                  el('b', {'data-bubble-closed': p.closed_form_bubble_fraction}, pct(p.closed_form_bubble_fraction)), '.'));
    // The step is the simulated pipeline plus what follows it; inside the pipeline the busiest stage computes
    // (GEMMs), runs its in-pass collectives, and waits for the rest.
    const wait = Math.max(0, p.simulated_seconds - s.compute_seconds - s.pass_comm_seconds);
    const parts = [['GEMMs (busiest stage)', s.compute_seconds, '#0969da'],
                   ['collectives inside the passes', s.pass_comm_seconds, '#8250df'],
                   ['pipeline wait and transfers', wait, '#d0d7de'],
                   ['after the pipeline (gradient sync, optimizer)', s.after_pipeline_seconds, '#bc4c00']];
    const box = chartBox('short');
    sec.append(box.box);
    makeChart(box.canvas, {type: 'bar', data: {labels: ['step'], datasets: parts.map(([label, v, c]) => ({label: label, data: [v], backgroundColor: c}))},
      options: {indexAxis: 'y', scales: {x: {stacked: true, title: {display: true, text: 'seconds'}}, y: {stacked: true}},
                plugins: {title: {display: true, text: 'one training step, split (seconds)'}}}});
    sec.append(table(['part', 'seconds', 'share of the step'], parts.map(([label, v]) => el('tr', {'data-part': label},
      el('td', {}, label), numCell(fmtNum(v, 4), {'data-seconds': v}), numCell(pct(s.seconds > 0 ? v / s.seconds : null)))),
      {id: 'plan-time-parts'}));
    assumptions(sec, d.assumptions);
  };

  views['plan-memory'] = function (sec, d) {
    sec.append(el('p', {}, 'Device memory ', el('b', {'data-limit': d.limit_bytes}, fmtBytes(d.limit_bytes)), '; largest peak ',
                  el('b', {'data-peak': d.peak_bytes}, fmtBytes(d.peak_bytes)), ' on rank ' + d.largest_rank + ': ',
                  el('b', {'data-fits': d.fits, class: d.fits ? '' : 'sp-error'}, d.fits ? 'fits' :
                     'DOES NOT FIT (' + d.largest_category + ' is the largest category)'),
                  '. One rank per class of ranks with the same memory (the ledger model, plan/ledger_model.h).'));
    const cats = Object.keys(CATEGORY_COLORS).filter((c) => d.ranks.some((r) => r.by_category[c] > 0));
    const labels = d.ranks.map((r) => 'rank ' + r.rank + ' ' + r.coords);
    const datasets = cats.map((c) => ({label: c, backgroundColor: CATEGORY_COLORS[c], data: d.ranks.map((r) => r.by_category[c] || 0)}));
    datasets.push({type: 'line', label: 'device limit', data: d.ranks.map(() => d.limit_bytes), borderColor: '#cf222e',
                   borderDash: [6, 4], pointRadius: 0});
    const box = chartBox(d.ranks.length > 8 ? 'tall' : '');
    sec.append(box.box);
    makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
      options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'peak bytes'}, ticks: {callback: (v) => fmtBytes(v)}}},
                plugins: {title: {display: true, text: 'predicted peak bytes per rank by category, against the device'},
                          tooltip: {callbacks: {label: (c) => c.dataset.label + ': ' + fmtBytes(c.raw)}}}}});
    sec.append(table(['rank', 'coords'].concat(cats).concat(['peak']), d.ranks.map((r) => el('tr', {'data-rank': r.rank,
      class: r.peak_bytes > d.limit_bytes ? 'fail' : ''}, numCell(r.rank), el('td', {}, r.coords),
      cats.map((c) => numCell(fmtBytes(r.by_category[c] || 0), {'data-category': c, 'data-bytes': r.by_category[c] || 0})),
      numCell(fmtBytes(r.peak_bytes), {'data-category': 'peak', 'data-bytes': r.peak_bytes}))), {id: 'plan-memory-ranks'}));
  };

  views['plan-traffic'] = function (sec, d) {
    sec.append(el('p', {}, 'Placement: ', el('b', {}, d.grid), '. Each group priced on the link it crosses (α–β, planner/collective_time.h).'));
    if (d.warnings.length)
      sec.append(el('ul', {class: 'sp-view-problems', id: 'plan-warnings'}, d.warnings.map((w) => el('li', {'data-warning': ''}, w))));
    sec.append(table(['axis', 'group', 'link', 'GB/s per hop', 'latency µs', 'crosses nodes', 'why'],
      Object.entries(d.links).map(([axis, l]) => el('tr', {'data-axis': axis, 'data-link': l.link},
        el('td', {}, axis), numCell(l.group_size), el('td', {}, l.link), numCell(fmtNum(l.bandwidth_gbytes_per_s, 4)),
        numCell(fmtNum(l.latency_us, 3)), el('td', {}, l.crosses_nodes ? 'yes' : 'no'), el('td', {}, l.description))),
      {id: 'plan-links'}));
    const labels = d.traffic.map((t) => t.axis + ' ' + t.phase + ' ' + t.op);
    const grid = el('div', {class: 'sp-grid'});
    sec.append(grid);
    [['bytes per step (busiest group of each axis, phase and op)', 'bytes', (v) => fmtBytes(v)],
     ['seconds per step on its link', 'seconds', undefined]].forEach(([title, key, tick]) => {
      const box = chartBox();
      grid.append(box.box);
      makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: [{label: key, data: d.traffic.map((t) => t[key]),
        backgroundColor: d.traffic.map((t) => AXIS_COLORS[t.axis] || '#888')}]},
        options: {indexAxis: 'y', plugins: {title: {display: true, text: title}, legend: {display: false}},
                  scales: {x: {title: {display: true, text: key}, ticks: tick ? {callback: tick} : {}}}}});
    });
    sec.append(table(['axis', 'phase', 'op', 'ops', 'bytes', 'seconds', 'link'], d.traffic.map((t) =>
      el('tr', {'data-cell': t.axis + '/' + t.phase + '/' + t.op}, el('td', {}, t.axis), el('td', {}, t.phase), el('td', {}, t.op),
         numCell(t.ops), numCell(fmtBytes(t.bytes), {'data-bytes': t.bytes}), numCell(fmtNum(t.seconds, 4), {'data-seconds': t.seconds}),
         el('td', {}, t.link))), {id: 'plan-traffic-cells'}));
  };

  views['plan-pipeline'] = function (sec, d) {
    sec.append(el('p', {}, 'Schedule ', el('b', {}, d.schedule), ' on pp ' + d.pp + (d.virtual_stages > 1 ? ' (v = ' + d.virtual_stages + ')' : '') +
                  ', m = ' + d.micro_batches + ' micro-batches per dp rank: simulated over the engine\'s own action lists ' +
                  '(planner/pipeline_sim.h), ', el('b', {'data-simulated-s': d.simulated_seconds}, fmtNum(d.simulated_seconds, 4) + ' s'),
                  ', bubble ', el('b', {'data-bubble': d.bubble_fraction}, pct(d.bubble_fraction)), ' (closed form (p−1)/(v·m+p−1) ',
                  pct(d.closed_form_bubble_fraction), '); one transfer ' + fmtNum(d.transfer_seconds, 3) + ' s.'));
    if (d.actions_omitted > 0)
      sec.append(el('p', {class: 'sp-notes'}, d.actions_omitted + ' later actions are not drawn (plan.json keeps the first ' +
                                                 d.actions.length + ').'));
    const labels = Array.from({length: d.pp}, (_, r) => 'pp rank ' + r);
    const datasets = ['forward', 'backward', 'backward_weight'].map((k) => ({label: k, backgroundColor: KIND_COLORS[k], grouped: false,
      borderWidth: 0.5, borderColor: '#fff', barPercentage: 0.8, categoryPercentage: 1.0,
      data: d.actions.filter((a) => a[3] === k).map((a) => ({x: [a[4], a[5]], y: labels[a[0]], mb: a[2], v: a[1]}))}));
    const box = chartBox(d.pp > 8 ? 'tall' : '');
    sec.append(box.box);
    makeChart(box.canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
      options: {indexAxis: 'y', scales: {x: {type: 'linear', min: 0, title: {display: true, text: 'seconds since the step began'}}},
                plugins: {title: {display: true, text: 'the simulated pipeline: forward and backward of every micro-batch per stage'},
                          tooltip: {callbacks: {label: (c) => c.dataset.label + ' mb ' + c.raw.mb + (d.virtual_stages > 1 ? ' chunk ' + c.raw.v : '') +
                                                              ': ' + fmtNum(c.raw.x[0], 3) + '–' + fmtNum(c.raw.x[1], 3) + ' s'}}}}});
    sec.append(table(['chunk', 'pp rank', 'forward s (one micro-batch)', 'backward s'], d.chunk_seconds.map((c) =>
      el('tr', {'data-chunk': c.chunk}, numCell(c.chunk), numCell(c.pp_rank), numCell(fmtNum(c.forward, 4), {'data-forward': c.forward}),
         numCell(fmtNum(c.backward, 4), {'data-backward': c.backward}))), {id: 'plan-chunks'}));
  };

  views['plan-search'] = function (sec, d) {
    sec.append(planInputs(d.inputs));
    sec.append(el('p', {}, el('b', {'data-enumerated': d.enumerated}, d.enumerated), ' strategies enumerated: ',
                  el('b', {'data-ranked': d.ranked_total}, d.ranked_total), ' ranked by step time, ',
                  el('b', {'data-excluded': d.excluded_total}, d.excluded_total), ' excluded (' +
                  Object.entries(d.excluded_by_kind).map(([k, n]) => k.replace(/_/g, ' ') + ' ' + n).join(', ') + ').' +
                  (d.ranked.length < d.ranked_total ? ' The best ' + d.ranked.length + ' are shown.' : '')));
    const top = d.ranked.slice(0, 20);
    const box = chartBox(top.length > 10 ? 'tall' : '');
    sec.append(box.box);
    makeChart(box.canvas, {type: 'bar', data: {labels: top.map((r) => r.strategy.name), datasets: [
      {label: 'step seconds', data: top.map((r) => r.time.step_seconds), backgroundColor: '#0969da'}]},
      options: {indexAxis: 'y', plugins: {title: {display: true, text: 'step time of the best ' + top.length + ' strategies'}, legend: {display: false}},
                scales: {x: {title: {display: true, text: 'seconds'}}, y: {ticks: {autoSkip: false}}}}});
    sec.append(table(['rank', 'strategy', 'step s', 'tokens/s', 'MFU', 'peak / device', 'dominant communication'], d.ranked.map((r) =>
      el('tr', {'data-rank': r.rank, 'data-strategy': r.strategy.name}, numCell(r.rank), el('td', {}, el('code', {}, r.strategy.name)),
         numCell(fmtNum(r.time.step_seconds, 4), {'data-step-s': r.time.step_seconds}),
         numCell(fmtNum(r.time.detail.tokens_per_second, 0)), numCell(pct(r.time.detail.mfu)),
         numCell(fmtBytes(r.memory.peak_bytes) + ' / ' + fmtBytes(r.memory.limit_bytes), {'data-peak': r.memory.peak_bytes}),
         el('td', {}, r.time.detail.dominant))), {id: 'plan-ranked'}));
    sec.append(el('h3', {}, 'Why the others are excluded'));
    sec.append(table(['kind', 'rule', 'strategies', 'example'], d.excluded_by_rule.map((x) =>
      el('tr', {'data-kind': x.kind}, el('td', {}, x.kind), el('td', {}, x.rule + '…'), numCell(x.count, {'data-count': x.count}),
         el('td', {}, x.example))), {id: 'plan-excluded'}));
    assumptions(sec, d.assumptions);
  };

  // ---- page ----
  const nav = document.getElementById('sp-nav');
  const main = document.getElementById('sp-views');
  if (data.summary) {
    const s = data.summary;
    const header = document.getElementById('sp-header');
    if (s.verdict) header.append(el('p', {}, el('span', {class: 'sp-verdict ' + verdictClass(s.verdict),
                                                         'data-summary-verdict': s.verdict}, 'Verdict: ' + s.verdict)));
    const facts = Object.entries(s).filter(([k, v]) => k !== 'verdict' && v !== null && v !== '' && typeof v !== 'object')
                                   .map(([k, v]) => el('span', {'data-summary': k}, k.replace(/_/g, ' ') + ' ',
                                                       el('b', {}, k === 'contract_hash' ? String(v).slice(0, 16)
                                                                   : typeof v === 'number' && !Number.isInteger(v) ? fmtNum(v, 4) : String(v))));
    header.append(el('p', {class: 'sp-kind'}, facts.reduce((acc, x, i) => acc.concat(i ? [' · ', x] : [x]), [])));
  }
  if (data.lab) {  // a lab's bundle opens with its lab: section, mechanism, observations linked to their views
    const l = data.lab;
    const ids = new Set(data.views.map((v) => v.id));
    document.getElementById('sp-header').append(el('section', {id: 'sp-lab', 'data-lab': l.key},
      el('h2', {}, 'Lab ' + l.key + ' §' + l.section + ' ' + l.title),
      el('p', {class: 'sp-lab-mechanism'}, l.mechanism),
      el('p', {}, 'What to observe; each observation carries claims that ', el('code', {}, l.check),
         ' checks against this bundle:'),
      el('ol', {}, l.observations.map((o) => el('li', {'data-observation-view': o.view}, o.text, ' ',
        ids.has(o.view) ? el('a', {href: '#view-' + o.view}, '→ ' + o.view + ' view') : el('span', {}, '(' + o.view + ')'))))));
  }
  if (data.notes && data.notes.length)
    document.getElementById('sp-header').append(el('ul', {class: 'sp-notes'}, data.notes.map((n) => el('li', {}, n))));
  if (data.info && data.info.length)  // what the verdict already accounts for: not a warning
    document.getElementById('sp-header').append(el('ul', {class: 'sp-info'}, data.info.map((n) => el('li', {}, n))));
  for (const v of data.views) {
    nav.append(el('a', {href: '#view-' + v.id}, v.id));
    const sec = el('section', {id: 'view-' + v.id, class: 'sp-view', 'data-view': v.id});
    sec.append(el('h2', {}, v.title));
    sec.append(el('p', {class: 'sp-source'}, 'from: ', fileList(v.files)));
    if (v.problems.length) sec.append(el('ul', {class: 'sp-view-problems'}, v.problems.map((p) => el('li', {}, p))));
    if (v.notes.length) sec.append(el('ul', {class: 'sp-notes'}, v.notes.map((p) => el('li', {}, p))));
    main.append(sec);
    if (v.data === null) {
      sec.append(el('p', {class: 'sp-error'}, 'Nothing to draw: the files above could not be read.'));
      continue;
    }
    try {
      views[v.id](sec, v.data);
    } catch (e) {
      sec.append(el('p', {class: 'sp-error'}, 'This view could not be drawn: ' + e));
      console.error('view ' + v.id + ': ' + (e && e.stack ? e.stack : e));
    }
  }
  if (!data.views.length && !(data.problems && data.problems.length))
    main.append(el('p', {class: 'sp-error'}, 'This report holds no view.'));
  document.body.setAttribute('data-sp-ready', '1');
})();
