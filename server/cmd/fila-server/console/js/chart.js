// A line chart of the rates a queue page polls, drawn on a canvas: the figures are the page's
// own samples (one per poll), kept for the last WINDOW_MS.

const WINDOW_MS = 5 * 60 * 1000;

export class RateChart {
  constructor(canvas, series) {
    this.canvas = canvas;
    this.series = series; // [{key, color (a CSS variable name)}]
    this.samples = [];    // {t, values: {key: number}}
  }

  add(values) {
    const t = Date.now();
    this.samples.push({ t, values });
    while (this.samples.length > 0 && this.samples[0].t < t - WINDOW_MS) this.samples.shift();
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, hgt = c.clientHeight;
    if (w === 0 || hgt === 0) return;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(hgt * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const css = getComputedStyle(document.documentElement);
    const muted = css.getPropertyValue('--muted').trim(), line = css.getPropertyValue('--line').trim();
    const left = 48, right = 8, top = 8, bottom = 20;
    const pw = w - left - right, ph = hgt - top - bottom;

    let max = 0;
    for (const s of this.samples) for (const se of this.series) max = Math.max(max, s.values[se.key] || 0);
    max = niceCeil(max);
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = muted;
    g.strokeStyle = line;
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath(); g.moveTo(left, Math.round(y) + 0.5); g.lineTo(left + pw, Math.round(y) + 0.5); g.stroke();
      g.fillText(fmt((max * i) / 4), left - 6, y);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    for (let m = 0; m <= 5; m++) {
      const x = left + pw - (pw * m) / 5;
      g.textAlign = m === 0 ? 'right' : m === 5 ? 'left' : 'center';
      g.fillText(m === 0 ? 'now' : '−' + m + ' min', x, top + ph + 5);
    }
    if (this.samples.length === 0) return;
    const now = Date.now();
    const xOf = (t) => left + pw - (pw * (now - t)) / WINDOW_MS;
    for (const se of this.series) {
      g.strokeStyle = css.getPropertyValue(se.color).trim();
      g.lineWidth = 2;
      g.beginPath();
      this.samples.forEach((s, i) => {
        const x = xOf(s.t), y = top + ph - (ph * (s.values[se.key] || 0)) / max;
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
      if (this.samples.length === 1) {
        const s = this.samples[0];
        g.fillStyle = g.strokeStyle;
        g.beginPath(); g.arc(xOf(s.t), top + ph - (ph * (s.values[se.key] || 0)) / max, 2.5, 0, 2 * Math.PI); g.fill();
      }
    }
  }
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
function niceCeil(x) {
  if (x <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function fmt(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k';
  return v % 1 === 0 ? String(v) : v.toFixed(1);
}
