// Loads a pstrain dashboard in Debian's headless Chromium (driven by playwright-core) and
// waits until every chart has drawn data points and a checkpoint is listed. Prints one JSON object: the points per
// chart, the rows of the task, layout and checkpoint tables, and any request that left
// the daemon (there must be none: the page needs no internet).
//
//   node check_dashboard.js URL SCREENSHOT.png
'use strict';
const { chromium } = require('playwright-core');

const CHARTS = ['loss-epoch', 'accuracy-epoch', 'loss-step', 'samples-step'];

async function main() {
  const [url, screenshot] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1050 } });
    const requests = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(url);
    // The first checkpoint is written after the first epoch ends, which is when the epoch
    // charts get their first points: on a slow machine (a sanitizer build) the page can
    // show the charts before that checkpoint is done, so it waits for a checkpoint row too.
    await page.waitForFunction(
        (charts) => charts.every((id) => Number(document.getElementById(id).dataset.points || 0) > 0) &&
            [...document.querySelectorAll('#checkpoints tr')].some(
                (tr) => tr.querySelector('td') && !tr.querySelector('td.muted')),
        CHARTS, { timeout: 60000, polling: 250 });
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
