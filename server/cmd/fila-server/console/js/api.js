// The admin API as the console calls it (docs/admin-api.md). Requests are same-origin and carry
// the fila_session cookie the browser keeps (HttpOnly: this script never sees the key); a request
// that changes something also carries the fila_csrf cookie's value in X-CSRF-Token.

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code || '';
  }
}

function csrfToken() {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === 'fila_csrf') return decodeURIComponent(v.join('='));
  }
  return '';
}

// request sends method path with body (JSON) and answers the decoded JSON answer, or throws an
// ApiError with the server's message.
export async function request(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET' && method !== 'HEAD') {
    headers['X-CSRF-Token'] = csrfToken();
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'the server does not answer (' + e.message + ')');
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const msg = (data && data.error) || (res.status + ' ' + res.statusText);
    throw new ApiError(res.status, msg, data && data.code);
  }
  return data;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body);
export const put = (path, body) => request('PUT', path, body);
export const del = (path) => request('DELETE', path);

// q is a path segment: a queue name, key or ID escaped as a whole (a '/' in a name stays in it).
export const q = (s) => encodeURIComponent(s);

// query builds "?a=1&b=2" from the entries whose value is set.
export function query(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return s ? '?' + s : '';
}
