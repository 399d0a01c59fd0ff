// Building the page. Every piece of data becomes a text node or an attribute value set through
// the DOM: nothing the server sends is ever parsed as HTML.

// h makes an element: attrs are attributes (on* keys are event listeners), children are nodes
// or values shown as text.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace empties el and fills it with children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const nf = new Intl.NumberFormat('en-US');
export const num = (n) => (n === undefined || n === null ? '–' : nf.format(n));

export function rate(n) {
  if (n === undefined || n === null) return '–';
  if (n === 0) return '0';
  return n >= 100 ? nf.format(Math.round(n)) : n.toFixed(n >= 10 ? 1 : 2);
}

export function pct(x) {
  if (x === undefined || x === null) return '–';
  return (x * 100).toFixed(x < 0.1 ? 2 : 1) + ' %';
}

// age shows a duration in milliseconds briefly.
export function age(ms) {
  if (ms === undefined || ms === null) return '–';
  if (ms <= 0) return '0';
  const s = ms / 1000;
  if (s < 1) return Math.round(ms) + ' ms';
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min' + (Math.floor(s % 60) ? ' ' + Math.floor(s % 60) + ' s' : '');
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}

// when shows a time (Unix ms or an RFC 3339 string) and how far it is from now.
export function when(t) {
  if (t === undefined || t === null || t === 0 || t === '') return '–';
  const ms = typeof t === 'number' ? t : Date.parse(t);
  if (!Number.isFinite(ms)) return String(t);
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  const stamp = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
    pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  const diff = ms - Date.now();
  const rel = Math.abs(diff) < 1000 ? 'now' : diff > 0 ? 'in ' + age(diff) : age(-diff) + ' ago';
  return stamp + ' (' + rel + ')';
}

// card is one figure of a row of cards.
export function card(label, value, cls) {
  return h('div', { class: 'card' + (cls ? ' ' + cls : '') },
    h('div', { class: 'label' }, label), h('div', { class: 'value' }, value));
}

// table makes a table of rows: columns are {label, num?, cell(row) → node or text}.
export function table(columns, rows, emptyText) {
  const head = h('tr', null, columns.map((c) => h('th', { class: c.num ? 'num' : null, title: c.title }, c.label)));
  const body = rows.length === 0
    ? [h('tr', null, h('td', { class: 'empty', colspan: columns.length }, emptyText || 'Nothing here.'))]
    : rows.map((r) => h('tr', null, columns.map((c) =>
      h('td', { class: c.num ? 'num' : c.name ? 'name' : null }, c.cell(r)))));
  return h('div', { class: 'table-wrap' }, h('table', null, h('thead', null, head), h('tbody', null, body)));
}

// kv shows an object's fields as a definition list; nested values as JSON text.
export function kv(obj, skip) {
  const rows = [];
  for (const [k, v] of Object.entries(obj || {})) {
    if (skip && skip.includes(k)) continue;
    rows.push(h('dt', null, k.replaceAll('_', ' ')), h('dd', null, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)));
  }
  return h('dl', { class: 'kv' }, rows);
}

// link is an anchor to a console route made of path segments, each escaped.
export function link(text, ...segments) {
  return h('a', { href: route(...segments) }, text);
}

export function route(...segments) {
  return '#/' + segments.map((s) => encodeURIComponent(s)).join('/');
}

// debounce calls fn once calls have stopped for ms.
export function debounce(fn, ms) {
  let t;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

// Pager keeps the cursors of the pages before the current one: the API pages forward with a
// cursor (next), and going back pops it.
export class Pager {
  constructor(onChange) { this.stack = []; this.cursor = ''; this.next = null; this.onChange = onChange; }
  reset() { this.stack = []; this.cursor = ''; this.next = null; }
  forward() { if (!this.next) return; this.stack.push(this.cursor); this.cursor = this.next; this.onChange(); }
  back() { if (this.stack.length === 0) return; this.cursor = this.stack.pop(); this.onChange(); }
  // view is the pager's buttons and position for a page of shown rows out of total.
  view(shown, total, limit) {
    const first = this.stack.length * limit;
    return h('div', { class: 'pager' },
      h('button', { class: 'secondary', type: 'button', disabled: this.stack.length === 0, onclick: () => this.back() }, '‹ Prev'),
      h('button', { class: 'secondary', type: 'button', disabled: !this.next, onclick: () => this.forward() }, 'Next ›'),
      shown === 0 ? '' : num(first + 1) + '–' + num(first + shown) + (total !== undefined && total !== null ? ' of ' + num(total) : ''));
  }
}

// errorBox shows a refusal in place of a section's content.
export function errorBox(err) {
  return h('p', { class: 'banner', role: 'alert' }, err.message || String(err));
}
