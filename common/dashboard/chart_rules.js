// The rules the dashboard's charts are drawn by, as pure functions: where the axis ticks go
// and what they say, how far the value axis reaches, where a legend may stand, and how the
// samples-per-second series is smoothed. No canvas, no DOM: the page (dashboard_page.html)
// draws with them, and chart_rules_test.js tests them in Node. The page inlines this file
// (embed_page.sh), so there is one copy of every rule.
'use strict';

// Round steps: 1, 2 and 5 times a power of ten.
function roundStepsFrom(smallest) {
  const steps = [];
  for (let scale = Math.pow(10, Math.floor(Math.log10(smallest)) - 1); steps.length < 40; scale *= 10) {
    for (const m of [1, 2, 5]) {
      const step = Number((m * scale).toPrecision(12));
      if (step >= smallest) steps.push(step);
    }
  }
  return steps;
}

// k * step without the binary fraction's tail (0.30000000000000004 -> 0.3).
function multiple(k, step) {
  return Number((k * step).toPrecision(12));
}

// The smallest round step whose ticks, as `ticksFor(step)` lays them out, are at most
// `maxTicks`; `span` (> 0) says where to start looking.
function smallestRoundStep(span, maxTicks, ticksFor) {
  for (const step of roundStepsFrom(span / Math.max(maxTicks, 1) / 10)) {
    const ticks = ticksFor(step);
    if (ticks.length <= Math.max(maxTicks, 1)) return { step, ticks };
  }
  const step = Math.pow(10, Math.ceil(Math.log10(span)));
  return { step, ticks: ticksFor(step) };
}

// Ticks for an axis of whole epochs running from `first` to `last` (whole numbers): each at
// an epoch, so at a data point. Every epoch when at most `maxTicks` fit; else every 2nd,
// 5th, 10th, 20th, ... epoch (the multiples of the step), with the first epoch labelled too
// when the first multiple is more than half a step after it: 1..7 for seven epochs,
// 1, 5, 10, ..., 40 for forty when ten fit.
function epochTicks(first, last, maxTicks) {
  first = Math.round(first);
  last = Math.round(last);
  if (!(last >= first)) return [];
  if (last === first) return [first];
  return smallestRoundStep(last - first, maxTicks, (step) => {
    step = Math.max(1, Math.round(step));
    if (step === 1) {
      const all = [];
      for (let e = first; e <= last; e++) all.push(e);
      return all;
    }
    const ticks = [];
    const firstMultiple = Math.ceil(first / step) * step;
    if (firstMultiple - first > step / 2) ticks.push(first);
    for (let e = firstMultiple; e <= last; e += step) ticks.push(e);
    return ticks;
  }).ticks;
}

// Ticks for a continuous axis whose data spans [lo, hi] (global steps, say): the
// multiples of the smallest round step that give at most `maxTicks` inside the span.
function roundTicks(lo, hi, maxTicks) {
  if (!isFinite(lo) || !isFinite(hi) || hi < lo) return { step: 1, ticks: [] };
  if (hi === lo) return { step: 1, ticks: [lo] };
  return smallestRoundStep(hi - lo, maxTicks, (step) => {
    const ticks = [];
    for (let k = Math.ceil(lo / step - 1e-9); multiple(k, step) <= hi + step * 1e-9; k++) {
      ticks.push(multiple(k, step));
    }
    return ticks;
  });
}

// The value axis for data from `min` to `max`: padded by `padFraction` of the span on each
// side (so no point sits on the frame), then widened to the nearest multiples of a round
// step, with at most `maxTicks` ticks from `lo` to `hi`. Returns {lo, hi, step, ticks}.
function valueAxis(min, max, maxTicks, padFraction = 0.05) {
  if (!isFinite(min) || !isFinite(max) || max < min) {
    return { lo: 0, hi: 1, step: 0.5, ticks: [0, 0.5, 1] };
  }
  const span = max > min ? max - min : (Math.abs(min) * 0.1 || 1);
  const pad = span * padFraction;
  const a = min - pad, b = max + pad;
  const chosen = smallestRoundStep(b - a, maxTicks, (step) => {
    const ticks = [];
    const kLo = Math.floor(a / step + 1e-9), kHi = Math.ceil(b / step - 1e-9);
    for (let k = kLo; k <= kHi; k++) ticks.push(multiple(k, step));
    return ticks;
  });
  const ticks = chosen.ticks;
  return { lo: ticks[0], hi: ticks[ticks.length - 1], step: chosen.step, ticks };
}

// How many ticks fit along `pixels` when each needs `spacing` pixels.
function ticksThatFit(pixels, spacing) {
  return Math.max(2, Math.floor(pixels / spacing) + 1);
}

// A tick's label, as precise as its axis' `step` and no more: 0.3 for 0.3 on a 0.1 axis,
// 40 for epoch 40; thousands as k once the step is 1000 or more (20k, 25k on a 5000
// axis; 0 stays 0).
function formatTick(value, step) {
  if (Math.abs(step) >= 1000 && value !== 0) {
    return formatTick(value / 1000, step / 1000) + 'k';
  }
  const decimals = Math.max(0, -Math.floor(Math.log10(Math.abs(step)) + 1e-9));
  const text = value.toFixed(Math.min(decimals, 12));
  return text === '-0' || /^-0\.0*$/.test(text) ? text.slice(1) : text;
}

// Trailing mean of each point with the `window` - 1 before it (fewer at the start), each
// value weighted by its weight (a rate by the seconds it was measured over, so the mean is
// the samples of the windows over their seconds); weights may be null (all 1).
function movingAverage(values, weights, window) {
  const out = [];
  let sum = 0, total = 0;
  for (let i = 0; i < values.length; i++) {
    const w = weights ? weights[i] : 1;
    sum += values[i] * w;
    total += w;
    if (i >= window) {
      const wOut = weights ? weights[i - window] : 1;
      sum -= values[i - window] * wOut;
      total -= wOut;
    }
    out.push(total > 0 ? sum / total : values[i]);
  }
  return out;
}

// Whether the segment from `a` to `b` ([x, y] each) touches `box` ({x, y, w, h}); a
// point is a segment from itself to itself. Liang-Barsky clipping.
function segmentTouchesBox(a, b, box) {
  let t0 = 0, t1 = 1;
  const dx = b[0] - a[0], dy = b[1] - a[1];
  const edges = [[-dx, a[0] - box.x], [dx, box.x + box.w - a[0]],
                 [-dy, a[1] - box.y], [dy, box.y + box.h - a[1]]];
  for (const [p, q] of edges) {
    if (p === 0) {
      if (q < 0) return false;
    } else {
      const t = q / p;
      if (p < 0) { if (t > t1) return false; if (t > t0) t0 = t; }
      else { if (t < t0) return false; if (t < t1) t1 = t; }
    }
  }
  return true;
}

// Whether any line of `polylines` (arrays of [x, y] in pixels) comes within `clearance`
// pixels of `box`.
function boxCoversData(box, polylines, clearance) {
  const grown = { x: box.x - clearance, y: box.y - clearance,
                  w: box.w + 2 * clearance, h: box.h + 2 * clearance };
  for (const line of polylines) {
    for (let i = 0; i < line.length; i++) {
      if (segmentTouchesBox(line[i], line[i === 0 ? 0 : i - 1], grown)) return true;
    }
  }
  return false;
}

// Where a legend of `size` ({w, h}) may stand inside `plot` ({left, top, right, bottom})
// without covering data: the first corner (top right, top left, bottom right, bottom
// left, `inset` pixels in) whose box comes no nearer than `clearance` pixels to any line
// or point of `polylines`. Returns the box {x, y, w, h}, or null when every corner is
// taken (the caller then puts the legend outside the plot).
function placeLegend(plot, size, polylines, inset = 6, clearance = 4) {
  const xs = [plot.right - inset - size.w, plot.left + inset];
  const ys = [plot.top + inset, plot.bottom - inset - size.h];
  const corners = [[xs[0], ys[0]], [xs[1], ys[0]], [xs[0], ys[1]], [xs[1], ys[1]]];
  for (const [x, y] of corners) {
    const box = { x, y, w: size.w, h: size.h };
    if (x < plot.left || y < plot.top || x + size.w > plot.right || y + size.h > plot.bottom) {
      continue;  // the plot is smaller than the legend
    }
    if (!boxCoversData(box, polylines, clearance)) return box;
  }
  return null;
}

if (typeof module !== 'undefined') {
  module.exports = { epochTicks, roundTicks, valueAxis, ticksThatFit, formatTick, movingAverage,
                     segmentTouchesBox, boxCoversData, placeLegend };
}
