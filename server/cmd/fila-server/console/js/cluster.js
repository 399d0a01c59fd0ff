// The cluster: its nodes and their states, who leads the meta group, queue leaderships and
// rebalancing, as GET /api/v1/cluster reports them.
import { get } from './api.js';
import { h, replace, card, num, kv } from './dom.js';
import { nodesTable } from './overview.js';

export class ClusterView {
  mount(root) {
    this.cards = h('div', { class: 'cards' });
    this.nodes = h('div');
    this.rest = h('div');
    replace(root, h('h1', null, 'Cluster'), this.cards,
      h('section', { class: 'panel' }, h('h2', null, 'Nodes'), this.nodes),
      h('section', { class: 'panel' }, h('h2', null, 'Status'), this.rest));
  }

  async refresh() {
    const cl = await get('/api/v1/cluster');
    const nodes = Array.isArray(cl.nodes) ? cl.nodes : [];
    replace(this.cards,
      card('Nodes', num(nodes.length)),
      card('Meta leader', cl.meta_leader ?? '–'),
      card('Rebalancing', cl.rebalancing ?? '–'),
      cl.queue_leaderships !== undefined ? card('Leaderships here', num(cl.queue_leaderships)) : '');
    replace(this.nodes, nodesTable(cl));
    replace(this.rest, kv(cl, ['nodes']));
  }
}
