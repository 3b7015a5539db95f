import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connect, expr, FenecError, inc, raw } from '../src/client.js';
import { fakeFetch, json, never } from './fake.js';

describe('the builder', () => {
  const db = connect('http://x.invalid');

  test('is immutable', () => {
    const jobs = db.from('jobs');
    const mine = jobs.where('owner', 'w1');
    mine.order('run_at').limit(3);
    assert.deepEqual(jobs.toQuery(), { query: 'get jobs', params: [] });
    assert.deepEqual(mine.toQuery(), { query: 'get jobs where owner = $1', params: ['w1'] });
  });

  test('puts values in parameters, never in the text', () => {
    const evil = `w1" or 1 = 1; del jobs --`;
    const s = db.from('jobs').where('owner', evil).toQuery('update', { error: evil }, { returning: ['id'] });
    assert.equal(s.query, 'set jobs {error: $1} where owner = $2 returning id');
    assert.deepEqual(s.params, [evil, evil]);
  });

  test('refuses names that are not identifiers', () => {
    assert.throws(() => db.from('jobs where 1 = 1'), TypeError);
    assert.throws(() => db.from('jobs').where('owner = owner or owner', 'x'), /field/);
    assert.throws(() => db.from('jobs').order('run_at; del jobs'), /field/);
    assert.throws(() => db.from('jobs').toQuery('update', { 'a: 1} --': 1 }), /field/);
  });

  test('refuses undefined values, which JSON cannot carry', () => {
    assert.throws(() => db.from('jobs').where('owner', undefined), /undefined/);
    assert.throws(() => db.from('jobs').toQuery('update', { owner: undefined }), /undefined/);
    assert.throws(() => raw('a = ?', undefined), /undefined/);
  });

  test('renders the seed page worker loop', () => {
    const jobs = db.from('jobs');
    const claim = jobs.where(raw('run_at <= now()')).order('run_at').limit(10)
      .toQuery('update', { owner: 'w1:1842', run_at: expr('now() + ?', 30000), attempts: inc(1) }, { returning: true });
    assert.equal(claim.query, 'set jobs {owner: $1, run_at: now() + $2, attempts: attempts + $3} where run_at <= now() order run_at limit 10 returning *');
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
    assert.deepEqual(req?.body, { query: 'set jobs {attempts: attempts + $1} where owner = $2 returning *', params: [1, 'w1'] });
  });

  test('send no header that was not asked for', async () => {
    const { fetch, sent } = fakeFetch(() => json(200, { affected: 0 }));
    await connect('http://db.test', { fetch }).query('del jobs');
    assert.deepEqual(Object.keys(sent[0]?.headers ?? {}).sort(), ['content-type']);
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
    const results = await db.batch([jobs.where('id', 1).toQuery('delete', { require: 1 }), jobs.toQuery('count')]);
    assert.deepEqual(results, [{ affected: 1 }, [{ count: 1 }]]);
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

  test('map a refusal that is not Fenec error to unknown', async () => {
    const { fetch } = fakeFetch(() => new Response('Bad Gateway', { status: 502 }));
    const err = await connect('http://db.test', { fetch }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.deepEqual([err.status, err.code, err.message], [502, 'unknown', 'Bad Gateway']);
  });

  test('map a failure to send to network', async () => {
    const fetch = () => Promise.reject(new TypeError('fetch failed'));
    const err = await connect('http://db.test', { fetch }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.deepEqual([err.status, err.code], [0, 'network']);
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
    await assert.rejects(db.from('jobs').delete({ wait: -1 }), /wait/);
    assert.throws(() => connect('http://db.test', { timeout: 1.5 }), /timeout/);
  });
});
