// The console's shell: routes (the part of the address after #), the header, signing in and out,
// and the poll that refreshes the shown view every 2 s while the tab is visible.
import { ApiError, get, post, del } from './api.js';
import { h, replace } from './dom.js';
import { OverviewView } from './overview.js';
import { QueueView } from './queue.js';
import { MessageExplainView, KeyExplainView } from './explain.js';
import { KeysView } from './keys.js';
import { ClusterView } from './cluster.js';

const POLL_MS = 2000;

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const live = document.getElementById('live');
const nav = document.getElementById('nav');
const logout = document.getElementById('logout');

// session is what the server said about itself (GET /api/v1/overview) once signed in.
export const session = { overview: null };

let current = null;   // the shown view: {mount(root), refresh() → Promise, unmount?()}
let busy = false;     // a refresh is in flight: the next tick is skipped
let generation = 0;   // bumped on every route change, so a late answer for an old view is dropped

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '').map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  return parts;
}

function viewFor(parts) {
  const [head, a, b, c] = parts;
  switch (head) {
    case undefined: return ['overview', new OverviewView(session)];
    case 'queues':
      if (a === undefined) return ['overview', new OverviewView(session)];
      if (b === 'messages' && c !== undefined) return ['overview', new MessageExplainView(a, c)];
      if (b === 'keys' && c !== undefined) return ['overview', new KeyExplainView(a, c)];
      return ['overview', new QueueView(a, session)];
    case 'keys': return ['keys', new KeysView()];
    case 'cluster': return ['cluster', new ClusterView()];
    case 'login': return ['', new LoginView()];
  }
  return ['', { mount(root) { replace(root, h('p', null, 'No such page. ', h('a', { href: '#/' }, 'Go to the overview.'))); }, refresh() { return Promise.resolve(); } }];
}

async function show() {
  generation++;
  if (current && current.unmount) current.unmount();
  showBanner(null);
  const parts = parseRoute();
  if (parts[0] !== 'login' && !session.overview) {
    if (!(await signedIn())) return;
  }
  const [section, view] = viewFor(parts);
  for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', a.dataset.nav === section);
  current = view;
  view.mount(main);
  await tick(true);
}

// signedIn fetches the overview; on 401 it goes to the login page and answers false.
async function signedIn() {
  try {
    session.overview = await get('/api/v1/overview');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      toLogin();
      return false;
    }
    replace(main, h('div', { class: 'panel' }, h('h2', null, 'The console cannot reach the admin API'),
      h('p', null, e.message)));
    return false;
  }
  nav.hidden = false;
  nav.querySelector('[data-nav=cluster]').hidden = !session.overview.cluster;
  logout.hidden = !session.overview.authentication;
  return true;
}

function toLogin() {
  session.overview = null;
  nav.hidden = true;
  logout.hidden = true;
  const back = location.hash.startsWith('#/login') ? '' : location.hash;
  sessionStorage.setItem('fila.after-login', back);
  if (!location.hash.startsWith('#/login')) location.hash = '#/login';
  else show();
}

// tick refreshes the shown view unless the tab is hidden (or force).
async function tick(force) {
  if (!current || busy || (!force && document.hidden)) {
    setLive();
    return;
  }
  const gen = generation;
  busy = true;
  try {
    await current.refresh();
    if (gen === generation) { showBanner(null); setLive(); }
  } catch (e) {
    if (gen !== generation) return;
    if (e instanceof ApiError && e.status === 401 && !(current instanceof LoginView)) {
      toLogin();
      return;
    }
    showBanner(e.message);
    setLive(e);
  } finally {
    busy = false;
  }
}

function setLive(err) {
  live.hidden = current instanceof LoginView;
  live.classList.toggle('paused', document.hidden);
  live.classList.toggle('error', !!err);
  live.textContent = err ? 'not updating' : document.hidden ? 'paused' : 'live · ' + new Date().toLocaleTimeString();
}

export function showBanner(msg) {
  banner.hidden = !msg;
  banner.textContent = msg || '';
}

// LoginView asks for an API key and exchanges it for the session cookies.
class LoginView {
  mount(root) {
    const input = h('input', { type: 'password', name: 'api_key', id: 'api-key', autocomplete: 'current-password', required: true, placeholder: 'API key' });
    const err = h('p', { class: 'banner', hidden: true, role: 'alert' });
    const form = h('form', { id: 'login-form', method: 'post' }, // never a GET: the key stays out of addresses
      h('label', { for: 'api-key' }, 'API key'), input, err,
      h('button', { type: 'submit' }, 'Sign in'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.hidden = true;
      try {
        await post('/api/v1/session', { api_key: input.value });
      } catch (e) {
        err.hidden = false;
        err.textContent = e.status === 401 ? 'That key is unknown, revoked or expired.' : e.message;
        return;
      }
      input.value = '';
      const back = sessionStorage.getItem('fila.after-login') || '#/';
      sessionStorage.removeItem('fila.after-login');
      if (await signedIn()) {
        if (location.hash === back) show(); else location.hash = back;
      }
    });
    replace(root, h('div', { class: 'panel login' },
      h('h1', null, 'Sign in to Fila'),
      h('p', { class: 'muted' }, 'This server requires an API key. The console keeps it in a cookie only this server can read.'),
      form));
    input.focus();
  }
  refresh() { return Promise.resolve(); }
}

logout.addEventListener('click', async () => {
  try { await del('/api/v1/session'); } catch { /* signed out either way */ }
  toLogin();
});

window.addEventListener('hashchange', show);
document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(true); else setLive(); });
setInterval(() => tick(false), POLL_MS);
show();
