// API keys and their ACLs (admin only): list, create (the secret is shown once), revoke, and
// edit a key's permissions.
import { get, post, put, q } from './api.js';
import { h, replace, table, when, errorBox } from './dom.js';

const KINDS = ['produce', 'consume', 'admin', 'throttle'];

export class KeysView {
  constructor() { this.editing = null; this.revoking = null; }

  mount(root) {
    this.list = h('div');
    this.created = h('div', { id: 'key-created' });
    this.editor = h('div');
    const name = h('input', { type: 'text', placeholder: 'Name', 'aria-label': 'Key name', required: true, id: 'key-name' });
    const expires = h('input', { type: 'datetime-local', 'aria-label': 'Expires at (optional)', id: 'key-expires' });
    const superadmin = h('input', { type: 'checkbox', id: 'key-superadmin' });
    const form = h('form', { class: 'form-row', id: 'key-form' }, name,
      h('label', { class: 'muted small', for: 'key-expires' }, 'expires'), expires,
      h('label', null, superadmin, ' superadmin'), h('button', { type: 'submit' }, 'Create key'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const body = { name: name.value.trim(), superadmin: superadmin.checked };
      if (expires.value) body.expires_at = new Date(expires.value).getTime();
      try {
        const res = await post('/api/v1/keys', body);
        replace(this.created, h('div', { class: 'panel' },
          h('h2', null, 'Key ', res.id, ' created'),
          h('p', null, 'Its secret is shown this once. Copy it now: the server keeps only a hash.'),
          h('div', { class: 'secret', id: 'key-secret' }, res.secret)));
        name.value = ''; expires.value = ''; superadmin.checked = false;
        await this.refresh();
      } catch (e) { replace(this.created, errorBox(e)); }
    });
    replace(root, h('h1', null, 'API keys'),
      h('p', { class: 'muted' }, 'Who may do what on which queues: each permission is a kind and a queue pattern (', h('code', null, 'orders*'), ' covers orders and orders.dlq).'),
      h('section', { class: 'panel' }, h('h2', null, 'New key'), form), this.created,
      h('section', { class: 'panel' }, this.list), this.editor);
  }

  async refresh() {
    if (this.editing) return; // an open editor is not redrawn under the user's hands
    let res;
    try {
      res = await get('/api/v1/keys');
    } catch (e) {
      if (e.status === 401) throw e;
      replace(this.list, errorBox(e));
      return;
    }
    const keys = res.keys || [];
    replace(this.list, table([
      { label: 'ID', cell: (k) => h('span', { class: 'mono' }, k.id) },
      { label: 'Name', name: true, cell: (k) => k.name || '–' },
      { label: 'Created', cell: (k) => when(k.created_at) },
      { label: 'Expires', cell: (k) => k.expires_at ? when(k.expires_at) : 'never' },
      { label: 'Permissions', name: true, cell: (k) => k.superadmin ? h('span', { class: 'tag' }, 'superadmin')
        : (k.acl || []).length === 0 ? h('span', { class: 'muted' }, 'none')
          : (k.acl || []).map((p) => h('div', { class: 'mono' }, p.kind, ' ', p.pattern)) },
      { label: '', cell: (k) => this.actions(k) },
    ], keys, 'No API keys yet.'));
  }

  actions(k) {
    const edit = h('button', { type: 'button', class: 'secondary' }, 'Edit ACL');
    edit.addEventListener('click', () => this.edit(k));
    const revoke = h('button', { type: 'button', class: this.revoking === k.id ? 'danger' : 'secondary' },
      this.revoking === k.id ? 'Confirm revoke' : 'Revoke');
    revoke.addEventListener('click', async () => {
      if (this.revoking !== k.id) { this.revoking = k.id; await this.refresh(); return; }
      this.revoking = null;
      try { await post('/api/v1/keys/' + q(k.id) + '/revoke'); } catch (e) { replace(this.created, errorBox(e)); }
      await this.refresh();
    });
    return h('span', { class: 'toolbar' }, k.superadmin ? '' : edit, revoke);
  }

  edit(k) {
    this.editing = k.id;
    const rows = h('div');
    const addRow = (p) => {
      const kind = h('select', { 'aria-label': 'Kind' }, KINDS.map((x) => h('option', { value: x, selected: p && p.kind === x }, x)));
      const pattern = h('input', { type: 'text', value: p ? p.pattern : '*', 'aria-label': 'Queue pattern' });
      const remove = h('button', { type: 'button', class: 'secondary' }, '✕');
      const row = h('div', { class: 'acl-row' }, kind, pattern, remove);
      remove.addEventListener('click', () => row.remove());
      rows.append(row);
    };
    (k.acl || []).forEach(addRow);
    const add = h('button', { type: 'button', class: 'secondary' }, 'Add permission');
    add.addEventListener('click', () => addRow(null));
    const save = h('button', { type: 'button' }, 'Save');
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    const msg = h('span', { class: 'small' });
    const close = () => { this.editing = null; replace(this.editor); this.refresh(); };
    cancel.addEventListener('click', close);
    save.addEventListener('click', async () => {
      const acl = [...rows.children].map((r) => ({ kind: r.querySelector('select').value, pattern: r.querySelector('input').value.trim() }));
      try {
        await put('/api/v1/keys/' + q(k.id) + '/acl', { acl });
        close();
      } catch (e) { replace(msg, h('span', { class: 'tag bad' }, e.message)); }
    });
    replace(this.editor, h('section', { class: 'panel' },
      h('h2', null, 'Permissions of ', k.name || k.id), rows,
      h('div', { class: 'toolbar' }, add, save, cancel, msg)));
  }
}
