import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connect, expr, FenecError, inc, raw } from '../src/client.js';
import { fakeFetch, json, never } from './fake.js';
import { stringify } from '../src/json.js';

describe('the builder', () => {
  const db = connect('http://x.invalid');

  test('is immutable', () => {
    const jobs = db.from('jobs');
    const mine = jobs.where('owner', 'w1');
    mine.order('run_at').limit(3);
    assert.deepEqual(jobs.renderRows(), { query: 'get jobs', params: [], collection: 'jobs' });
    assert.deepEqual(mine.renderRows(), { query: 'get jobs where owner = $1', params: ['w1'], collection: 'jobs' });
  });

  test('puts values in parameters, never in the text', () => {
    const evil = `w1" or 1 = 1; del jobs --`;
    const s = db.from('jobs').where('owner', evil).renderUpdate({ error: evil }, { returning: ['id'] });
    assert.equal(s.query, 'set jobs {error: $1} where owner = $2 returning id');
    assert.deepEqual(s.params, [evil, evil]);
  });

  test('refuses names that are not identifiers', () => {
    assert.throws(() => db.from('jobs where 1 = 1'), TypeError);
    assert.throws(() => db.from('jobs').where('owner = owner or owner', 'x'), /field/);
    assert.throws(() => db.from('jobs').order('run_at; del jobs'), /field/);
    assert.throws(() => db.from('jobs').renderUpdate({ 'a: 1} --': 1 }), /field/);
  });

  test('refuses undefined values, which JSON cannot carry', () => {
    assert.throws(() => db.from('jobs').where('owner', undefined), /undefined/);
    assert.throws(() => db.from('jobs').renderUpdate({ owner: undefined }), /undefined/);
    assert.throws(() => raw('a = ?', undefined), /undefined/);
  });

  test('refuses a point of near that is not [longitude, latitude], at the call', () => {
    const places = db.from('places');
    for (const bad of [[1], [1, 2, 3], 'paris', [1, '2'], [1n, 2], { lon: 1, lat: 2 }]) {
      assert.throws(() => places.near('at', bad as never), /point is \[longitude, latitude\]/, String(bad));
    }
    assert.throws(() => places.near('at', [1, Number.POSITIVE_INFINITY]), /finite/);
    assert.throws(() => places.near('at; del', [1, 2]), /field/);
  });

  test('keeps the point of near apart from later changes to the array', () => {
    const at: [number, number] = [2.35, 48.85];
    const q = db.from('places').near('at', at).limit(1);
    at[0] = 0;
    assert.deepEqual(q.renderRows(), { query: 'get places near at $1 limit 1', params: [[2.35, 48.85]], collection: 'places' });
  });

  test('ifAbsent and upsert render on insert alone', () => {
    const counters = db.from('counters');
    assert.equal(counters.ifAbsent().renderInsert({ key: 'hits' }).query, 'put counters {key: $1} if absent');
    assert.throws(() => counters.ifAbsent().renderFirst(), /cannot use ifAbsent/);
    assert.throws(() => counters.upsert({ n: inc(1) }).renderUpdate({ n: 1 }), /cannot use ifAbsent or upsert/);
  });

  test('renders the seed page worker loop', () => {
    const jobs = db.from('jobs');
    const claim = jobs.where(raw('run_at <= now()')).order('run_at').limit(10)
      .renderUpdate({ owner: 'w1:1842', run_at: expr('now() + ?', 30000), attempts: inc(1) }, { returning: true });
    assert.equal(claim.query, 'set jobs {owner: $1, run_at: now() + $2, attempts: coalesce(attempts, 0) + $3} where run_at <= now() order run_at limit 10 returning *');
    assert.deepEqual(claim.params, ['w1:1842', 30000, 1]);
  });
});

describe('requests', () => {
  test('send the statement, the token and the headers', async () => {
    const { fetch, sent } = fakeFetch(() => json(200, [{ id: 1 }]));
    const db = connect('http://db.test:8080/', { token: 't0k', fetch });
    const rows = await db.from('jobs').where('owner', 'w1').update({ attempts: inc(1) }, {
      returning: true, wait: 30000, idempotencyKey: 'k-1',
    });
    assert.deepEqual(rows, [{ id: 1 }]);
    assert.equal(sent.length, 1);
    const [req] = sent;
    assert.equal(req?.url, 'http://db.test:8080/query');
    assert.equal(req?.method, 'POST');
    assert.equal(req?.headers['authorization'], 'Bearer t0k');
    assert.equal(req?.headers['fenec-wait'], '30000');
    assert.equal(req?.headers['idempotency-key'], 'k-1');
    assert.equal(req?.headers['content-type'], 'application/json');
    assert.deepEqual(req?.body, { query: 'set jobs {attempts: coalesce(attempts, 0) + $1} where owner = $2 returning *', params: [1, 'w1'] });
  });

  test('send no header that was not asked for (but the User-Agent, under Node)', async () => {
    const { fetch, sent } = fakeFetch(() => json(200, { affected: 0 }));
    await connect('http://db.test', { fetch }).query('del jobs');
    assert.deepEqual(Object.keys(sent[0]?.headers ?? {}).sort(), ['content-type', 'user-agent']);
  });

  test('answer what each endpoint promises', async () => {
    const answers: unknown[] = [[], [{ count: 7 }], { affected: 2 }, { affected: 3 }, [{ id: 4 }], { affected: 1 }];
    const { fetch } = fakeFetch(() => json(200, answers.shift()));
    const jobs = connect('http://db.test', { fetch }).from('jobs');
    assert.equal(await jobs.first(), null);
    assert.equal(await jobs.count(), 7);
    assert.equal(await jobs.insert([{ a: 1 }, { a: 2 }]), 2);
    assert.equal(await jobs.update({ a: 1 }), 3);
    assert.deepEqual(await jobs.delete({ returning: ['id'] }), [{ id: 4 }]);
    assert.equal(await jobs.delete({ require: 1 }), 1);
  });

  test('send a batch and answer its results', async () => {
    const { fetch, sent } = fakeFetch(() => json(200, { results: [{ affected: 1 }, [{ count: 1 }]] }));
    const db = connect('http://db.test', { fetch });
    const jobs = db.from('jobs');
    const results = await db.batch([jobs.where('id', 1).renderDelete({ require: 1 }), jobs.renderCount()]);
    assert.deepEqual(results, [
      { rows: undefined, affected: 1, seq: 0, replayed: false },
      { rows: [{ count: 1 }], affected: 1, seq: 0, replayed: false },
    ]);
    assert.equal(sent[0]?.url, 'http://db.test/batch');
    assert.deepEqual(sent[0]?.body, {
      statements: [{ query: 'del jobs where id = $1 require 1', params: [1] }, { query: 'get jobs count', params: [] }],
    });
  });

  for (const [status, code] of [
    [400, 'bad_request'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'],
    [409, 'conflict'], [412, 'unmet'], [413, 'too_large'], [422, 'key_reused'], [500, 'internal'], [503, 'unavailable'],
  ] as const) {
    test(`map a ${status} to FenecError ${code}`, async () => {
      const { fetch } = fakeFetch(() => json(status, { error: `it is ${code}`, code }));
      const err = await connect('http://db.test', { fetch }).query('get jobs').catch((e: unknown) => e);
      assert.ok(err instanceof FenecError);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      assert.equal(err.message, `it is ${code}`);
      assert.equal(err.at, undefined);
    });
  }

  test('map a batch refusal with the statement it names', async () => {
    const { fetch } = fakeFetch(() => json(412, { error: '`del jobs` wrote 0 rows, and requires 1', code: 'unmet', at: 1 }));
    const err = await connect('http://db.test', { fetch }).batch([{ query: 'get jobs', params: [] }]).catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.equal(err.at, 1);
  });

  test('map a refusal that is not a Fenec error to unexpected, with the status and the body', async () => {
    const { fetch } = fakeFetch(() => new Response('Bad Gateway', { status: 502 }));
    const err = await connect('http://db.test', { fetch }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.deepEqual([err.status, err.code, err.message], [502, 'unexpected', 'unexpected answer from db.test:80: HTTP 502: Bad Gateway']);
  });

  test('map an error body with a code openapi.yaml lacks, and a 2xx that is not JSON, to unexpected', async () => {
    for (const res of [json(418, { error: 'teapot', code: 'teapot' }), new Response('<html>ok</html>', { status: 200 })]) {
      const { fetch } = fakeFetch(() => res);
      const err = await connect('https://db.test', { fetch }).query('get jobs').catch((e: unknown) => e);
      assert.ok(err instanceof FenecError);
      assert.equal(err.code, 'unexpected');
      assert.match(err.message, /^unexpected answer from db\.test:443: HTTP (418|200): /);
    }
  });

  test('map a failure to send to network, naming host:port and the cause', async () => {
    const cause = Object.assign(new Error('getaddrinfo ENOTFOUND db.test'), { code: 'ENOTFOUND' });
    const fetch = () => Promise.reject(new TypeError('fetch failed', { cause }));
    const err = await connect('http://db.test:8080', { fetch }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.deepEqual([err.status, err.code], [0, 'network']);
    assert.equal(err.message, 'network: cannot reach db.test:8080: host not found (ENOTFOUND: getaddrinfo ENOTFOUND db.test)');
  });

  test('time out after the timeout', async () => {
    const { fetch } = fakeFetch(never);
    const start = Date.now();
    const err = await connect('http://db.test', { fetch, timeout: 50 }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.equal(err.code, 'timeout');
    assert.ok(Date.now() - start < 1000);
  });

  test('wait as much longer than the timeout as the wait', async () => {
    const { fetch } = fakeFetch(never);
    const db = connect('http://db.test', { fetch, timeout: 50 });
    const start = Date.now();
    const err = await db.from('jobs').delete({ wait: 250 }).catch((e: unknown) => e);
    const took = Date.now() - start;
    assert.ok(err instanceof FenecError && err.code === 'timeout');
    assert.match(err.message, /300 ms/);
    assert.ok(took >= 290, `gave up after ${took} ms`);
  });

  test('give up when the signal is aborted', async () => {
    const { fetch } = fakeFetch(never);
    const db = connect('http://db.test', { fetch });
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 20);
    const err = await db.from('jobs').delete({ wait: 30000, signal: ctl.signal }).catch((e: unknown) => e);
    assert.ok(err instanceof DOMException);
    assert.equal(err.name, 'AbortError');
  });

  test('refuse a wait that is not a whole number of milliseconds', async () => {
    const db = connect('http://db.test', { fetch: fakeFetch(never).fetch });
    await assert.rejects(db.from('jobs').delete({ wait: -1 }), /wait must be a whole number of milliseconds from 0 to 30000, not -1/);
    await assert.rejects(db.from('jobs').delete({ wait: 30001 }), /milliseconds/);
    await assert.rejects(db.from('jobs').delete({ wait: 1.5 }), /milliseconds/);
    assert.throws(() => connect('http://db.test', { timeout: 1.5 }), /timeout/);
  });

  test('refuse a URL without an http(s) scheme and a host when the client is made', () => {
    for (const url of ['127.0.0.1:8080', 'ftp://db.test', 'db.test', '', 'http://']) {
      assert.throws(() => connect(url), /url .* (needs the scheme http or https and a host|is not a URL)/, url);
    }
    connect('https://db.test:8443/');
  });

  test('take undefined for every option (exactOptionalPropertyTypes)', async () => {
    const { fetch, sent } = fakeFetch(() => json(200, { affected: 1 }));
    const db = connect('http://db.test', { token: undefined, timeout: undefined, fetch });
    await db.from('jobs').where('id', 1).delete({ wait: undefined, idempotencyKey: undefined, signal: undefined, timeout: undefined });
    assert.deepEqual(Object.keys(sent[0]?.headers ?? {}).sort(), ['content-type', 'user-agent']);
  });

  test('answer seq and replayed with the result', async () => {
    const { fetch } = fakeFetch(() => json(200, { affected: 2 }, { 'Fenec-Seq': '41', 'Idempotent-Replayed': 'true' }));
    const r = await connect('http://db.test', { fetch }).query('del jobs', [], { idempotencyKey: 'k' });
    assert.deepEqual(r, { rows: undefined, affected: 2, seq: 41, replayed: true });
  });

  test('decode rows by declared field type, never by the shape of a string', async () => {
    const schema = { collections: [{ name: 'jobs', documents: 1, fields: [
      { name: 'run_at', type: 'timestamp', index: 'sorted' }, { name: 'note', type: 'text', index: null },
      { name: 'big', type: 'int', index: null }, { name: 'score', type: 'float', index: null },
    ] }] };
    const body = '[{"id":9007199254740993,"run_at":"2026-05-03T09:20:20.000Z","note":"2026-05-03T09:20:20.000Z","big":-9223372036854775808,"score":1e300,"payload.at":"2026-05-03T09:20:20.000Z"}]';
    const { fetch } = fakeFetch(() => new Response(body, { status: 200 }), schema);
    const [row] = await connect('http://db.test', { fetch, int64: 'bigint' }).from('jobs').rows();
    assert.deepEqual(row, {
      id: 9007199254740993n, run_at: new Date('2026-05-03T09:20:20.000Z'), note: '2026-05-03T09:20:20.000Z',
      big: -9223372036854775808n, score: 1e300, 'payload.at': '2026-05-03T09:20:20.000Z',
    });
  });

  test('send int64 exactly', async () => {
    const { fetch } = fakeFetch(() => json(200, { affected: 1 }));
    let body = '';
    const spy: typeof fetch = (input, init) => {
      body = String(init?.body);
      return fetch(input, init);
    };
    await connect('http://db.test', { fetch: spy }).from('jobs').insert({ n: 9223372036854775807n, at: new Date(Date.UTC(2026, 4, 3, 9, 20, 20)) });
    assert.equal(body, '{"query":"insert jobs {n: $1, at: $2}","params":[9223372036854775807,"2026-05-03T09:20:20.000Z"]}');
  });
});

describe('what only JS can pass the builder (not in the golden file)', () => {
  const jobs = connect('http://x.invalid').from('jobs');
  const loose = jobs as unknown as Record<string, (...a: unknown[]) => unknown>;

  test('a fractional limit, a text offset, a bigint beyond int64', () => {
    assert.throws(() => jobs.limit(1.5), /limit must be a non-negative integer, not 1.5/);
    assert.throws(() => loose['offset']!('10'), /offset must be a non-negative integer, not "10"/);
    assert.throws(() => jobs.where('n', 2n ** 63n), /outside int64/);
  });

  test('a raw condition as a patch value, returning false, an invalid Date, a function', () => {
    assert.throws(() => jobs.renderUpdate({ run_at: raw('now()') }), /raw is not a value/);
    assert.equal(jobs.renderUpdate({ a: 1 }, { returning: false }).query, 'set jobs {a: $1}');
    assert.throws(() => jobs.where('run_at', new Date(Number.NaN)), /invalid Date/);
    assert.throws(() => jobs.renderInsert({ f: () => 1 }), /a function is not a value/);
  });

  test('NaN deep inside a JSON value, which JSON.stringify would send as null', () => {
    assert.throws(() => jobs.renderInsert({ payload: { scores: [1, Number.NaN] } }), /insert payload.scores\[1\]: NaN is not a finite number/);
  });
});

describe('the JSON a body is written as', () => {
  test('a bigint anywhere (even from a toJSON) is written as its digits; anything else as JSON.stringify writes it', () => {
    const big = 2n ** 63n - 1n;
    assert.equal(stringify({ a: [1, big, { b: -big }], c: 'x' }), `{"a":[1,${big},{"b":${-big}}],"c":"x"}`);
    assert.equal(stringify({ at: { toJSON: () => big } }), `{"at":${big}}`);
    const plain = { d: new Date(0), u: undefined, f: () => 1, l: [undefined, null, 1.5, 'é"'], n: { m: true } };
    assert.equal(stringify(plain), JSON.stringify(plain));
    assert.equal(stringify(undefined), 'null');
    assert.equal(stringify(big), String(big));
  });
});
