/**
 * Fenec's queue console (README.md, "The console"): the queues of the
 * server it is served by, their jobs by state, and the actions an operator
 * takes on a job, each one FenecQL statement sent through @fenecdb/web
 * with the token the operator gives (kept in sessionStorage, never in a
 * URL). The server's rules hold: what the token may not read is not shown,
 * and what it may not do is refused with the server's message.
 *
 * Plain DOM, no UI library: one page of tables and a few buttons needs
 * none, and every dependency would be shipped inside the server binary.
 */

import { connect, FenecError, type Db, type Row } from '@fenecdb/web/client';
import { type LiveEvent, watchCollection } from '@fenecdb/web/live';
import * as api from '@fenecdb/web/transport';

const STATES = ['ready', 'leased', 'delayed', 'dead', 'kept'] as const;
type State = (typeof STATES)[number];

const PAGE = 50;
const TOKEN_KEY = 'fenec.console.token';
const MIN_REFRESH_MS = 1000;

interface Queue {
  name: string;
  owner: boolean; // has an owner field
  error: boolean; // has an error field
}

interface Counts {
  jobs: Record<State, number>;
  oldestAgeS: number | null;
  claimed?: number; // counters, from /_metrics
  acked?: number;
}

interface View {
  queue: string;
  state: State;
  desc: boolean;
  where: string;
  page: number;
  selected: number | null;
}

// ---- the page's elements (index.html) -------------------------------------

function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`index.html has no #${id}`);
  return e as T;
}

function h(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

const ui = {
  tokenForm: el<HTMLFormElement>('token-form'),
  token: el<HTMLInputElement>('token'),
  forget: el<HTMLButtonElement>('token-forget'),
  error: el('error'),
  status: el('status'),
  queues: el('queues-body'),
  collections: el('collections-body'),
  jobs: el('jobs'),
  jobsTitle: el('jobs-title'),
  order: el<HTMLSelectElement>('order'),
  whereForm: el<HTMLFormElement>('where-form'),
  where: el<HTMLInputElement>('where'),
  redriveAll: el<HTMLButtonElement>('redrive-all'),
  prev: el<HTMLButtonElement>('prev'),
  next: el<HTMLButtonElement>('next'),
  page: el('page'),
  jobsBody: el('jobs-body'),
  detail: el('detail'),
  detailTitle: el('detail-title'),
  detailJSON: el('detail-json'),
  actions: el('actions'),
};

// ---- state -----------------------------------------------------------------

let db: Db | null = null;
let bearer = ''; // the token in use, for the live view's stream
let transport: api.Transport | null = null;
let queues: Queue[] = [];
let queuesAt = 0;
let view: View | null = null;
let previous: { at: number; counts: Map<string, Counts> } | null = null;
let timer: ReturnType<typeof setTimeout> | undefined;
let generation = 0; // a new token starts a new generation; older refreshes stop
let metricsRefused = false; // the token may not read /_metrics: ask once, not every refresh

function showError(msg: string | null): void {
  ui.error.textContent = msg ?? '';
  ui.error.hidden = msg === null;
}

function message(err: unknown): string {
  if (err instanceof FenecError) return err.status > 0 ? `${err.status}: ${err.message}` : err.message;
  return err instanceof Error ? err.message : String(err);
}

function useToken(token: string): void {
  const t = token.trim();
  if (t === '') sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, t);
  const opts = t === '' ? {} : { token: t };
  bearer = t;
  closeLive();
  db = connect(location.origin, opts);
  transport = { baseUrl: location.origin, fetch: globalThis.fetch.bind(globalThis), ...opts };
  queues = [];
  queuesAt = 0;
  metricsRefused = false;
  previous = null;
  view = null;
  ui.jobs.hidden = true;
  ui.detail.hidden = true;
  ui.queues.replaceChildren();
  generation++;
  clearTimeout(timer);
  void refresh(generation);
}

// ---- reading the queues -----------------------------------------------------

/** The queues the token may read: collections with a run_at timestamp. */
async function loadQueues(): Promise<void> {
  const reply = await api.collections(transport!);
  if (!reply.ok) throw FenecError.fromAnswer(reply.status, reply.body, reply.text);
  renderCollections(reply.body.collections);
  queues = reply.body.collections
    .filter((c) => c.fields.some((f) => f.name === 'run_at' && f.type === 'timestamp'))
    .map((c) => ({
      name: c.name,
      owner: c.fields.some((f) => f.name === 'owner'),
      error: c.fields.some((f) => f.name === 'error'),
    }));
  queuesAt = Date.now();
}

/** A @ttl's milliseconds as FenecQL writes them: 30m, 1h30m, 250ms. */
function duration(ms: number): string {
  let out = '';
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000], ['ms', 1]] as const) {
    const n = Math.floor(ms / size);
    if (n > 0) out += `${n}${unit}`;
    ms -= n * size;
  }
  return out;
}

/**
 * Every collection the token may read, with its fields as a create
 * collection statement declares them: type, index and @ttl. A @ttl field
 * is marked: its documents lapse that long after the field's time
 * (docs/fenecql.md, Expiry).
 */
function renderCollections(colls: api.Collection[]): void {
  const rows = colls.map((c) => {
    const fields = c.fields.map((f) => {
      const code = h('code', { class: 'field', 'data-field': f.name }, `${f.name} ${f.type}${f.index ? ` @${f.index}` : ''}`);
      if (f.ttl_ms !== undefined) {
        code.append(' ', h('span', { class: 'ttl', title: `documents lapse ${duration(f.ttl_ms)} after their ${f.name}` }, `@ttl(${duration(f.ttl_ms)})`));
      }
      return code;
    });
    const list = h('td', { class: 'fields' });
    fields.forEach((f, i) => list.append(...(i > 0 ? [', ', f] : [f])));
    const follow = h('button', { type: 'button', class: 'live', title: `follow ${c.name}'s rows as they are written` }, 'Live');
    follow.addEventListener('click', () => openLive(c.name));
    return h('tr', { 'data-collection': c.name }, h('th', { scope: 'row' }, c.name, ' ', follow), h('td', { class: 'docs' }, c.documents.toLocaleString('en-US')), list);
  });
  if (rows.length === 0) rows.push(h('tr', {}, h('td', { colspan: '3', class: 'empty' }, 'No collection.')));
  ui.collections.replaceChildren(...rows);
}

/** Each state's filter, over the fields the queue has; null: no job can be in it. */
function filter(q: Queue, s: State): string | null {
  switch (s) {
    case 'ready':
      return 'run_at <= now()';
    case 'leased':
      return q.owner ? 'run_at > now() and owner is not null' : null;
    case 'delayed':
      return q.owner ? 'run_at > now() and owner is null' : 'run_at > now()';
    case 'dead':
      return q.error ? 'run_at is null and error is not null' : null;
    case 'kept':
      return q.error ? 'run_at is null and error is null' : 'run_at is null';
  }
}

/**
 * The operator's token reads /_metrics, whose gauges the server keeps at
 * a cost that does not grow with the queue (fenec_queue_*): one request a
 * refresh for every queue. Answers null when the token may not read it.
 */
async function fromMetrics(): Promise<Map<string, Counts> | null> {
  if (metricsRefused) return null;
  const reply = await api.metrics(transport!);
  if (reply.status === 403) {
    metricsRefused = true;
    return null;
  }
  if (!reply.ok) throw FenecError.fromAnswer(reply.status, reply.body, reply.text);
  const out = new Map<string, Counts>();
  const get = (q: string): Counts => {
    let c = out.get(q);
    if (!c) {
      c = { jobs: { ready: 0, leased: 0, delayed: 0, dead: 0, kept: 0 }, oldestAgeS: null, claimed: 0, acked: 0 };
      out.set(q, c);
    }
    return c;
  };
  for (const line of reply.body.split('\n')) {
    const m = /^(fenec_queue_\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, JSON.parse(`"${l[2]!}"`) as string]));
    const q = labels['queue'];
    if (q === undefined) continue;
    const v = Number(m[3]);
    const c = get(q);
    if (m[1] === 'fenec_queue_jobs' && (STATES as readonly string[]).includes(labels['state'] ?? '')) c.jobs[labels['state'] as State] = v;
    else if (m[1] === 'fenec_queue_oldest_ready_age_seconds') c.oldestAgeS = v;
    else if (m[1] === 'fenec_queue_claimed_total') c.claimed = v;
    else if (m[1] === 'fenec_queue_acked_total') c.acked = v;
  }
  for (const c of out.values()) if (c.jobs.ready === 0) c.oldestAgeS = null;
  return out;
}

/**
 * A token held to a policy counts with FenecQL, under its own rules: one
 * /batch a refresh, five counts and the oldest ready job per queue.
 */
async function fromQueries(): Promise<Map<string, Counts>> {
  const stmts = queues.flatMap((q) => [
    ...STATES.map((s) => ({ query: `get ${q.name} where ${filter(q, s) ?? 'false'} count`, params: [] })),
    { query: `get ${q.name} select now() - run_at as age where run_at <= now() order run_at limit 1`, params: [] },
  ]);
  const out = new Map<string, Counts>();
  if (stmts.length === 0) return out;
  const answers = await db!.batch(stmts);
  queues.forEach((q, i) => {
    const a = answers.slice(i * 6, i * 6 + 6).map((r) => r.rows ?? []);
    const jobs = Object.fromEntries(STATES.map((s, k) => [s, Number(a[k]![0]!['count'])])) as Record<State, number>;
    const oldest = a[5]![0];
    out.set(q.name, { jobs, oldestAgeS: oldest ? Number(oldest['age']) / 1000 : null });
  });
  return out;
}

// ---- the loop ---------------------------------------------------------------

/**
 * One refresh loop a token: refresh schedules the next itself, and kick
 * asks for one now — at once when the loop is waiting, or right after the
 * refresh in flight, so an action never starts a second loop.
 */
let running: number | null = null; // the generation of the refresh in flight
let again = false;

function kick(): void {
  if (running === generation) {
    again = true;
    return;
  }
  clearTimeout(timer);
  void refresh(generation);
}

async function refresh(gen: number): Promise<void> {
  running = gen;
  again = false;
  const start = performance.now();
  let refused = false;
  try {
    if (queues.length === 0 || Date.now() - queuesAt > 10_000) await loadQueues();
    const metered = await fromMetrics();
    const counts = metered ?? (await fromQueries());
    if (gen === generation) renderQueues(counts);
    if (gen === generation && view) await renderJobs(gen);
    if (gen === generation) {
      showError(null);
      ui.status.textContent = `updated ${new Date().toLocaleTimeString()} · ${metered ? 'counts from /_metrics' : "counted by FenecQL under this token's rules"}`;
    }
  } catch (err) {
    if (gen === generation) showError(message(err));
    // A refused token stays refused: wait for another.
    refused = err instanceof FenecError && err.status === 401;
  }
  if (running === gen) running = null;
  if (gen !== generation || refused) return;
  // The next refresh comes a second later, or later still when this one
  // took long: a console never keeps the server busier than a fifth of
  // its time.
  const took = performance.now() - start;
  timer = setTimeout(() => whenVisible(() => void refresh(gen)), again ? 0 : Math.max(MIN_REFRESH_MS, 4 * took));
}

/** Runs f now, or once the tab is shown again: a tab out of sight asks nothing. */
function whenVisible(f: () => void): void {
  if (document.visibilityState !== 'hidden') {
    f();
    return;
  }
  document.addEventListener('visibilitychange', function shown() {
    if (document.visibilityState === 'hidden') return;
    document.removeEventListener('visibilitychange', shown);
    f();
  });
}

function age(s: number | null): string {
  if (s === null) return '—';
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${(s / 60).toFixed(1)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function rate(name: string, c: Counts, key: 'claimed' | 'acked'): string {
  const now = c[key];
  const before = previous?.counts.get(name)?.[key];
  if (now === undefined) return '—';
  if (before === undefined || !previous) return '…';
  const dt = (performance.now() - previous.at) / 1000;
  return dt > 0 ? `${((now - before) / dt).toFixed(1)}/s` : '…';
}

function renderQueues(counts: Map<string, Counts>): void {
  const rows: HTMLElement[] = [];
  for (const q of queues) {
    const c = counts.get(q.name) ?? { jobs: { ready: 0, leased: 0, delayed: 0, dead: 0, kept: 0 }, oldestAgeS: null };
    const tr = h('tr', { 'data-queue': q.name }, h('th', { scope: 'row' }, q.name));
    for (const s of STATES) {
      const b = h('button', { type: 'button', class: `count ${s}`, title: `${s} jobs of ${q.name}` }, c.jobs[s].toLocaleString('en-US'));
      b.addEventListener('click', () => openJobs(q.name, s));
      const td = h('td', { 'data-state': s, 'data-count': String(c.jobs[s]) }, b);
      if (view?.queue === q.name && view.state === s) td.classList.add('open');
      tr.append(td);
    }
    tr.append(
      h('td', { class: 'age', 'data-age': String(c.oldestAgeS ?? '') }, age(c.oldestAgeS)),
      h('td', { class: 'rate', title: c.claimed === undefined ? "rates need the server's --token (/_metrics)" : '' }, rate(q.name, c, 'claimed')),
      h('td', { class: 'rate' }, rate(q.name, c, 'acked')),
    );
    rows.push(tr);
  }
  if (rows.length === 0) rows.push(h('tr', {}, h('td', { colspan: '9', class: 'empty' }, 'No queue: a queue is a collection with a run_at timestamp field (docs/queues.md).')));
  ui.queues.replaceChildren(...rows);
  previous = { at: performance.now(), counts };
}

// ---- jobs of a state ----------------------------------------------------------

function openJobs(queue: string, state: State): void {
  view = { queue, state, desc: false, where: '', page: 0, selected: null };
  ui.order.value = 'asc';
  ui.where.value = '';
  ui.detail.hidden = true;
  void renderJobs(generation).catch((err) => showError(message(err)));
  for (const td of ui.queues.querySelectorAll('td.open')) td.classList.remove('open');
  ui.queues.querySelector(`tr[data-queue="${CSS.escape(queue)}"] td[data-state="${state}"]`)?.classList.add('open');
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') {
    const s = JSON.stringify(v);
    return s.length > 80 ? `${s.slice(0, 79)}…` : s;
  }
  return String(v);
}

async function renderJobs(gen: number): Promise<void> {
  const v = view;
  const q = queues.find((x) => x.name === v?.queue);
  if (!v || !q) return;
  const f = filter(q, v.state);
  const key = v.state === 'dead' || v.state === 'kept' ? 'id' : 'run_at';
  let rows: Row[] = [];
  if (f !== null) {
    const where = v.where.trim() === '' ? f : `${f} and (${v.where})`;
    // Jobs with a run_at are walked in its @sorted index, to the page and no
    // further (ties in id order); the others by id, the scan's own order
    // oldest first, and a sort of them all newest first.
    const order = key === 'run_at' ? ` order run_at ${v.desc ? 'desc' : 'asc'}` : v.desc ? ' order id desc' : '';
    rows = (await db!.query(`get ${q.name} where ${where}${order} limit ${PAGE + 1} offset ${v.page * PAGE}`)).rows ?? [];
  }
  if (gen !== generation || v !== view) return;
  ui.jobs.hidden = false;
  ui.jobsTitle.textContent = `${q.name}: ${v.state}`;
  ui.redriveAll.hidden = v.state !== 'dead';
  ui.prev.disabled = v.page === 0;
  ui.next.disabled = rows.length <= PAGE;
  ui.page.textContent = `page ${v.page + 1}`;
  const shown = rows.slice(0, PAGE);
  ui.jobsBody.replaceChildren(
    ...shown.map((r) => {
      const tr = h('tr', { 'data-id': String(r['id']) },
        ...['id', 'run_at', 'owner', 'attempts', 'error', 'payload'].map((k) => h('td', { class: k }, cell(r[k]))));
      if (r['id'] === v.selected) tr.classList.add('selected');
      tr.addEventListener('click', () => showJob(q, v.state, r));
      return tr;
    }),
  );
  if (shown.length === 0) ui.jobsBody.replaceChildren(h('tr', {}, h('td', { colspan: '6', class: 'empty' }, 'No job.')));
}

// ---- one job, and what may be done to it ------------------------------------

interface Action {
  label: string;
  id: string;
  statement: (q: string) => string;
  confirm?: string; // asked before a destructive action
}

function actionsFor(q: Queue, state: State): Action[] {
  const out: Action[] = [];
  if (state === 'dead' || state === 'kept') {
    out.push({
      label: 'Redrive', id: 'act-redrive',
      statement: (c) => `set ${c} {run_at: now(), attempts: 0${q.error ? ', error: null' : ''}} where id = $1 and run_at is null require 1`,
    });
  }
  if (state === 'delayed') {
    out.push({ label: 'Run now', id: 'act-run', statement: (c) => `set ${c} {run_at: now()} where id = $1 and run_at > now() require 1` });
  }
  if (state === 'leased') {
    out.push({ label: 'Release', id: 'act-release', statement: (c) => `set ${c} {owner: null, run_at: now()} where id = $1 and owner is not null require 1` });
  }
  out.push({ label: 'Delete', id: 'act-delete', statement: (c) => `del ${c} where id = $1 require 1`, confirm: 'Delete this job? It cannot be undone.' });
  return out;
}

function showJob(q: Queue, state: State, job: Row): void {
  if (view) view.selected = job['id'] as number;
  for (const tr of ui.jobsBody.querySelectorAll('tr.selected')) tr.classList.remove('selected');
  ui.jobsBody.querySelector(`tr[data-id="${String(job['id'])}"]`)?.classList.add('selected');
  ui.detail.hidden = false;
  ui.detailTitle.textContent = `${q.name} job ${String(job['id'])}`;
  ui.detailJSON.textContent = JSON.stringify(job, null, 2);
  ui.actions.replaceChildren(
    ...actionsFor(q, state).map((a) => {
      const b = h('button', { type: 'button', id: a.id, class: a.confirm ? 'danger' : '' }, a.label) as HTMLButtonElement;
      b.addEventListener('click', () => void act(a.statement(q.name), [job['id']], a.confirm));
      return b;
    }),
  );
}

async function act(statement: string, params: unknown[], confirmText?: string): Promise<void> {
  if (confirmText !== undefined && !window.confirm(confirmText)) return;
  try {
    const answer = await db!.query(statement, params);
    const n = answer.rows?.length ?? answer.affected;
    ui.status.textContent = `${n} job${n === 1 ? '' : 's'} changed: ${statement}`;
    showError(null);
    ui.detail.hidden = true;
    if (view) view.selected = null;
    kick();
  } catch (err) {
    showError(message(err));
  }
}

// ---- a collection, live ---------------------------------------------------------

/**
 * The live view: a collection's rows (those a condition matches) kept up
 * to date as they are written, over `GET /<collection>/changes`
 * (docs/changes.md), read with fetch so the token goes in the
 * Authorization header as on every other request. A dropped connection is
 * resumed with Last-Event-ID: the server then sends nothing again, or the
 * rows as they are now.
 */
const liveUI = (() => {
  const where = h('input', { id: 'live-where', placeholder: 'where … (FenecQL, such as room = "lobby")', spellcheck: 'false', 'aria-label': 'live where' }) as HTMLInputElement;
  const form = h('form', { id: 'live-where-form' }, where, h('button', { type: 'submit' }, 'Follow')) as HTMLFormElement;
  const close = h('button', { type: 'button', id: 'live-close' }, 'Close') as HTMLButtonElement;
  const title = h('h2', { id: 'live-title' });
  const status = h('span', { id: 'live-status', class: 'status' });
  const head = h('thead', { id: 'live-head' });
  const body = h('tbody', { id: 'live-body' });
  const section = h('section', { id: 'live', hidden: '' }, h('div', { class: 'bar' }, title, form, close, status), h('table', { id: 'live-table' }, head, body));
  ui.jobs.after(section);
  return { section, where, form, close, title, status, head, body };
})();

let live: { collection: string; stop: AbortController } | null = null;
const LIVE_ROWS = 500;

function closeLive(): void {
  live?.stop.abort();
  live = null;
  liveUI.section.hidden = true;
}

function openLive(collection: string, where = ''): void {
  closeLive();
  const stop = new AbortController();
  live = { collection, stop };
  liveUI.section.hidden = false;
  liveUI.title.textContent = `${collection}: live`;
  liveUI.where.value = where;
  liveUI.status.textContent = 'connecting…';
  liveUI.body.replaceChildren();
  liveUI.head.replaceChildren();
  void follow(collection, where, stop.signal);
}

async function follow(collection: string, where: string, signal: AbortSignal): Promise<void> {
  const rows = new Map<unknown, Row>();
  let replacing = false; // inside a rows/reset series: its first event replaces what is held
  const events = watchCollection(
    { url: location.origin, token: bearer === '' ? undefined : bearer },
    collection,
    { where: where.trim() === '' ? undefined : where },
    { signal, retries: Number.POSITIVE_INFINITY, retryDelay: 1000 },
  );
  try {
    for await (const ev of events) {
      if (signal.aborted) return;
      const said = apply(ev);
      if (replacing) continue; // the rest of a rows/reset series comes first
      liveUI.status.textContent = said;
      renderLive(rows);
    }
  } catch (err) {
    if (!signal.aborted) {
      showError(message(err));
      liveUI.status.textContent = `stopped: ${message(err)}`;
    }
  }

  function apply(ev: LiveEvent): string {
    const at = `position ${ev.position}`;
    switch (ev.name) {
      case 'rows':
      case 'reset':
        if (!replacing) rows.clear();
        for (const r of (ev.data['rows'] as Row[] | undefined) ?? []) rows.set(r['id'], r);
        replacing = ev.data['last'] !== true;
        return `live · ${ev.name === 'reset' ? 'resumed, rows as they are now' : 'rows as they are'} · ${at}`;
      case 'insert':
      case 'update': {
        const r = ev.data['row'] as Row;
        rows.set(r['id'], r);
        return `live · ${ev.name} of ${String(r['id'])} · ${at}`;
      }
      case 'delete':
        rows.delete(ev.data['id']);
        return `live · delete of ${String(ev.data['id'])} · ${at}`;
      case 'gap':
        return `live · missed changes: the rows follow · ${at}`;
      case 'closing':
        return `reconnecting (the server closed the stream: ${String(ev.data['reason'])}) · ${at}`;
    }
  }
}

function renderLive(rows: Map<unknown, Row>): void {
  const cols: string[] = ['id'];
  for (const r of rows.values()) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  liveUI.head.replaceChildren(h('tr', {}, ...cols.map((c) => h('th', {}, c))));
  // A page holds the first LIVE_ROWS by id: a table of every row of a big
  // collection would stall the tab at each event.
  const sorted = [...rows.values()].sort((a, b) => Number(a['id']) - Number(b['id'])).slice(0, LIVE_ROWS);
  liveUI.body.replaceChildren(...sorted.map((r) => h('tr', { 'data-id': String(r['id']) }, ...cols.map((c) => h('td', { 'data-field': c }, cell(r[c]))))));
  if (sorted.length === 0) liveUI.body.replaceChildren(h('tr', {}, h('td', { class: 'empty' }, 'No row.')));
  if (rows.size > LIVE_ROWS) liveUI.body.append(h('tr', {}, h('td', { class: 'empty', colspan: String(cols.length) }, `${rows.size.toLocaleString('en-US')} rows: the first ${LIVE_ROWS} by id are shown; a condition narrows them.`)));
}

liveUI.form.addEventListener('submit', (e) => {
  e.preventDefault();
  if (live) openLive(live.collection, liveUI.where.value);
});
liveUI.close.addEventListener('click', closeLive);

// ---- wiring -------------------------------------------------------------------

ui.tokenForm.addEventListener('submit', (e) => {
  e.preventDefault();
  useToken(ui.token.value);
  ui.token.value = '';
});
ui.forget.addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});
ui.order.addEventListener('change', () => {
  if (!view) return;
  view.desc = ui.order.value === 'desc';
  view.page = 0;
  void renderJobs(generation).catch((err) => showError(message(err)));
});
ui.whereForm.addEventListener('submit', (e) => {
  e.preventDefault();
  if (!view) return;
  view.where = ui.where.value;
  view.page = 0;
  void renderJobs(generation).then(() => showError(null), (err) => showError(message(err)));
});
ui.prev.addEventListener('click', () => {
  if (!view || view.page === 0) return;
  view.page--;
  void renderJobs(generation).catch((err) => showError(message(err)));
});
ui.next.addEventListener('click', () => {
  if (!view) return;
  view.page++;
  void renderJobs(generation).catch((err) => showError(message(err)));
});
ui.redriveAll.addEventListener('click', () => {
  const q = queues.find((x) => x.name === view?.queue);
  if (!q) return;
  void act(`set ${q.name} {run_at: now(), attempts: 0${q.error ? ', error: null' : ''}} where ${filter(q, 'dead') ?? 'false'}`, [],
    `Redrive every dead letter of ${q.name}? Each is made ready now, its attempts set to 0.`);
});

// Nothing is asked of the server before the operator gives a token (or
// none, for a server without one): a request without would only be refused.
const kept = sessionStorage.getItem(TOKEN_KEY);
if (kept !== null) useToken(kept);
else ui.status.textContent = "Give the server's --token or a JWT, or press Use with none for a server started without one.";
