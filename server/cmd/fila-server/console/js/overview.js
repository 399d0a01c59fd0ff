// Overview: the node's totals, one page of its queues (searched, sorted, paged by the server:
// never the whole list), and the cluster's nodes when there is a cluster.
import { get, query } from './api.js';
import { h, replace, card, table, num, rate, age, link, debounce, Pager, errorBox } from './dom.js';

const LIMIT = 50;

export class OverviewView {
  constructor(session) {
    this.session = session;
    this.search = '';
    this.sort = 'name';
    this.pager = new Pager(() => this.refresh(true));
    this.ticks = 0;
  }

  mount(root) {
    this.cards = h('div', { class: 'cards' });
    this.queues = h('div');
    this.nodes = h('div', { class: 'panel', hidden: true });
    const search = h('input', { type: 'search', placeholder: 'Search queues', 'aria-label': 'Search queues', id: 'queue-search' });
    search.addEventListener('input', debounce(() => { this.search = search.value; this.pager.reset(); this.refresh(true); }, 250));
    const sort = h('select', { 'aria-label': 'Sort queues', id: 'queue-sort' },
      h('option', { value: 'name' }, 'by name'), h('option', { value: 'depth' }, 'deepest first'),
      h('option', { value: 'oldest' }, 'oldest message first'));
    sort.addEventListener('change', () => { this.sort = sort.value; this.pager.reset(); this.refresh(true); });
    this.title = h('h1', null, 'Overview');
    this.sub = h('div', { class: 'muted small' });
    replace(root, this.title, this.sub, this.cards,
      h('section', { class: 'panel' },
        h('div', { class: 'panel-head' }, h('h2', null, 'Queues'), h('span', { class: 'spacer' }), search, sort),
        this.queues),
      this.nodes);
  }

  // refresh polls the totals every time, and the queue list (whose answer walks every queue on
  // the server) every tick up to 2,000 queues, then once in queues/2,000 ticks: every 10 s at
  // 10,000. A search, sort or page change (force) asks at once.
  async refresh(force) {
    const known = this.session.overview ? this.session.overview.queues : 0;
    const every = Math.max(1, Math.ceil(known / 2000));
    const list = force === true || !this.page || this.ticks % every === 0;
    this.ticks++;
    const [ov, page] = await Promise.all([
      get('/api/v1/overview'),
      list ? get('/api/v1/queues' + query({ search: this.search, sort: this.sort, after: this.pager.cursor, limit: LIMIT })) : this.page,
    ]);
    this.page = page;
    this.session.overview = ov;
    this.every = every;
    replace(this.sub, 'Node ', ov.node_id || '–', ' · Fila ', ov.version || '–',
      ' · authentication ', ov.authentication ? 'on' : 'off', ov.cluster ? ' · clustered' : ' · single node');
    replace(this.cards,
      card('Queues', num(ov.queues)), card('Messages', num(ov.messages)), card('In flight', num(ov.in_flight)),
      card('Dead-lettered', num(ov.dlq_messages), ov.dlq_messages > 0 ? 'bad' : ''));
    this.pager.next = page.next || null;
    const rows = page.queues || [];
    replace(this.queues, table([
      { label: 'Queue', name: true, cell: (q) => link(q.name, 'queues', q.name) },
      { label: 'Depth', num: true, cell: (q) => num(q.depth) },
      { label: 'Ready', num: true, cell: (q) => num(q.ready) },
      { label: 'In flight', num: true, cell: (q) => num(q.in_flight) },
      { label: 'Delayed', num: true, cell: (q) => num(q.delayed) },
      { label: 'Parked', num: true, cell: (q) => num(q.parked) },
      { label: 'DLQ', num: true, cell: (q) => q.dlq_depth > 0 ? h('span', { class: 'tag bad' }, num(q.dlq_depth)) : '0' },
      { label: 'Oldest', num: true, title: 'Age of the oldest ready message', cell: (q) => age(q.oldest_age_ms) },
      { label: 'Enq/s', num: true, title: 'Enqueued per second, last minute', cell: (q) => rate(q.enqueued_per_s) },
      { label: 'Ack/s', num: true, title: 'Acknowledged per second, last minute', cell: (q) => rate(q.acked_per_s) },
      { label: 'Keys', num: true, title: 'Fairness keys', cell: (q) => num(q.fairness_keys) },
    ], rows, this.search ? 'No queue matches “' + this.search + '”.' : 'No queues yet.'),
    this.pager.view(rows.length, page.total, LIMIT),
    every > 1 ? h('p', { class: 'muted small' }, 'With ', num(ov.queues), ' queues this list is refreshed every ', every * 2, ' s; the totals every 2 s.') : '');
    if (ov.cluster) {
      this.nodes.hidden = false;
      try {
        const cl = await get('/api/v1/cluster');
        replace(this.nodes, h('div', { class: 'panel-head' }, h('h2', null, 'Nodes'), link('Cluster page', 'cluster')),
          nodesTable(cl));
      } catch (e) {
        replace(this.nodes, h('h2', null, 'Nodes'), errorBox(e));
      }
    }
  }
}

// nodesTable shows a cluster status's nodes, whatever fields they have.
export function nodesTable(cl) {
  const nodes = Array.isArray(cl.nodes) ? cl.nodes : [];
  const cols = [];
  for (const n of nodes) for (const k of Object.keys(n)) if (!cols.includes(k)) cols.push(k);
  return table(cols.map((k) => ({
    label: k.replaceAll('_', ' '),
    num: nodes.every((n) => typeof n[k] === 'number'),
    cell: (n) => {
      const v = n[k];
      if (k === 'id' || k === 'node_id') return h('span', null, String(v), v === cl.meta_leader ? [' ', h('span', { class: 'tag ok' }, 'meta leader')] : '');
      if (typeof v === 'number') return num(v);
      if (typeof v === 'boolean') return v ? 'yes' : 'no';
      if (v === null || v === undefined) return '–';
      return typeof v === 'object' ? JSON.stringify(v) : String(v);
    },
  })), nodes, 'No nodes reported.');
}
