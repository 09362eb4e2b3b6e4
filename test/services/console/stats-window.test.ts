import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ALL_HOSTS,
  NO_ROUTE,
  StatsWindow,
  goDurationSeconds,
  type StatsSample,
} from '../../../src/services/console/ui/src/stats-window.ts';

const row = (host: string, served_requests: number, serving_time = '0s'): StatsSample => ({
  host,
  served_requests,
  serving_time,
});

describe('console charts: rates from successive /v0/stats reads', () => {
  it('reads Go durations as the gateway prints them', () => {
    assert.equal(goDurationSeconds('0s'), 0);
    assert.equal(goDurationSeconds('12.25ms'), 0.01225);
    assert.equal(goDurationSeconds('1.5µs'), 1.5e-6);
    assert.equal(goDurationSeconds('250ns'), 2.5e-7);
    assert.equal(goDurationSeconds('1m30.5s'), 90.5);
    assert.equal(goDurationSeconds('2h0m1s'), 7201);
    assert.equal(goDurationSeconds('-3s'), -3);
    for (const bad of ['', 'abc', '3', '1x', 's', '1s2']) assert.equal(goDurationSeconds(bad), null, bad);
  });

  it('gives the rate per host as the difference of two reads over the time between them', () => {
    const window = new StatsWindow(10, 10_000);
    window.push(1_000_000, [row(ALL_HOSTS, 10, '1s'), row(NO_ROUTE, 0), row('api.example', 10)]);
    assert.deepEqual(window.times, [], 'one read gives no rate');
    window.push(1_002_000, [
      row(ALL_HOSTS, 30, '1.2s'),
      row(NO_ROUTE, 2),
      row('api.example', 20),
      row('kv.example', 8),
    ]);
    assert.deepEqual(window.times, [1002]);
    assert.deepEqual(window.hosts, [ALL_HOSTS, NO_ROUTE, 'api.example', 'kv.example']);
    assert.deepEqual(window.rate(ALL_HOSTS), [10]);
    assert.deepEqual(window.rate(NO_ROUTE), [1]);
    assert.deepEqual(window.rate('api.example'), [5]);
    // A host absent from the first read had no requests then.
    assert.deepEqual(window.rate('kv.example'), [4]);
    // 0.2 s of serving over 20 requests: 10 ms each.
    assert.equal(window.latencyMs.length, 1);
    assert.ok(Math.abs((window.latencyMs[0] ?? 0) - 10) < 1e-9);
    assert.equal(window.latest('api.example'), 5);
    assert.equal(window.latest('nobody'), null);
  });

  it('rates the 5xx answers of every host, and leaves a gap where the gateway does not count them', () => {
    const window = new StatsWindow(10, 10_000);
    const all = (requests: number, errors?: number) => ({
      ...row(ALL_HOSTS, requests, '1s'),
      ...(errors === undefined ? {} : { server_errors: errors }),
    });
    window.push(0, [all(10, 1)]);
    window.push(2_000, [all(20, 5)]);
    window.push(4_000, [all(30)]);
    assert.deepEqual(window.serverErrors, [2, null]);
  });

  it('leaves a gap instead of a number when the rate cannot be known', () => {
    const window = new StatsWindow(10, 5_000);
    window.push(0, [row(ALL_HOSTS, 100, '1s'), row('a', 100, '1s')]);
    window.push(2_000, [row(ALL_HOSTS, 100, '1s'), row('a', 100, '1s')]);
    assert.deepEqual(window.rate(ALL_HOSTS), [0]);
    assert.deepEqual(window.latencyMs, [null], 'no request finished: no average');
    // An instance left the sum: the totals went down.
    window.push(4_000, [row(ALL_HOSTS, 40, '0.5s'), row('a', 40, '0.5s')]);
    // The tab slept: the reads are too far apart.
    window.push(60_000, [row(ALL_HOSTS, 400, '1s'), row('a', 400, '1s')]);
    // A host gone from the rows.
    window.push(62_000, [row(ALL_HOSTS, 402, '1s')]);
    assert.deepEqual(window.rate(ALL_HOSTS), [0, null, null, 1]);
    assert.deepEqual(window.rate('a'), [0, null, null, null]);
    // A host that appears later has no rate before it.
    window.push(64_000, [row(ALL_HOSTS, 404, '1s'), row('b', 4)]);
    assert.deepEqual(window.rate('b'), [null, null, null, null, 2]);
    // A read no later than the previous one is not a point.
    window.push(64_000, [row(ALL_HOSTS, 500, '1s')]);
    assert.equal(window.times.length, 5);
  });

  it('keeps the newest points only', () => {
    const window = new StatsWindow(3, 5_000);
    for (let i = 0; i <= 5; i++) window.push(i * 1000, [row(ALL_HOSTS, i * i), row('h', i)]);
    assert.deepEqual(window.times, [3, 4, 5]);
    assert.deepEqual(window.rate(ALL_HOSTS), [5, 7, 9]);
    assert.deepEqual(window.rate('h'), [1, 1, 1]);
    assert.equal(window.latencyMs.length, 3);
  });
});
