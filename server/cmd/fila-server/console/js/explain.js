// Explain: why a message, or a fairness key's messages, are not being delivered now, each reason
// with the figure behind it, as the broker's scheduler sees it.
import { get, q } from './api.js';
import { h, replace, card, num, pct, when, kv, link, errorBox } from './dom.js';
import { stateTag } from './queue.js';

// Fields of a reason that are times (Unix ms) are shown as times.
const TIME_FIELDS = ['until', 'next_room_at', 'leased_at', 'expires_at'];

function reasonList(reasons) {
  if (!reasons || reasons.length === 0) return h('p', { class: 'muted' }, 'No reason holds it back.');
  return h('ul', { class: 'reasons', id: 'reasons' }, reasons.map((r) => {
    const figures = {};
    for (const [k, v] of Object.entries(r)) {
      if (k === 'reason' || k === 'text') continue;
      figures[k] = TIME_FIELDS.includes(k) && typeof v === 'number' ? when(v) : v;
    }
    return h('li', { 'data-reason': r.reason },
      h('span', { class: 'tag warn' }, (r.reason || '').replaceAll('_', ' ')), ' ',
      h('span', { class: 'text' }, r.text || ''),
      Object.keys(figures).length ? kv(figures) : '');
  }));
}

export class MessageExplainView {
  constructor(queue, id) { this.queue = queue; this.id = id; }

  mount(root) {
    this.body = h('div');
    this.message = h('div');
    replace(root,
      h('div', { class: 'crumbs' }, link('Overview'), ' / ', link(this.queue, 'queues', this.queue), ' / message'),
      h('h1', null, 'Why is this message not delivered?'),
      h('div', { class: 'mono muted' }, this.id),
      h('section', { class: 'panel' }, this.body),
      h('section', { class: 'panel' }, h('h2', null, 'The message'), this.message));
  }

  async refresh() {
    const base = '/api/v1/queues/' + q(this.queue) + '/messages/' + q(this.id);
    const [ex, msg] = await Promise.allSettled([get(base + '/explain'), get(base)]);
    if (ex.status === 'rejected') {
      if (ex.reason.status === 401) throw ex.reason;
      replace(this.body, errorBox(ex.reason));
    } else {
      const e = ex.value;
      replace(this.body,
        h('div', { class: 'verdict' + (e.deliverable_now ? ' ok' : ''), id: 'verdict' }, stateTag(e.state), ' ',
          e.deliverable_now ? h('strong', null, 'Deliverable now') : h('strong', null, 'Not deliverable now')),
        reasonList(e.reasons));
    }
    if (msg.status === 'rejected') {
      replace(this.message, errorBox(msg.reason));
      return;
    }
    const m = msg.value;
    const fields = {
      fairness_key: m.fairness_key, weight: m.weight, attempts: m.attempts, redrive_count: m.redrive_count,
      enqueued_at: when(m.enqueued_at),
    };
    if (m.ordering_group != null) fields.ordering_group = m.ordering_group;
    if (m.not_before) fields.not_before = when(m.not_before);
    if (m.lease) { fields.consumer = m.lease.consumer; fields.lease_expires = when(m.lease.expires_at); }
    if (m.last_error || m.error) fields.error = m.error || m.last_error;
    replace(this.message, kv(fields),
      Object.keys(m.headers || {}).length ? [h('h3', null, 'Headers'), kv(m.headers)] : '',
      h('h3', null, 'Payload'), h('pre', { class: 'preview' }, m.preview || ''),
      m.preview_truncated ? h('p', { class: 'muted small' }, 'The first ', num(m.preview.length), ' characters of ', num(m.payload_bytes), ' bytes.') : '');
  }
}

export class KeyExplainView {
  constructor(queue, key) { this.queue = queue; this.key = key; }

  mount(root) {
    this.cards = h('div', { class: 'cards' });
    this.body = h('div');
    replace(root,
      h('div', { class: 'crumbs' }, link('Overview'), ' / ', link(this.queue, 'queues', this.queue), ' / fairness key'),
      h('h1', null, 'Why is “', this.key, '” slow?'),
      this.cards,
      h('section', { class: 'panel' }, this.body));
  }

  async refresh() {
    const e = await get('/api/v1/queues/' + q(this.queue) + '/keys/' + q(this.key) + '/explain');
    const shown = ['key', 'backlog', 'weight', 'deficit', 'reasons', 'queue', 'ready', 'held', 'in_flight',
      'deliveries_last_minute', 'weighted_share'];
    replace(this.cards, card('Backlog', num(e.backlog)),
      e.ready !== undefined ? card('Ready', num(e.ready)) : '', e.held !== undefined ? card('Held', num(e.held)) : '',
      e.in_flight !== undefined ? card('In flight', num(e.in_flight)) : '',
      card('Weight', num(e.weight)), card('Deficit', num(e.deficit)),
      e.deliveries_last_minute !== undefined ? card('Delivered/min', num(e.deliveries_last_minute)) : '',
      e.weighted_share !== undefined ? card('Fair share', pct(e.weighted_share)) : '');
    const extra = {};
    for (const [k, v] of Object.entries(e)) {
      if (!shown.includes(k)) extra[k] = v;
    }
    replace(this.body, reasonList(e.reasons),
      Object.keys(extra).length ? [h('h3', null, 'The scheduler’s figures'), kv(extra)] : '');
  }
}
