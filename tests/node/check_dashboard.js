// Loads a pstrain dashboard in Debian's headless Chromium (driven by playwright-core) and
// waits until every chart has drawn data points (the epoch charts EPOCHS epochs, when
// given) and a checkpoint is listed. Then checks, from the page, what each chart drew
// (canvas.chartLayout, the pixels it drew at): every epoch tick label is a whole number
// standing at a data point of that epoch, no point sits on or outside the frame, and no
// legend covers a plotted point or line (tested here by walking each line pixel by pixel,
// not with the page's own rule). Prints one JSON object: the points per chart, the rows
// of the task, layout and checkpoint tables, the epoch ticks, the legends drawn, every
// violation found, and any request that left the daemon (there must be none: the page
// needs no internet).
//
//   node check_dashboard.js URL SCREENSHOT.png [TIMEOUT_MS [EPOCHS]]
'use strict';
const { chromium } = require('playwright-core');

const CHARTS = ['loss-epoch', 'accuracy-epoch', 'loss-step', 'samples-step'];
const EPOCH_CHARTS = ['loss-epoch', 'accuracy-epoch'];

// Runs in the page: the violations of the chart rules in what `ids` drew.
function chartViolations([ids, epochCharts]) {
  const violations = [];
  const epochTicks = {};
  let legends = 0;
  const markerRadius = 3;
  for (const id of ids) {
    const layout = document.getElementById(id).chartLayout;
    if (!layout) { violations.push(`${id}: no layout`); continue; }
    const points = layout.series.flatMap((s) => s.points);
    const { plot } = layout;
    for (const [x, y, px, py] of points) {
      if (!(py > plot.top && py < plot.bottom && px >= plot.left && px <= plot.right)) {
        violations.push(`${id}: point (${x}, ${y}) at (${px}, ${py}) on or outside the frame`);
      }
    }
    if (epochCharts.includes(id)) {
      epochTicks[id] = layout.xTicks.map((t) => t.label);
      for (const t of layout.xTicks) {
        if (!/^[0-9]+$/.test(t.label)) violations.push(`${id}: epoch tick "${t.label}"`);
        const at = points.find((p) => p[0] === Number(t.label));
        if (!at) violations.push(`${id}: tick ${t.label} names no epoch drawn`);
        else if (Math.abs(at[2] - t.px) > 0.5) {
          violations.push(`${id}: tick ${t.label} at x=${t.px}, its epoch's point at x=${at[2]}`);
        }
      }
    }
    const box = layout.legend;
    if (!box) continue;
    ++legends;
    const inside = (px, py, r) => px >= box.x - r && px <= box.x + box.w + r &&
                                  py >= box.y - r && py <= box.y + box.h + r;
    for (const s of layout.series) {
      for (let k = 0; k < s.points.length; k++) {
        const [x, y, px, py] = s.points[k];
        if (inside(px, py, markerRadius)) {
          violations.push(`${id}: legend ${JSON.stringify(box)} covers ${s.name} point (${x}, ${y})`);
        }
        if (k === 0) continue;
        const [, , qx, qy] = s.points[k - 1];
        const n = Math.ceil(Math.hypot(px - qx, py - qy));
        for (let i = 1; i < n; i++) {
          if (inside(qx + (px - qx) * i / n, qy + (py - qy) * i / n, 1)) {
            violations.push(`${id}: legend ${JSON.stringify(box)} covers ${s.name}'s line before (${x}, ${y})`);
            break;
          }
        }
      }
    }
  }
  return { violations, epochTicks, legends };
}

async function main() {
  const [url, screenshot, timeoutArg, epochsArg] = process.argv.slice(2);
  const timeout = Number(timeoutArg || 60000);
  const epochs = Number(epochsArg || 0);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    timeout,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1050 } });
    const requests = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(url, { timeout });
    // The first checkpoint is written after the first epoch ends, which is when the epoch
    // charts get their first points: on a slow machine (a sanitizer build) the page can
    // show the charts before that checkpoint is done, so it waits for a checkpoint row too.
    await page.waitForFunction(
        ([charts, epochCharts, epochs]) =>
            charts.every((id) => Number(document.getElementById(id).dataset.points || 0) > 0) &&
            epochCharts.every((id) => {
              const layout = document.getElementById(id).chartLayout;
              return layout && layout.series[0].points.length >= epochs;
            }) &&
            [...document.querySelectorAll('#checkpoints tr')].some(
                (tr) => tr.querySelector('td') && !tr.querySelector('td.muted')),
        [CHARTS, EPOCH_CHARTS, epochs], { timeout, polling: 250 });
    const result = await page.evaluate((charts) => {
      // Data rows: a table with nothing to show has one muted "none yet" row.
      const rows = (id) => [...document.querySelectorAll(`#${id} tr`)]
          .filter((tr) => tr.querySelector('td') && !tr.querySelector('td.muted')).length;
      const points = {};
      for (const id of charts) points[id] = Number(document.getElementById(id).dataset.points);
      return { points, tasks: rows('tasks'), layout: rows('layout'),
               checkpoints: rows('checkpoints'),
               phase: document.getElementById('phase').textContent };
    }, CHARTS);
    const checked = await page.evaluate(chartViolations, [CHARTS, EPOCH_CHARTS]);
    result.chart_violations = checked.violations;
    result.epoch_ticks = checked.epochTicks;
    result.legends = checked.legends;
    await page.screenshot({ path: screenshot });
    const origin = new URL(url).origin;
    result.foreign_requests = requests.filter((r) => !r.startsWith(origin));
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  process.stderr.write(`check_dashboard: ${e.message}\n`);
  process.exit(1);
});
