// rlproxy admin page: polls /api/stats every second and redraws the
// per-route rates and charts and the top refused lists. Every value from
// the server goes through textContent or an SVG attribute, never as HTML.
'use strict';
(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const KINDS = ['allowed', 'delayed', 'refused'];
  const WIDTH = 300, HEIGHT = 60, RATE_SECONDS = 5;

  function mean(xs) {
    const last = xs.slice(-RATE_SECONDS);
    if (last.length === 0) return 0;
    const sum = last.reduce((a, b) => a + b, 0);
    return Math.round(sum / last.length * 10) / 10;
  }

  function el(name, cls, text) {
    const e = document.createElement(name);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function chart(svg, rr) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    let top = 1;
    for (const k of KINDS) for (const v of rr[k]) top = Math.max(top, v);
    for (const k of KINDS) {
      const xs = rr[k], n = xs.length;
      if (n === 0) continue;
      const pts = xs.map((v, i) => {
        const x = WIDTH - (n - 1 - i);
        const y = HEIGHT - 2 - v / top * (HEIGHT - 12);
        return x + ',' + y.toFixed(1);
      });
      const line = document.createElementNS(NS, 'polyline');
      line.setAttribute('class', 'line-' + k);
      line.setAttribute('points', pts.join(' '));
      svg.appendChild(line);
    }
    return top;
  }

  function topLists(snap) {
    const box = document.getElementById('top-lists');
    while (box.firstChild) box.removeChild(box.firstChild);
    if (snap.top.length === 0) {
      box.appendChild(el('p', 'none', 'No refusals in the last minute.'));
      return;
    }
    for (const p of snap.top) {
      const t = el('table', 'top');
      t.dataset.policy = p.policy;
      t.appendChild(el('caption', '', p.policy + ': ' + p.refused + ' refusals (counts may be over by at most ' + p.max_error + ')'));
      const head = el('tr');
      for (const h of ['#', 'client', 'refusals']) head.appendChild(el('th', '', h));
      t.appendChild(el('thead')).appendChild(head);
      const body = t.appendChild(el('tbody'));
      p.clients.forEach((c, i) => {
        const tr = el('tr');
        tr.appendChild(el('td', '', i + 1));
        tr.appendChild(el('td', 'client', c.id));
        tr.appendChild(el('td', 'count', c.count));
        body.appendChild(tr);
      });
      box.appendChild(t);
    }
  }

  // overload refreshes each upstream's adaptive limit and its classes.
  function overload(gates) {
    for (const g of gates) {
      const art = document.querySelector('article.gate[data-upstream="' + CSS.escape(g.upstream) + '"]');
      if (!art) continue;
      art.querySelector('.limit').textContent = String(g.limit);
      art.querySelector('.estimate').textContent = String(g.estimate);
      art.querySelector('.min-latency').textContent = String(g.min_latency_ms);
      for (const c of g.classes) {
        const tr = art.querySelector('tr[data-class="' + CSS.escape(c.name) + '"]');
        if (!tr) continue;
        tr.querySelector('.in-flight').textContent = String(c.in_flight);
        tr.querySelector('.queued').textContent = String(c.queued);
        tr.querySelector('.shed').textContent = String(c.shed);
      }
    }
  }

  function update(snap) {
    for (const art of document.querySelectorAll('article.route')) {
      const rr = snap.routes.find((r) => r.name === art.dataset.route);
      if (!rr) continue;
      for (const k of KINDS) art.querySelector('.rate-' + k).textContent = String(mean(rr[k]));
      const n = rr.at.length;
      if (n > RATE_SECONDS) { // the span the figures average, Unix ms
        art.dataset.rateFrom = String(rr.at[n - 1 - RATE_SECONDS]);
        art.dataset.rateTo = String(rr.at[n - 1]);
      }
      const top = chart(art.querySelector('svg.chart'), rr);
      art.querySelector('.peak').textContent = 'scale: 0 to ' + top + ' r/s, last ' + rr.at.length + ' s';
    }
    topLists(snap);
    overload(snap.overload || []);
    document.body.dataset.updated = String(snap.now);
  }

  async function tick() {
    try {
      const r = await fetch('/api/stats', { cache: 'no-store', credentials: 'same-origin' });
      if (r.ok) update(await r.json());
    } catch (e) {
      // The next tick tries again (the process may be restarting).
    }
  }

  // entries shows the control API's first page of entries, each with a
  // button that ends it (DELETE, as JSON, same origin: the API refuses
  // anything else). Ending one needs admin.basic_auth, whose credentials
  // the browser already sends.
  function limits(e) {
    if (e.plan) return 'plan ' + e.plan;
    const parts = [];
    if (e.limit !== undefined) parts.push('limit ' + e.limit);
    if (e.window) parts.push('per ' + e.window);
    if (e.rate) parts.push('rate ' + e.rate);
    if (e.burst !== undefined) parts.push('burst ' + e.burst);
    return parts.join(', ');
  }

  function showEntries(list) {
    const table = document.getElementById('entries-table');
    const status = document.getElementById('entries-status');
    const body = table.querySelector('tbody');
    while (body.firstChild) body.removeChild(body.firstChild);
    for (const e of list.entries) {
      const tr = el('tr');
      tr.dataset.id = e.id;
      if (e.orphan) tr.className = 'orphan';
      for (const [cls, v] of [['id', e.id], ['policy', e.policy], ['action', e.action], ['client', e.client], ['source', e.source],
        ['limits', limits(e)], ['expires', e.expires || 'never'], ['by', e.by || ''], ['reason', e.orphan ? e.reason + ' (orphan: ' + e.orphan + ')' : e.reason || '']]) {
        tr.appendChild(el('td', cls, v));
      }
      const b = el('button', 'end', 'End');
      b.type = 'button';
      b.addEventListener('click', () => endEntry(e.id));
      tr.appendChild(el('td')).appendChild(b);
      body.appendChild(tr);
    }
    table.hidden = list.entries.length === 0;
    status.textContent = list.entries.length === 0 ? 'No entries.' : list.entries.length + ' entries' + (list.next ? ' (first page: rlproxy ctl list shows all)' : '') + '.';
  }

  async function problemText(r) {
    try {
      const p = await r.json();
      return p.detail || r.statusText;
    } catch (e) {
      return r.statusText;
    }
  }

  async function entries() {
    try {
      const r = await fetch('/api/entries', { cache: 'no-store', credentials: 'same-origin' });
      if (r.status === 404) {
        document.getElementById('entries').hidden = true;
        return;
      }
      if (!r.ok) {
        document.getElementById('entries-status').textContent = 'Entries not listed: ' + await problemText(r);
        return;
      }
      showEntries(await r.json());
    } catch (e) {
      // The next refresh tries again.
    }
  }

  async function endEntry(id) {
    const note = document.getElementById('entries-note');
    try {
      const r = await fetch('/api/entries/' + encodeURIComponent(id), {
        method: 'DELETE', cache: 'no-store', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
      });
      note.textContent = r.ok ? 'Ended ' + id + '.' : 'Not ended: ' + await problemText(r);
    } catch (e) {
      note.textContent = 'Not ended: ' + e;
    }
    await entries();
  }

  tick();
  setInterval(tick, 1000);
  entries();
  setInterval(entries, 5000);
})();
