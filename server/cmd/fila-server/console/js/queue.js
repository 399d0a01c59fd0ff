// A queue's page: its counts, a chart of its rates, its fairness keys, its messages, the
// throttles active on it and its dead-letter queue with redrive. Every list is one page asked
// of the server (search, sort and a cursor), refreshed in place by the poll.
import { get, post, q, query } from './api.js';
import { h, replace, card, table, num, rate, pct, age, when, kv, link, route, debounce, Pager, errorBox } from './dom.js';
import { RateChart } from './chart.js';

const KEYS_LIMIT = 50, MSG_LIMIT = 20, DLQ_LIMIT = 10, BUCKET_LIMIT = 20;

export class QueueView {
  constructor(name) {
    this.name = name;
    this.keySearch = '';
    this.keySort = 'backlog';
    this.keyPager = new Pager(() => this.refreshKeys().catch(() => {}));
    this.msgPager = new Pager(() => this.refreshMessages().catch(() => {}));
    this.dlqPager = new Pager(() => this.refreshDLQ().catch(() => {}));
    this.expanded = new Set();     // DLQ messages whose payload preview is open
    this.openThrottle = null;      // the throttle whose buckets are shown
    this.ticks = 0;
    this.dlqDepth = 0;
  }

  path(suffix) { return '/api/v1/queues/' + q(this.name) + (suffix || ''); }

  mount(root) {
    this.sub = h('div', { class: 'muted small' });
    this.cards = h('div', { class: 'cards' });
    this.canvas = h('canvas', { id: 'rate-chart', 'aria-label': 'Enqueued and acknowledged per second' });
    this.chart = new RateChart(this.canvas, [{ key: 'enq', color: '--enq' }, { key: 'ack', color: '--ack' }]);
    this.keys = h('div');
    this.messages = h('div');
    this.throttles = h('div');
    this.dlq = h('div');
    this.definition = h('div');
    this.redriveResult = h('span', { class: 'muted small', id: 'redrive-result' });

    const keySearch = h('input', { type: 'search', placeholder: 'Search keys', 'aria-label': 'Search fairness keys', id: 'key-search' });
    keySearch.addEventListener('input', debounce(() => { this.keySearch = keySearch.value; this.keyPager.reset(); this.refreshKeys().catch(() => {}); }, 250));
    const keySort = h('select', { 'aria-label': 'Sort fairness keys', id: 'key-sort' },
      h('option', { value: 'backlog' }, 'largest backlog'), h('option', { value: 'deliveries' }, 'most deliveries'),
      h('option', { value: 'name' }, 'by name'));
    keySort.addEventListener('change', () => { this.keySort = keySort.value; this.keyPager.reset(); this.refreshKeys().catch(() => {}); });

    const explainID = h('input', { type: 'text', placeholder: 'Message ID', 'aria-label': 'Message ID to explain', id: 'explain-id', class: 'mono', size: 38 });
    const explainForm = h('form', { class: 'toolbar', id: 'explain-form' }, explainID, h('button', { type: 'submit', class: 'secondary' }, 'Explain'));
    explainForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = explainID.value.trim();
      if (id) location.hash = route('queues', this.name, 'messages', id);
    });

    const count = h('input', { type: 'number', min: 1, placeholder: 'all', 'aria-label': 'Messages to redrive', id: 'redrive-count' });
    const reclassify = h('select', { 'aria-label': 'Reclassify', id: 'redrive-reclassify' },
      h('option', { value: '2' }, 'keep their classification'),
      h('option', { value: '1' }, 'classify the unclassified'),
      h('option', { value: '0' }, 'classify all again'));
    const redrive = h('button', { type: 'button', id: 'redrive' }, 'Redrive');
    let armed = null;
    redrive.addEventListener('click', async () => {
      const n = count.value ? Number(count.value) : this.dlqDepth;
      if (!armed) { // a second click confirms: no native dialog
        redrive.textContent = 'Confirm: redrive ' + num(n) + ' message' + (n === 1 ? '' : 's');
        redrive.classList.add('danger');
        armed = setTimeout(() => { armed = null; redrive.textContent = 'Redrive'; redrive.classList.remove('danger'); }, 5000);
        return;
      }
      clearTimeout(armed); armed = null;
      redrive.textContent = 'Redrive'; redrive.classList.remove('danger');
      redrive.disabled = true;
      try {
        const res = await post(this.path('/redrive'), { count: n, reclassify: Number(reclassify.value) });
        replace(this.redriveResult, 'Redriven: ', num(res.redriven), ' message', res.redriven === 1 ? '' : 's', '.');
        this.dlqPager.reset();
        await this.refresh();
      } catch (e) {
        replace(this.redriveResult, h('span', { class: 'tag bad' }, e.message));
      } finally {
        redrive.disabled = false;
      }
    });

    replace(root,
      h('div', { class: 'crumbs' }, link('Overview'), ' / queue'),
      h('h1', { id: 'queue-name' }, this.name), this.sub, this.cards,
      h('section', { class: 'panel' },
        h('div', { class: 'panel-head' }, h('h2', null, 'Rates'),
          h('div', { class: 'legend' }, h('span', { class: 'enq' }, 'enqueued/s'), h('span', { class: 'ack' }, 'acked/s')),
          h('span', { class: 'muted small' }, 'last minute’s average, sampled every 2 s while this page is open')),
        h('div', { class: 'chart-wrap' }, this.canvas)),
      h('div', { class: 'grid2' },
        h('section', { class: 'panel', id: 'keys' },
          h('div', { class: 'panel-head' }, h('h2', null, 'Fairness keys'), keySearch, keySort), this.keys),
        h('section', { class: 'panel', id: 'messages' },
          h('div', { class: 'panel-head' }, h('h2', null, 'Messages'), explainForm), this.messages)),
      h('section', { class: 'panel', id: 'throttles' }, h('h2', null, 'Throttles'), this.throttles),
      h('section', { class: 'panel', id: 'dlq' },
        h('div', { class: 'panel-head' }, h('h2', null, 'Dead-letter queue'),
          h('span', { class: 'toolbar' }, count, reclassify, redrive, this.redriveResult)),
        this.dlq),
      h('details', { class: 'panel' }, h('summary', null, 'Definition'), this.definition));
    this.onResize = () => this.chart.draw();
    window.addEventListener('resize', this.onResize);
  }

  unmount() { window.removeEventListener('resize', this.onResize); }

  async refresh() {
    // The sections fail on their own (a key without the permission, no DLQ) and say so in place.
    const parts = [this.refreshSummary(), this.refreshKeys(), this.refreshMessages(), this.refreshDLQ()];
    if (this.ticks % 5 === 0) parts.push(this.refreshThrottles()); // they change slowly
    this.ticks++;
    const results = await Promise.allSettled(parts);
    const signedOut = results.find((r) => r.status === 'rejected' && r.reason && r.reason.status === 401);
    if (signedOut) throw signedOut.reason;
  }

  async refreshSummary() {
    let qs;
    try {
      qs = await get(this.path());
    } catch (e) { replace(this.cards, errorBox(e)); throw e; }
    this.dlqDepth = qs.dlq_depth || 0;
    replace(this.cards,
      card('Depth', num(qs.depth)), card('Ready', num(qs.ready)), card('In flight', num(qs.in_flight)),
      card('Delayed', num(qs.delayed)), qs.throttled !== undefined ? card('Throttled', num(qs.throttled)) : '',
      qs.held > 0 ? card('Held (ordering)', num(qs.held)) : '', card('Parked', num(qs.parked)),
      card('Dead-lettered', num(qs.dlq_depth), qs.dlq_depth > 0 ? 'bad' : ''),
      card('Oldest ready', age(qs.oldest_age_ms)), card('Fairness keys', num(qs.fairness_keys)),
      qs.consumers !== undefined ? card('Consumers', num(qs.consumers)) : '',
      card('Enqueued/s', rate(qs.enqueued_per_s)), card('Acked/s', rate(qs.acked_per_s)));
    this.chart.add({ enq: qs.enqueued_per_s || 0, ack: qs.acked_per_s || 0 });
    if (!this.defined) { replace(this.definition, kv(qs.definition || {})); this.defined = true; }
    replace(this.sub, summary(qs.definition || {}));
  }

  async refreshKeys() {
    try {
      const page = await get(this.path('/keys') + query({ search: this.keySearch, sort: this.keySort, after: this.keyPager.cursor, limit: KEYS_LIMIT }));
      this.keyPager.next = page.next || null;
      const rows = page.keys || [];
      replace(this.keys, table([
        { label: 'Key', name: true, cell: (k) => link(k.key === '' ? '(no key)' : k.key, 'queues', this.name, 'keys', k.key) },
        { label: 'Backlog', num: true, cell: (k) => num(k.backlog) },
        { label: 'Weight', num: true, cell: (k) => num(k.weight) },
        { label: 'Delivered/min', num: true, title: 'Deliveries in the last minute', cell: (k) => num(k.deliveries_last_minute) },
        { label: 'Fair share', num: true, title: 'The share of the last minute’s deliveries its weight entitles it to', cell: (k) => pct(k.weighted_share) },
        { label: 'Deficit', num: true, cell: (k) => num(k.deficit) },
      ], rows, this.keySearch ? 'No key matches.' : 'No fairness key has a backlog.'),
      this.keyPager.view(rows.length, page.total, KEYS_LIMIT));
    } catch (e) { replace(this.keys, errorBox(e)); throw e; }
  }

  async refreshMessages() {
    try {
      const page = await get(this.path('/messages') + query({ count: MSG_LIMIT, after: this.msgPager.cursor }));
      this.msgPager.next = page.next || null;
      const rows = page.messages || [];
      replace(this.messages, table([
        { label: 'ID', cell: (m) => h('a', { href: route('queues', this.name, 'messages', m.id), class: 'mono', title: m.id + ': explain' }, '…' + m.id.slice(-12)) },
        { label: 'State', cell: (m) => stateTag(m.state) },
        { label: 'Key', name: true, cell: (m) => m.fairness_key || '–' },
        { label: 'Tries', num: true, cell: (m) => num(m.attempts) },
        { label: 'Enqueued', cell: (m) => age(Date.now() - Date.parse(m.enqueued_at)) + ' ago' },
        { label: 'Payload', name: true, cell: (m) => clip(m.preview, 60) },
      ], rows, 'The queue is empty.'),
      this.msgPager.view(rows.length, undefined, MSG_LIMIT));
    } catch (e) { replace(this.messages, errorBox(e)); throw e; }
  }

  async refreshDLQ() {
    const dlqName = this.name + '.dlq';
    try {
      const page = await get('/api/v1/queues/' + q(dlqName) + '/messages' + query({ count: DLQ_LIMIT, after: this.dlqPager.cursor }));
      this.dlqPager.next = page.next || null;
      const rows = page.messages || [];
      replace(this.dlq, table([
        { label: 'ID', cell: (m) => h('a', { href: route('queues', dlqName, 'messages', m.id), class: 'mono', title: m.id + ': explain' }, '…' + m.id.slice(-12)) },
        { label: 'Why', cell: (m) => m.dead_letter && m.dead_letter.reason ? h('span', { class: 'tag bad' }, m.dead_letter.reason.replaceAll('_', ' ')) : '–' },
        { label: 'Attempts', num: true, cell: (m) => num(m.dead_letter ? m.dead_letter.attempts : m.attempts) },
        { label: 'Error', name: true, cell: (m) => m.error || m.last_error || '–' },
        { label: 'Died', cell: (m) => m.dead_letter && m.dead_letter.at ? when(m.dead_letter.at) : '–' },
        { label: 'Headers', name: true, cell: (m) => {
          const own = Object.fromEntries(Object.entries(m.headers || {}).filter(([k]) => !k.startsWith('fila-dead-letter-')));
          return Object.keys(own).length ? kv(own) : '–';
        } },
        { label: 'Payload', name: true, cell: (m) => this.payloadCell(m) },
      ], rows, 'No dead-lettered messages.'),
      this.dlqPager.view(rows.length, this.dlqDepth, DLQ_LIMIT));
    } catch (e) {
      if (e.status === 404) replace(this.dlq, h('p', { class: 'muted' }, 'This queue has no dead-letter queue.'));
      else replace(this.dlq, errorBox(e));
    }
  }

  payloadCell(m) {
    const open = this.expanded.has(m.id);
    const toggle = h('button', { type: 'button', class: 'link small' }, open ? 'hide' : 'show');
    toggle.addEventListener('click', () => {
      if (this.expanded.has(m.id)) this.expanded.delete(m.id); else this.expanded.add(m.id);
      this.refreshDLQ();
    });
    const size = num(m.payload_bytes) + ' B';
    if (!open) return h('span', null, clip(m.preview, 40), ' ', h('span', { class: 'muted small' }, size), ' ', toggle);
    return h('div', null, h('span', { class: 'muted small' }, size, m.preview_truncated ? ', first ' + num(m.preview.length) + ' characters shown' : ''), ' ', toggle,
      h('pre', { class: 'preview' }, m.preview));
  }

  async refreshThrottles() {
    try {
      const all = (await get('/api/v1/throttles')).throttles || [];
      const mine = all.filter((t) => !Array.isArray(t.queues) || t.queues.includes(this.name));
      const rows = mine.slice(0, 50);
      const view = [table([
        { label: 'Throttle', name: true, cell: (t) => {
          const b = h('button', { type: 'button', class: 'link' }, t.name);
          b.addEventListener('click', () => { this.openThrottle = this.openThrottle === t.name ? null : t.name; this.refreshThrottles(); });
          return b;
        } },
        { label: 'Limits', cell: (t) => limits(t.limits) },
        { label: 'Key', name: true, cell: (t) => t.key || '(unkeyed)' },
        { label: 'Waiting', num: true, cell: (t) => num(t.waiting) },
        { label: 'Active buckets', num: true, cell: (t) => num(t.active_buckets) },
        { label: 'At limit', num: true, cell: (t) => t.buckets_at_limit > 0 ? h('span', { class: 'tag warn' }, num(t.buckets_at_limit)) : '0' },
      ], rows, 'No throttle is active on this queue.')];
      if (mine.length > rows.length) view.push(h('p', { class: 'muted small' }, 'The first 50 of ', num(mine.length), ' throttles.'));
      if (this.openThrottle) view.push(await this.buckets(this.openThrottle));
      replace(this.throttles, view);
    } catch (e) { replace(this.throttles, errorBox(e)); throw e; }
  }

  async buckets(name) {
    try {
      const page = await get('/api/v1/throttles/' + q(name) + '/buckets' + query({ limit: BUCKET_LIMIT }));
      const total = page.total;
      const rows = page.buckets || [];
      return h('div', null, h('h2', null, 'Buckets of ', name),
        table([
          { label: 'Bucket', name: true, cell: (b) => b.missing ? '(messages without the key)' : (b.key || '(the one bucket)') },
          { label: 'Waiting', num: true, cell: (b) => num(b.waiting) },
          { label: 'Counted / limit', cell: (b) => (b.counted || []).map((c, i) => num(c) + ' / ' + limit((b.limits || [])[i])).join(', ') },
          { label: 'Room again', cell: (b) => b.next_room_at ? when(b.next_room_at) : 'now' },
        ], rows, 'No active bucket.'),
        page.next ? h('p', { class: 'muted small' }, 'The first ', num(rows.length), ' of ', num(total), ' buckets.') : '');
    } catch (e) { return errorBox(e); }
  }
}

export function stateTag(state) {
  const cls = { ready: 'ok', leased: '', delayed: 'warn', throttled: 'warn', parked: 'bad', dead_lettered: 'bad' }[state];
  return h('span', { class: 'tag ' + (cls ?? '') }, (state || 'unknown').replaceAll('_', ' '));
}

function clip(s, n) {
  s = s || '';
  return s.length > n ? s.slice(0, n) + '…' : s;
}

function limit(l) {
  return l ? num(l.max) + ' per ' + age(l.window_ms) : '–';
}

function limits(ls) {
  return Array.isArray(ls) && ls.length ? ls.map(limit).join(', ') : '–';
}

// summary is a line of a queue's settings worth seeing at once.
function summary(def) {
  const bits = [];
  if (def.ordering) bits.push('ordering: ' + def.ordering);
  if (Number(def.max_attempts) > 0) bits.push('max attempts ' + def.max_attempts);
  if (def.lease_timeout_ms) bits.push('lease ' + age(def.lease_timeout_ms));
  if (def.dlq || def.dead_letter_queue) bits.push('DLQ ' + (def.dlq || def.dead_letter_queue));
  return bits.join(' · ');
}
