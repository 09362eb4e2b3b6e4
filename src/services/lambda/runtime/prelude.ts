/**
 * JavaScript that runs inside every fresh sandbox context before the user's code. It defines the
 * globals lambdas may use (console, write, Response, Headers, req/body/query/headers) and the
 * finishing function that turns a handler's result into one JSON string for the host. Only
 * strings cross the isolate boundary, so no host object ever becomes reachable from user code.
 */
export const PRELUDE = String.raw`
(function () {
  'use strict';
  const g = globalThis;
  const MAX_LOG = 65536;
  const logs = [];
  let logSize = 0;
  const written = [];
  let wroteAny = false;

  function fmt(v) {
    if (typeof v === 'string') return v;
    try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); }
  }
  function log(level) {
    return function () {
      const line = Array.prototype.map.call(arguments, fmt).join(' ');
      if (logSize >= MAX_LOG) return;
      logSize += line.length;
      logs.push({ level: level, message: line.length > MAX_LOG ? line.slice(0, MAX_LOG) : line });
    };
  }
  const consoleObj = { log: log('log'), info: log('info'), debug: log('debug'), warn: log('warn'), error: log('error'), trace: log('trace') };

  class Headers {
    constructor(init) {
      this._m = new Map();
      if (init instanceof Headers) { init.forEach((v, k) => this.append(k, v)); }
      else if (Array.isArray(init)) { for (const p of init) this.append(p[0], p[1]); }
      else if (init && typeof init === 'object') { for (const k of Object.keys(init)) this.append(k, init[k]); }
    }
    append(k, v) { k = String(k).toLowerCase(); const o = this._m.get(k); this._m.set(k, o === undefined ? String(v) : o + ', ' + String(v)); }
    set(k, v) { this._m.set(String(k).toLowerCase(), String(v)); }
    get(k) { const v = this._m.get(String(k).toLowerCase()); return v === undefined ? null : v; }
    has(k) { return this._m.has(String(k).toLowerCase()); }
    delete(k) { this._m.delete(String(k).toLowerCase()); }
    forEach(fn) { for (const [k, v] of this._m) fn(v, k, this); }
    entries() { return this._m.entries(); }
    keys() { return this._m.keys(); }
    values() { return this._m.values(); }
    [Symbol.iterator]() { return this._m.entries(); }
  }

  class Response {
    constructor(body, init) {
      init = init || {};
      this.status = init.status === undefined ? 200 : Number(init.status);
      if (!Number.isInteger(this.status) || this.status < 200 || this.status > 599) throw new RangeError('Response status must be an integer from 200 to 599');
      this.statusText = init.statusText === undefined ? '' : String(init.statusText);
      this.headers = new Headers(init.headers);
      if (body === undefined || body === null) this._body = '';
      else if (typeof body === 'string') this._body = body;
      else if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) { const u = body instanceof ArrayBuffer ? new Uint8Array(body) : new Uint8Array(body.buffer, body.byteOffset, body.byteLength); let s = ""; for (let i = 0; i < u.length; i++) s += String.fromCharCode(u[i]); this._body = s; }
      else this._body = String(body);
      if (typeof body === 'string' && !this.headers.has('content-type')) this.headers.set('content-type', 'text/plain; charset=utf-8');
    }
    get ok() { return this.status >= 200 && this.status < 300; }
    text() { return Promise.resolve(this._body); }
    json() { return Promise.resolve(JSON.parse(this._body)); }
    static json(data, init) {
      const r = new Response(JSON.stringify(data), init);
      r.headers.set('content-type', 'application/json; charset=utf-8');
      return r;
    }
  }

  function write(text) {
    wroteAny = true;
    if (typeof text === 'string') written.push(text);
    else if (text === undefined || text === null) written.push('');
    else if (typeof text === 'object') written.push(fmt(text));
    else written.push(String(text));
  }

  function finish(value) {
    if (wroteAny) return JSON.stringify({ kind: 'text', text: written.join(''), logs: logs });
    if (value instanceof Response) {
      const headers = [];
      value.headers.forEach((v, k) => headers.push([k, v]));
      return JSON.stringify({ kind: 'response', status: value.status, headers: headers, body: value._body, logs: logs });
    }
    let json;
    try { json = JSON.stringify(value === undefined ? null : value); }
    catch (e) { return fail(new Error('return value is not representable as JSON: ' + (e && e.message))); }
    if (json === undefined) json = 'null';
    return JSON.stringify({ kind: 'json', json: json, logs: logs });
  }

  function fail(e) {
    let message;
    try { message = e instanceof Error ? String(e.message) : fmt(e); } catch (x) { message = 'lambda threw a value that cannot be shown'; }
    return JSON.stringify({ kind: 'error', message: message || 'lambda failed', logs: logs });
  }

  Object.defineProperty(g, 'console', { value: consoleObj, writable: true, configurable: true });
  Object.defineProperty(g, 'Headers', { value: Headers, writable: true, configurable: true });
  Object.defineProperty(g, 'Response', { value: Response, writable: true, configurable: true });
  Object.defineProperty(g, 'write', { value: write, writable: true, configurable: true });

  // Host-facing entry points; deleted from the global before user code sees them is not possible
  // for modules, so they are kept on a non-enumerable symbol-free name and hold no host objects.
  const install = function (reqJson) {
    // A warm module context serves many calls in turn: each starts with empty output buffers.
    logs.length = 0; logSize = 0; written.length = 0; wroteAny = false;
    const req = JSON.parse(reqJson);
    g.req = req; g.body = req.body; g.query = req.query; g.headers = req.headers;
    return req;
  };
  Object.defineProperty(g, '__stratus', {
    value: Object.freeze({
      install: install,
      runModule: function (ns) {
        const req = g.req;
        try {
          if (!ns || typeof ns.default !== 'function') return Promise.resolve(fail(new TypeError('the default export is not a function')));
          return Promise.resolve().then(() => ns.default(req)).then(finish, fail);
        } catch (e) { return Promise.resolve(fail(e)); }
      },
      call: function (reqJson) {
        try { install(reqJson); } catch (e) { return Promise.resolve(fail(e)); }
        return this.runModule(g.__stratus_ns);
      },
      finishScript: function (value) {
        return Promise.resolve(value).then(finish, fail);
      },
      fail: fail,
    }),
    enumerable: false,
  });
})();
`;
