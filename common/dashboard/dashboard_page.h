#ifndef PSTRAIN_COMMON_DASHBOARD_DASHBOARD_PAGE_H_
#define PSTRAIN_COMMON_DASHBOARD_DASHBOARD_PAGE_H_

// The dashboard's one page: HTML, styles and script inline, no request leaves the daemon
// (no CDN, no fonts). The charts are drawn on <canvas> by the few lines below; each
// canvas carries data-points (how many points it drew) for tests and curious users.

namespace pstrain {

inline constexpr char kDashboardPage[] = R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pstrain</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d232b; }
  header { background: #1d232b; color: #fff; padding: 10px 18px; display: flex; gap: 24px;
           align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 17px; margin: 0; font-weight: 600; }
  header span { color: #c8d0da; }
  header b { color: #fff; }
  main { padding: 14px 18px; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 14px; }
  .card { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 10px 12px; }
  .card h2 { font-size: 14px; margin: 0 0 6px; font-weight: 600; }
  canvas { width: 100%; height: 230px; display: block; }
  table { border-collapse: collapse; width: 100%; font-size: 13px; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eceff2; white-space: nowrap; }
  th { color: #5a6470; font-weight: 600; }
  .up { color: #1a7f37; font-weight: 600; } .lost { color: #cf222e; font-weight: 600; }
  .muted { color: #8a939e; }
  #error { color: #cf222e; }
</style>
</head>
<body>
<header>
  <h1 id="title">pstrain</h1>
  <span>phase <b id="phase">-</b></span>
  <span>epoch <b id="epoch">-</b></span>
  <span>global step <b id="step">-</b></span>
  <span>samples/s <b id="rate">-</b></span>
  <span class="muted" id="updated"></span>
  <span id="error"></span>
</header>
<main>
  <div class="grid">
    <div class="card"><h2>Loss per epoch</h2><canvas id="loss-epoch"></canvas></div>
    <div class="card"><h2>Accuracy per epoch</h2><canvas id="accuracy-epoch"></canvas></div>
    <div class="card"><h2>Loss per step</h2><canvas id="loss-step"></canvas></div>
    <div class="card"><h2>Samples per second</h2><canvas id="samples-step"></canvas></div>
  </div>
  <div class="grid" style="margin-top:14px">
    <div class="card"><h2>Tasks</h2><table id="tasks"></table></div>
    <div class="card"><h2>Variable layout</h2><table id="layout"></table></div>
    <div class="card"><h2>Checkpoints</h2><table id="checkpoints"></table></div>
  </div>
</main>
<script>
'use strict';
const COLORS = ['#0969da', '#d4730b', '#1a7f37', '#8250df'];

function niceRange(lo, hi) {
  if (!isFinite(lo) || !isFinite(hi)) return [0, 1];
  if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; return [lo - d, hi + d]; }
  const pad = (hi - lo) * 0.08;
  return [lo - pad, hi + pad];
}

function fmt(v) {
  const a = Math.abs(v);
  if (a >= 10000) return (v / 1000).toFixed(0) + 'k';
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  return v.toFixed(3);
}

// series: [{name, points: [[x, y], ...]}]. Draws axes, grid, lines and a legend.
function drawChart(canvas, series, xLabel) {
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * ratio; canvas.height = h * ratio;
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const all = series.flatMap(s => s.points);
  canvas.dataset.points = String(all.length);
  const left = 52, right = 24, top = 10, bottom = 34;
  g.font = '11px system-ui, sans-serif';
  if (all.length === 0) {
    g.fillStyle = '#8a939e';
    g.fillText('waiting for data', w / 2 - 40, h / 2);
    return;
  }
  // x spans the data exactly (epochs and steps start where they start); y gets a margin.
  let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const integerX = all.every(p => Number.isInteger(p[0]));
  const [y0, y1] = niceRange(Math.min(...all.map(p => p[1])), Math.max(...all.map(p => p[1])));
  const X = x => left + (x - x0) / (x1 - x0) * (w - left - right);
  const Y = y => h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom);
  g.strokeStyle = '#eceff2'; g.fillStyle = '#5a6470'; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4, py = Y(y);
    g.beginPath(); g.moveTo(left, py); g.lineTo(w - right, py); g.stroke();
    g.fillText(fmt(y), 4, py + 4);
    const x = x0 + (x1 - x0) * i / 4;
    g.fillText(integerX ? String(Math.round(x)) : fmt(x), X(x) - 10, h - bottom + 14);
  }
  g.fillText(xLabel, w / 2 - 15, h - 4);
  series.forEach((s, i) => {
    g.strokeStyle = COLORS[i % COLORS.length]; g.fillStyle = g.strokeStyle; g.lineWidth = 2;
    g.beginPath();
    s.points.forEach((p, k) => (k ? g.lineTo(X(p[0]), Y(p[1])) : g.moveTo(X(p[0]), Y(p[1]))));
    g.stroke();
    if (s.points.length < 60) s.points.forEach(p => { g.beginPath(); g.arc(X(p[0]), Y(p[1]), 3, 0, 7); g.fill(); });
    g.fillRect(w - right - 110, top + 4 + i * 16, 10, 3);
    g.fillStyle = '#1d232b'; g.fillText(s.name, w - right - 95, top + 9 + i * 16);
  });
}

function table(el, header, rows) {
  const esc = s => String(s).replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]));
  el.innerHTML = '<tr>' + header.map(h => '<th>' + esc(h) + '</th>').join('') + '</tr>' +
      (rows.length ? rows.map(r => '<tr>' + r.map(c => c && c.html !== undefined ? '<td>' + c.html + '</td>'
                                                     : '<td>' + esc(c) + '</td>').join('') + '</tr>').join('')
                   : '<tr><td class="muted" colspan="' + header.length + '">none yet</td></tr>');
}

function render(d) {
  const st = d.status || {};
  document.getElementById('title').textContent = d.title || 'pstrain';
  document.getElementById('phase').textContent = st.phase || '-';
  document.getElementById('epoch').textContent = d.epoch ? d.epoch + '/' + d.epochs : '-';
  document.getElementById('step').textContent = d.global_step;
  const last = d.steps.length ? d.steps[d.steps.length - 1] : null;
  document.getElementById('rate').textContent = last ? fmt(last[2]) : '-';
  document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  const ep = d.epochs_history;
  const pick = (key) => ep.filter(e => e[key] !== undefined).map(e => [e.epoch, e[key]]);
  drawChart(document.getElementById('loss-epoch'),
            [{name: 'training', points: pick('loss')}, {name: 'validation', points: pick('val_loss')}], 'epoch');
  drawChart(document.getElementById('accuracy-epoch'),
            [{name: 'training', points: pick('accuracy')}, {name: 'validation', points: pick('val_accuracy')}], 'epoch');
  drawChart(document.getElementById('loss-step'), [{name: 'loss', points: d.steps.map(p => [p[0], p[1]])}], 'global step');
  drawChart(document.getElementById('samples-step'), [{name: 'samples/s', points: d.steps.map(p => [p[0], p[2]])}], 'global step');
  const workers = d.workers || {};
  table(document.getElementById('tasks'), ['role', 'index', 'address', 'state', 'last heartbeat', 'steps', 'staleness'],
        (st.tasks || []).map(t => {
          const w = t.role === 'worker' ? workers[String(t.index)] : undefined;
          return [t.role, t.index, t.address, {html: '<span class="' + (t.state === 'up' ? 'up' : 'lost') + '">' + t.state + '</span>'},
                  t.last_heartbeat_ms === undefined ? '-' : t.last_heartbeat_ms + ' ms ago',
                  w ? w.steps : '-', w ? w.behind + ' steps behind' : '-'];
        }));
  table(document.getElementById('layout'), ['variable', 'shard', 'ps', 'rows', 'shape'],
        (st.layout || []).map(v => [v.variable, v.shard, v.ps, v.rows, v.shape]));
  table(document.getElementById('checkpoints'), ['time', 'epoch', 'step', 'path', 'seconds'],
        d.checkpoints.slice().reverse().map(c => [c.time, c.epoch, c.step, c.ok ? c.path : 'FAILED: ' + c.error, c.seconds.toFixed(2)]));
}

async function refresh() {
  try {
    const response = await fetch('/api/dashboard', {cache: 'no-store'});
    render(await response.json());
    document.getElementById('error').textContent = '';
  } catch (e) {
    document.getElementById('error').textContent = 'not answering (' + e.message + ')';
  }
}
refresh();
setInterval(refresh, 2000);
window.addEventListener('resize', refresh);
</script>
</body>
</html>
)PAGE";

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DASHBOARD_DASHBOARD_PAGE_H_
