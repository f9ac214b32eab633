// Unit tests of the dashboard's chart rules (chart_rules.js), in Node: node chart_rules_test.js
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const rules = require(path.join(__dirname, 'chart_rules.js'));

const range = (a, b, step = 1) => {
  const out = [];
  for (let v = a; v <= b; v += step) out.push(v);
  return out;
};

test('seven epochs get a tick at every epoch', () => {
  assert.deepEqual(rules.epochTicks(1, 7, 15), [1, 2, 3, 4, 5, 6, 7]);
});

test('forty epochs get 1, 5, 10, ... 40 when ten ticks fit', () => {
  assert.deepEqual(rules.epochTicks(1, 40, 10), [1, 5, 10, 15, 20, 25, 30, 35, 40]);
});

test('epoch ticks thin out to every 2nd, 5th, 10th, 20th epoch', () => {
  assert.deepEqual(rules.epochTicks(1, 12, 8), [2, 4, 6, 8, 10, 12]);
  assert.deepEqual(rules.epochTicks(1, 25, 13), [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]);
  assert.deepEqual(rules.epochTicks(1, 25, 8), [1, 5, 10, 15, 20, 25]);
  assert.deepEqual(rules.epochTicks(1, 100, 12), [1, ...range(10, 100, 10)]);
  assert.deepEqual(rules.epochTicks(1, 200, 12), [1, ...range(20, 200, 20)]);
});

test('epoch ticks are whole epochs within the data, never more than fit', () => {
  for (let last = 1; last <= 300; last++) {
    for (const maxTicks of [2, 5, 9, 16]) {
      const ticks = rules.epochTicks(1, last, maxTicks);
      assert.ok(ticks.length >= 1 && ticks.length <= maxTicks, `${last} ${maxTicks}: ${ticks}`);
      for (const t of ticks) assert.ok(Number.isInteger(t) && t >= 1 && t <= last, `${last}: ${t}`);
      for (let i = 1; i < ticks.length; i++) assert.ok(ticks[i] > ticks[i - 1]);
    }
  }
});

test('a resumed run starting at epoch 11 is ticked from there', () => {
  assert.deepEqual(rules.epochTicks(11, 17, 10), [11, 12, 13, 14, 15, 16, 17]);
  assert.deepEqual(rules.epochTicks(11, 50, 10), [11, 15, 20, 25, 30, 35, 40, 45, 50]);
});

test('one epoch is one tick; no epochs, none', () => {
  assert.deepEqual(rules.epochTicks(1, 1, 10), [1]);
  assert.deepEqual(rules.epochTicks(NaN, NaN, 10), []);
});

test('global steps are ticked at round numbers', () => {
  const { step, ticks } = rules.roundTicks(300, 19560, 10);
  assert.equal(step, 2000);
  assert.deepEqual(ticks, range(2000, 18000, 2000));
  assert.deepEqual(rules.roundTicks(0, 938, 6).ticks, [0, 200, 400, 600, 800]);
  assert.deepEqual(rules.roundTicks(5, 35, 8).ticks, [5, 10, 15, 20, 25, 30, 35]);
});

test('round ticks stay inside the data and within the count', () => {
  for (const [lo, hi] of [[1, 2], [0.1, 0.9], [17, 1e6], [-3, 7], [999, 1001]]) {
    for (const maxTicks of [2, 4, 7, 11]) {
      const { step, ticks } = rules.roundTicks(lo, hi, maxTicks);
      assert.ok(ticks.length <= maxTicks, `${lo} ${hi} ${maxTicks}: ${ticks}`);
      assert.ok(ticks.length >= 1, `${lo} ${hi} ${maxTicks}`);
      const mantissa = step / Math.pow(10, Math.floor(Math.log10(step) + 1e-9));
      assert.ok([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9), `step ${step}`);
      for (const t of ticks) {
        assert.ok(t >= lo && t <= hi, `${t} outside [${lo}, ${hi}]`);
        assert.ok(Math.abs(t / step - Math.round(t / step)) < 1e-9, `${t} not a multiple of ${step}`);
      }
    }
  }
});

test('the value axis is padded so no point sits on the frame, and ends on round ticks', () => {
  const axis = rules.valueAxis(0.252, 0.650, 6);
  assert.deepEqual(axis, { lo: 0.2, hi: 0.7, step: 0.1, ticks: [0.2, 0.3, 0.4, 0.5, 0.6, 0.7] });
  for (const [min, max] of [[0.772, 0.904], [0, 1], [4856, 89000], [-2, -1], [0.5, 0.5], [0, 0],
                            [0.9999, 1.0001], [1e-6, 3e-6]]) {
    for (const maxTicks of [3, 5, 8]) {
      const a = rules.valueAxis(min, max, maxTicks);
      assert.ok(a.lo < min && a.hi > max, `${min}..${max} in [${a.lo}, ${a.hi}]`);
      // The padding is at least 5% of the span (or of the value, for a constant).
      const span = max > min ? max - min : (Math.abs(min) * 0.1 || 1);
      assert.ok(min - a.lo >= span * 0.05 - 1e-12 && a.hi - max >= span * 0.05 - 1e-12);
      assert.ok(a.ticks.length <= maxTicks && a.ticks.length >= 2, `${min}..${max}: ${a.ticks}`);
      assert.equal(a.ticks[0], a.lo);
      assert.equal(a.ticks[a.ticks.length - 1], a.hi);
    }
  }
});

test('tick labels carry the axis step\'s precision', () => {
  assert.equal(rules.formatTick(0.3, 0.1), '0.3');
  assert.equal(rules.formatTick(0.35, 0.05), '0.35');
  assert.equal(rules.formatTick(0.8, 0.02), '0.80');
  assert.equal(rules.formatTick(40, 5), '40');
  assert.equal(rules.formatTick(18000, 2000), '18k');
  assert.equal(rules.formatTick(25000, 5000), '25k');
  assert.equal(rules.formatTick(0, 20000), '0');
  assert.equal(rules.formatTick(-20000, 20000), '-20k');
  assert.equal(rules.formatTick(1500, 500), '1500');
  assert.equal(rules.formatTick(0, 0.1), '0.0');
  assert.equal(rules.formatTick(-0.2, 0.1), '-0.2');
});

test('the moving average is the trailing mean, each window weighted by its seconds', () => {
  assert.deepEqual(rules.movingAverage([10, 20, 30, 40], null, 2), [10, 15, 25, 35]);
  assert.deepEqual(rules.movingAverage([1, 2, 3], null, 5), [1, 1.5, 2]);
  // 12k samples/s for 0.25 s and 80k for 0.3 s: (3000 + 24000) samples in 0.55 s.
  const smoothed = rules.movingAverage([12000, 80000], [0.25, 0.3], 5);
  assert.ok(Math.abs(smoothed[1] - 27000 / 0.55) < 1e-6, String(smoothed[1]));
  // An alternating rate smooths to its mean.
  const noisy = range(0, 99).map((i) => (i % 2 ? 80000 : 12000));
  const flat = rules.movingAverage(noisy, null, 6).slice(6);
  for (const v of flat) assert.equal(v, 46000);
});

test('a point or segment touches a box only where it meets it', () => {
  const box = { x: 10, y: 10, w: 20, h: 10 };
  assert.ok(rules.segmentTouchesBox([15, 15], [15, 15], box));        // a point inside
  assert.ok(!rules.segmentTouchesBox([5, 5], [5, 5], box));           // a point outside
  assert.ok(rules.segmentTouchesBox([0, 15], [40, 15], box));         // straight through
  assert.ok(!rules.segmentTouchesBox([0, 0], [40, 5], box));          // above it
  assert.ok(rules.segmentTouchesBox([0, 0], [40, 40], box));          // across a corner
  assert.ok(!rules.segmentTouchesBox([0, 30], [5, 40], box));         // below and left
});

// Accuracy rising from the bottom left to the top right of a 500 x 200 plot.
const plot = { left: 50, top: 10, right: 550, bottom: 210 };
const rising = range(0, 6).map((i) => [50 + i * 500 / 6, 200 - 180 * Math.sqrt(i / 6)]);
const legend = { w: 90, h: 32 };

test('the legend keeps clear of a curve in the top right: it goes elsewhere', () => {
  const box = rules.placeLegend(plot, legend, [rising]);
  assert.ok(box !== null);
  assert.ok(!rules.boxCoversData(box, [rising], 4));
  assert.notDeepEqual([box.x, box.y], [550 - 6 - 90, 16]);  // not the top-right corner
  assert.deepEqual([box.x, box.y], [50 + 6, 10 + 6]);  // the next corner tried: top left
  // With the top left taken too (a curve that starts high), the bottom right.
  const early = [[50, 20], ...rising.slice(1)];
  assert.deepEqual(rules.placeLegend(plot, legend, [early]), { x: 454, y: 172, w: 90, h: 32 });
});

test('a falling loss curve leaves the top right corner to the legend', () => {
  const falling = rising.map(([x, y]) => [x, 220 - y]);
  assert.deepEqual(rules.placeLegend(plot, legend, [falling]), { x: 454, y: 16, w: 90, h: 32 });
});

test('a line through every corner leaves no place in the plot', () => {
  const zigzag = range(0, 50).map((i) => [50 + i * 10, i % 2 ? 12 : 208]);
  assert.equal(rules.placeLegend(plot, legend, [zigzag]), null);
});

test('a point hidden under a box corner counts, even with no line to it', () => {
  const lone = [[550 - 6 - 90 - 2, 16 + 5]];  // 2 px left of the top-right candidate
  const box = rules.placeLegend(plot, legend, [lone]);
  assert.notDeepEqual([box.x, box.y], [454, 16]);
});

test('ticksThatFit counts the ticks an axis has room for', () => {
  assert.equal(rules.ticksThatFit(560, 40), 15);
  assert.equal(rules.ticksThatFit(10, 40), 2);
});
