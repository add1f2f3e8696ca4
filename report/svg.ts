/** Small pure SVG chart helpers for the run report. No dependencies and no script: the
 *  report is one static file that must render offline. Hover tooltips use SVG <title>. */

export const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
const FONT = 'system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif';
const CHAR_W = 6.2; // rough advance of an 11px sans-serif glyph, for layout only
const INK = '#333';
const MUTED = '#777';
const GRID = '#e6e6e6';

export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** Compact number for ticks and tooltips: 3 significant digits, k/M suffixes, 1e-3 style
 *  for small values (mismatch figures live around 1e-3..1e-7). */
export function fmtNum(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6) return `${trim(v / 1e6)}M`;
  if (a >= 1e4) return `${trim(v / 1e3)}k`;
  if (a < 1e-2) return v.toExponential(1).replace(/\.0e/, 'e').replace('e-', 'e−');
  return trim(v);
}
function trim(v: number): string {
  return String(parseFloat(v.toPrecision(3)));
}

// ---------- scales and ticks ----------

interface Scale { (v: number): number; ticks: number[]; lo: number; hi: number; format: (v: number) => string }

function niceStep(range: number, target: number): number {
  const raw = range / Math.max(1, target);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

function linearScale(lo: number, hi: number, px0: number, px1: number, opts: { target?: number; integer?: boolean; nice?: boolean } = {}): Scale {
  if (hi === lo) { lo -= opts.integer ? 1 : 0.5; hi += opts.integer ? 1 : 0.5; }
  let step = niceStep(hi - lo, opts.target ?? 5);
  if (opts.integer) step = Math.max(1, Math.round(step));
  if (opts.nice !== false) { lo = Math.floor(lo / step + 1e-9) * step; hi = Math.ceil(hi / step - 1e-9) * step; }
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  const s = ((v: number) => px0 + ((v - lo) / (hi - lo)) * (px1 - px0)) as Scale;
  return Object.assign(s, { ticks, lo, hi, format: fmtNum });
}

function logScale(lo: number, hi: number, px0: number, px1: number): Scale {
  let a = Math.floor(Math.log10(lo));
  let b = Math.ceil(Math.log10(hi));
  if (a === b) { a -= 1; b += 1; }
  const every = Math.ceil((b - a) / 6);
  const ticks: number[] = [];
  for (let e = a; e <= b; e += every) ticks.push(10 ** e);
  const s = ((v: number) => px0 + ((Math.log10(v) - a) / (b - a)) * (px1 - px0)) as Scale;
  // Decades read best as powers of ten, all in one style (not 0.01 next to 1e−3).
  const format = (v: number) => { const e = Math.round(Math.log10(v)); return e === 0 ? '1' : `1e${e < 0 ? '−' : ''}${Math.abs(e)}`; };
  return Object.assign(s, { ticks, lo: 10 ** a, hi: 10 ** b, format });
}

// ---------- shared frame: root, legend, axes ----------

interface LegendItem { name: string; color: string; kind: 'line' | 'faint' | 'area' | 'dashed' }

function svgRoot(width: number, height: number, label: string, body: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${esc(label)}" font-family="${esc(FONT)}" font-size="11" fill="${INK}">${body}</svg>`;
}

/** Lays the legend out in rows above the plot; returns its markup and height. */
function legend(items: LegendItem[], x0: number, maxWidth: number): { svg: string; height: number } {
  if (items.length < 2) return { svg: '', height: 0 };
  let x = x0;
  let row = 0;
  const parts: string[] = [];
  for (const it of items) {
    const w = 22 + it.name.length * CHAR_W + 14;
    if (x + w > x0 + maxWidth && x > x0) { x = x0; row++; }
    const y = 12 + row * 16;
    const sw = it.kind === 'area'
      ? `<rect x="${x}" y="${y - 6}" width="14" height="9" fill="${it.color}" fill-opacity="0.75"/>`
      : `<line x1="${x}" y1="${y - 1.5}" x2="${x + 16}" y2="${y - 1.5}" stroke="${it.color}" stroke-width="${it.kind === 'faint' ? 1.5 : 2.5}"${it.kind === 'faint' ? ' stroke-opacity="0.4"' : ''}${it.kind === 'dashed' ? ' stroke-dasharray="4 3"' : ''}/>`;
    parts.push(`${sw}<text x="${x + 20}" y="${y + 2}">${esc(it.name)}</text>`);
    x += w;
  }
  return { svg: `<g class="legend">${parts.join('')}</g>`, height: (row + 1) * 16 + 6 };
}

interface Box { left: number; top: number; right: number; bottom: number }

function yAxis(box: Box, y: Scale, label: string): string {
  const grid = y.ticks.map((t) => {
    const py = y(t).toFixed(1);
    return `<line x1="${box.left}" x2="${box.right}" y1="${py}" y2="${py}" stroke="${GRID}"/>` +
      `<text x="${box.left - 6}" y="${py}" text-anchor="end" dominant-baseline="middle" fill="${MUTED}">${esc(y.format(t))}</text>`;
  }).join('');
  const cy = (box.top + box.bottom) / 2;
  return grid + `<text transform="translate(13 ${cy}) rotate(-90)" text-anchor="middle" fill="${MUTED}">${esc(label)}</text>`;
}

function xAxisNumeric(box: Box, x: Scale, label: string): string {
  const ticks = x.ticks.map((t) => {
    const px = x(t).toFixed(1);
    return `<line x1="${px}" x2="${px}" y1="${box.bottom}" y2="${box.bottom + 4}" stroke="${MUTED}"/>` +
      `<text x="${px}" y="${box.bottom + 15}" text-anchor="middle" fill="${MUTED}">${esc(fmtNum(t))}</text>`;
  }).join('');
  return `<line x1="${box.left}" x2="${box.right}" y1="${box.bottom}" y2="${box.bottom}" stroke="${MUTED}"/>${ticks}` +
    `<text x="${(box.left + box.right) / 2}" y="${box.bottom + 32}" text-anchor="middle" fill="${MUTED}">${esc(label)}</text>`;
}

/** A compact "no data yet" box: an empty plot should not take a full plot's height. */
function noData(width: number, fullHeight: number, label: string, text: string): string {
  const height = Math.min(fullHeight, 110);
  return svgRoot(width, height, label,
    `<rect x="0.5" y="0.5" width="${width - 1}" height="${height - 1}" fill="#fafafa" stroke="${GRID}" rx="4"/>` +
    `<text x="${width / 2}" y="${height / 2}" text-anchor="middle" dominant-baseline="middle" font-size="13" fill="${MUTED}">${esc(text)}</text>`);
}

// ---------- line and stacked-area charts ----------

export type Point = [x: number, y: number | null];

export interface Series {
  name: string;
  points: Point[];
  color?: string;
  /** faint: thin and translucent, for raw data under a smoothed curve. */
  style?: 'line' | 'bold' | 'faint' | 'dashed';
}

export interface XYChartOptions {
  label: string;
  xLabel: string;
  yLabel: string;
  lines?: Series[];
  /** Filled areas stacked bottom-up in the given order; they share x positions. */
  stacked?: Series[];
  /** 'auto' starts at 0 for non-negative data; a fixed range, e.g. [0, 1] for rewards. */
  y?: 'auto' | [number, number];
  yScale?: 'linear' | 'log';
  integerX?: boolean;
  width?: number;
  height?: number;
  emptyText?: string;
}

export function lineChart(o: Omit<XYChartOptions, 'stacked'>): string {
  return xyChart(o);
}

export function stackedAreaChart(o: XYChartOptions & { stacked: Series[] }): string {
  return xyChart(o);
}

function xyChart(o: XYChartOptions): string {
  const width = o.width ?? 560;
  const height = o.height ?? 260;
  const log = o.yScale === 'log';
  const lines = (o.lines ?? []).map((s, i) => ({ ...s, color: s.color ?? PALETTE[i % PALETTE.length] }));
  const stackedIn = (o.stacked ?? []).map((s, i) => ({ ...s, color: s.color ?? PALETTE[(i + lines.length) % PALETTE.length] }));
  const stacked = stackLayers(stackedIn);

  const usable = (v: number | null): v is number => v !== null && Number.isFinite(v) && (!log || v > 0);
  const ys = [...lines.flatMap((s) => s.points.map((p) => p[1])), ...stacked.flatMap((l) => l.top)].filter(usable);
  const xs = [...lines, ...stackedIn].flatMap((s) => s.points.filter((p) => usable(p[1])).map((p) => p[0]));
  if (!ys.length) return noData(width, height, o.label, o.emptyText ?? 'no data yet');

  const items: LegendItem[] = [
    ...stackedIn.map((s): LegendItem => ({ name: s.name, color: s.color, kind: 'area' })),
    ...lines.map((s): LegendItem => ({ name: s.name, color: s.color, kind: s.style === 'faint' ? 'faint' : s.style === 'dashed' ? 'dashed' : 'line' })),
  ];
  const left = 58;
  const lg = legend(items, left, width - left - 12);
  const box: Box = { left, right: width - 14, top: 10 + lg.height, bottom: height - 40 };

  const x = linearScale(Math.min(...xs), Math.max(...xs), box.left, box.right, { integer: o.integerX, nice: false, target: 8 });
  const y = log
    ? logScale(Math.min(...ys), Math.max(...ys), box.bottom, box.top)
    : Array.isArray(o.y)
      ? linearScale(o.y[0], o.y[1], box.bottom, box.top, { nice: false })
      : linearScale(Math.min(0, ...ys), Math.max(...ys), box.bottom, box.top);
  const clampY = (v: number) => y(Math.min(y.hi, Math.max(y.lo, v)));

  const areas = stacked.map((l) => {
    const up = l.xs.map((xv, i) => `${x(xv).toFixed(1)},${clampY(l.top[i]).toFixed(1)}`);
    const down = l.xs.map((xv, i) => `${x(xv).toFixed(1)},${clampY(l.base[i]).toFixed(1)}`).reverse();
    const tips = l.xs.map((xv, i) => `${fmtNum(xv)}: ${fmtNum(l.top[i] - l.base[i])}`).join(', ');
    return `<polygon points="${[...up, ...down].join(' ')}" fill="${l.color}" fill-opacity="0.75" stroke="${l.color}" stroke-width="1"><title>${esc(`${l.name} — ${tips}`)}</title></polygon>`;
  }).join('');

  const paths = lines.map((s) => {
    let d = '';
    let pen = false;
    for (const [xv, yv] of s.points) {
      if (!usable(yv)) { pen = false; continue; }
      d += `${pen ? 'L' : 'M'}${x(xv).toFixed(1)} ${clampY(yv).toFixed(1)}`;
      pen = true;
    }
    const sw = s.style === 'bold' ? 2.5 : s.style === 'faint' ? 1.2 : 1.8;
    const extra = (s.style === 'faint' ? ' stroke-opacity="0.4"' : '') + (s.style === 'dashed' ? ' stroke-dasharray="5 3"' : '');
    const pts = s.points.filter((p): p is [number, number] => usable(p[1]));
    // Markers only where they stay legible; each carries its value as a tooltip.
    const markers = s.style !== 'faint' && pts.length <= 40
      ? pts.map(([xv, yv]) => `<circle cx="${x(xv).toFixed(1)}" cy="${clampY(yv).toFixed(1)}" r="2.6" fill="${s.color}"><title>${esc(`${s.name} @ ${fmtNum(xv)}: ${fmtNum(yv)}`)}</title></circle>`).join('')
      : '';
    return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="${sw}" stroke-linejoin="round" stroke-linecap="round"${extra}><title>${esc(s.name)}</title></path>${markers}`;
  }).join('');

  return svgRoot(width, height, o.label,
    lg.svg + yAxis(box, y, o.yLabel) + areas + paths + xAxisNumeric(box, x, o.xLabel));
}

/** Cumulative layers for a stacked area; missing values stack as 0. */
function stackLayers(series: (Series & { color: string })[]) {
  const xs = series[0]?.points.map((p) => p[0]) ?? [];
  const acc = xs.map(() => 0);
  return series.map((s) => {
    const base = [...acc];
    s.points.forEach((p, i) => { if (i < acc.length) acc[i] += p[1] !== null && Number.isFinite(p[1]) ? p[1] : 0; });
    return { name: s.name, color: s.color, xs, base, top: [...acc] };
  });
}

// ---------- bar charts ----------

export interface BarSeries { name: string; values: number[]; color?: string }

export interface BarChartOptions {
  label: string;
  categories: string[];
  series: BarSeries[];
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  emptyText?: string;
}

/** Vertical bars, grouped when there are several series (e.g. a histogram of batch vs
 *  discarded staleness). Category labels thin out when they would collide. */
export function barChart(o: BarChartOptions): string {
  const width = o.width ?? 560;
  const height = o.height ?? 260;
  const series = o.series.map((s, i) => ({ ...s, color: s.color ?? PALETTE[i % PALETTE.length] }));
  const values = series.flatMap((s) => s.values).filter((v) => Number.isFinite(v));
  if (!o.categories.length || !values.length) return noData(width, height, o.label, o.emptyText ?? 'no data yet');

  const left = 58;
  const lg = legend(series.map((s) => ({ name: s.name, color: s.color, kind: 'area' as const })), left, width - left - 12);
  const box: Box = { left, right: width - 14, top: 14 + lg.height, bottom: height - 40 };
  // Counts get whole-number ticks (no "1.5 rollouts").
  const y = linearScale(Math.min(0, ...values), Math.max(...values), box.bottom, box.top, { integer: values.every(Number.isInteger) });
  const slot = (box.right - box.left) / o.categories.length;
  // Narrow slots get no gap: sub-pixel gaps render as stripes instead of bars.
  const pad = slot >= 4 ? slot * 0.1 : 0;
  const barW = (slot - 2 * pad) / series.length;
  const showValues = o.categories.length * series.length <= 16;
  const labelled = labelledCategories(o.categories, box.right - box.left);

  const bars = o.categories.map((cat, ci) => {
    const x0 = box.left + ci * slot + pad;
    const group = series.map((s, si) => {
      const v = s.values[ci] ?? 0;
      const top = y(Math.max(0, v));
      const h = Math.abs(y(v) - y(0));
      const bx = x0 + si * barW;
      const tip = `<title>${esc(`${series.length > 1 ? `${s.name}, ` : ''}${cat}: ${fmtNum(v)}`)}</title>`;
      const valueText = showValues && v !== 0 ? `<text x="${(bx + barW / 2).toFixed(1)}" y="${(top - 3).toFixed(1)}" text-anchor="middle" font-size="10" fill="${MUTED}">${esc(fmtNum(v))}</text>` : '';
      const w = pad ? Math.max(0.5, barW - 1) : barW + 0.3; // overlap a hair so no seams show
      return `<rect x="${bx.toFixed(2)}" y="${top.toFixed(1)}" width="${w.toFixed(2)}" height="${Math.max(0, h).toFixed(1)}" fill="${s.color}">${tip}</rect>${valueText}`;
    }).join('');
    const label = labelled.has(ci)
      ? `<text x="${(box.left + (ci + 0.5) * slot).toFixed(1)}" y="${box.bottom + 15}" text-anchor="middle" fill="${MUTED}">${esc(cat)}</text>`
      : '';
    return group + label;
  }).join('');

  const axis = `<line x1="${box.left}" x2="${box.right}" y1="${y(0).toFixed(1)}" y2="${y(0).toFixed(1)}" stroke="${MUTED}"/>` +
    `<text x="${(box.left + box.right) / 2}" y="${box.bottom + 32}" text-anchor="middle" fill="${MUTED}">${esc(o.xLabel)}</text>`;
  return svgRoot(width, height, o.label, lg.svg + yAxis(box, y, o.yLabel) + bars + axis);
}

/** Which category labels fit. Integer categories (policy versions, staleness) are
 *  labelled at round steps (1, 50, 100…) rather than every k-th slot (1, 18, 35…). */
function labelledCategories(categories: string[], plotWidth: number): Set<number> {
  const n = categories.length;
  const labelW = Math.max(...categories.map((c) => c.length)) * CHAR_W + 10;
  const fit = Math.max(1, Math.floor(plotWidth / labelW));
  if (n <= fit) return new Set(categories.map((_, i) => i));
  if (categories.every((c) => /^-?\d+$/.test(c))) {
    const nums = categories.map(Number);
    const step = Math.max(1, Math.round(niceStep(Math.max(...nums) - Math.min(...nums), Math.min(fit, 8))));
    return new Set(nums.flatMap((v, i) => (v % step === 0 ? [i] : [])));
  }
  const every = Math.ceil(n / fit);
  return new Set(categories.flatMap((_, i) => (i % every === 0 ? [i] : [])));
}

export interface HBarRow { label: string; value: number; color?: string; note?: string }

export interface HBarChartOptions {
  label: string;
  rows: HBarRow[];
  valueLabel: string;
  width?: number;
  format?: (v: number) => string;
  emptyText?: string;
}

/** Horizontal bars: readable for long category names (gate reasons, run labels). */
export function hBarChart(o: HBarChartOptions): string {
  const width = o.width ?? 560;
  const fmt = o.format ?? fmtNum;
  if (!o.rows.length) return noData(width, 120, o.label, o.emptyText ?? 'no data yet');
  const rowH = 24;
  const maxChars = 26;
  const short = (s: string) => (s.length > maxChars ? `${s.slice(0, maxChars - 1)}…` : s);
  const left = Math.min(190, 12 + Math.max(...o.rows.map((r) => short(r.label).length)) * CHAR_W);
  const valueRoom = 12 + Math.max(...o.rows.map((r) => (fmt(r.value) + (r.note ? ` ${r.note}` : '')).length)) * CHAR_W;
  const box: Box = { left, right: width - valueRoom, top: 8, bottom: 8 + o.rows.length * rowH };
  const height = box.bottom + 34;
  const max = Math.max(0, ...o.rows.map((r) => r.value));
  const x = linearScale(0, max > 0 ? max : 1, box.left, box.right, { nice: false });

  const rows = o.rows.map((r, i) => {
    const cy = box.top + i * rowH + rowH / 2;
    const w = Math.max(0, x(Math.max(0, r.value)) - box.left);
    const text = fmt(r.value) + (r.note ? ` ${r.note}` : '');
    return `<text x="${left - 8}" y="${cy}" text-anchor="end" dominant-baseline="middle"><title>${esc(r.label)}</title>${esc(short(r.label))}</text>` +
      `<rect x="${left}" y="${(cy - 8).toFixed(1)}" width="${w.toFixed(1)}" height="16" rx="2" fill="${r.color ?? PALETTE[0]}"><title>${esc(`${r.label}: ${text}`)}</title></rect>` +
      `<text x="${(left + w + 6).toFixed(1)}" y="${cy}" dominant-baseline="middle" fill="${MUTED}">${esc(text)}</text>`;
  }).join('');
  const axis = `<line x1="${left}" x2="${left}" y1="${box.top}" y2="${box.bottom}" stroke="${MUTED}"/>` +
    `<text x="${(box.left + box.right) / 2}" y="${box.bottom + 22}" text-anchor="middle" fill="${MUTED}">${esc(o.valueLabel)}</text>`;
  return svgRoot(width, height, o.label, rows + axis);
}

export interface StackedHBarOptions {
  label: string;
  /** The parts each bar is split into, left to right (one legend entry each). */
  segments: { name: string; color?: string }[];
  /** One bar per row; values[i] belongs to segments[i] (null or negative: drawn as 0). */
  rows: { label: string; values: (number | null)[]; note?: string }[];
  valueLabel: string;
  width?: number;
  format?: (v: number) => string;
  emptyText?: string;
}

/** Horizontal stacked bars on one shared axis, e.g. where a rollout's wall time goes. Each
 *  segment carries its value as a tooltip; the bar's total (and note) follows it. */
export function stackedHBarChart(o: StackedHBarOptions): string {
  const width = o.width ?? 560;
  const fmt = o.format ?? fmtNum;
  const segs = o.segments.map((s, i) => ({ ...s, color: s.color ?? PALETTE[i % PALETTE.length] }));
  const part = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);
  const totals = o.rows.map((r) => r.values.reduce<number>((a, v) => a + part(v), 0));
  if (!o.rows.length || !totals.some((t) => t > 0)) return noData(width, 120, o.label, o.emptyText ?? 'no data yet');
  const rowH = 28;
  const maxChars = 26;
  const short = (s: string) => (s.length > maxChars ? `${s.slice(0, maxChars - 1)}…` : s);
  const left = Math.min(190, 12 + Math.max(...o.rows.map((r) => short(r.label).length)) * CHAR_W);
  const valueRoom = 12 + Math.max(...o.rows.map((r, i) => (fmt(totals[i]) + (r.note ? ` ${r.note}` : '')).length)) * CHAR_W;
  const lg = legend(segs.map((s) => ({ name: s.name, color: s.color, kind: 'area' as const })), 8, width - 16);
  const box: Box = { left, right: width - valueRoom, top: 8 + lg.height, bottom: 8 + lg.height + o.rows.length * rowH };
  const height = box.bottom + 34;
  const x = linearScale(0, Math.max(...totals), box.left, box.right, { nice: false });
  const bars = o.rows.map((r, ri) => {
    const cy = box.top + ri * rowH + rowH / 2;
    let x0 = box.left;
    const rects = segs.map((s, si) => {
      const v = part(r.values[si]);
      const w = x(v) - box.left;
      const rect = w > 0 ? `<rect x="${x0.toFixed(1)}" y="${(cy - 9).toFixed(1)}" width="${w.toFixed(1)}" height="18" fill="${s.color}"><title>${esc(`${r.label} — ${s.name}: ${fmt(v)}`)}</title></rect>` : '';
      x0 += w;
      return rect;
    }).join('');
    const text = fmt(totals[ri]) + (r.note ? ` ${r.note}` : '');
    return `<text x="${left - 8}" y="${cy}" text-anchor="end" dominant-baseline="middle"><title>${esc(r.label)}</title>${esc(short(r.label))}</text>${rects}` +
      `<text x="${(x0 + 6).toFixed(1)}" y="${cy}" dominant-baseline="middle" fill="${MUTED}">${esc(text)}</text>`;
  }).join('');
  const axis = `<line x1="${left}" x2="${left}" y1="${box.top}" y2="${box.bottom}" stroke="${MUTED}"/>` +
    `<text x="${(box.left + box.right) / 2}" y="${box.bottom + 22}" text-anchor="middle" fill="${MUTED}">${esc(o.valueLabel)}</text>`;
  return svgRoot(width, height, o.label, lg.svg + bars + axis);
}
