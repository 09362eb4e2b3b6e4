import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseWrk } from '../../bench/wrk.ts';
import { resultsMarkdown } from '../../bench/results-file.ts';
import { ratioOf } from '../../bench/results.ts';

// wrk 4.1's report with --latency, as Debian's wrk prints it.
const WRK_OUTPUT = `Running 3s test @ http://127.0.0.1:40111/version
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.52ms  612.33us  21.04ms   93.10%
    Req/Sec    33.21k     1.12k   35.02k    70.00%
  Latency Distribution
     50%    1.42ms
     75%    1.61ms
     90%    1.89ms
     99%  850.00us
  99127 requests in 3.00s, 14.56MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  33042.17
Transfer/sec:      4.85MB
`;

describe('bench results', () => {
  it("reads wrk's rate, percentiles in any unit, socket errors and non-2xx answers", () => {
    const result = parseWrk('static', WRK_OUTPUT);
    assert.equal(result.requestsPerSecond, 33042.17);
    assert.equal(result.p50, 1.42);
    assert.equal(result.p99, 0.85);
    assert.equal(result.errors, 3);
    assert.equal(result.non2xx, 7);
    assert.deepEqual(result.statuses, { 'non-2xx': 7, read: 2, timeout: 1 });
  });

  it('refuses a wrk report without a rate instead of reading it as zero', () => {
    assert.throws(() => parseWrk('broken', 'unable to connect to 127.0.0.1:1 Connection refused'), /printed no rate/);
  });

  it('writes one table row per result with its ratio and target, and lists notes, skipped peers and failures', () => {
    const markdown = resultsMarkdown(
      [
        {
          bench: 'gateway',
          path: 'remote upstream',
          figure: 29_000,
          unit: 'req/s',
          p50: 1.5,
          p99: 4,
          peer: { name: 'nginx/1.22.1', figure: 32_000, p50: 1.4, p99: 3.9 },
          target: '≥ 0.9× nginx',
          met: true,
        },
        {
          bench: 'kv',
          path: 'set | put',
          figure: 15_000,
          unit: 'req/s',
          peerSkipped: 'etcd-server could not be installed',
          target: '≥ 1.5× etcd put',
          met: false,
          note: 'no peer in this run',
        },
      ],
      {
        date: '2026-11-28T23:00:00.000Z',
        commit: 'abc1234',
        machine: 'test machine',
        durationS: 125,
        failures: ['files exited with 1'],
        skipped: ['kv: etcd-server could not be installed'],
      },
    );
    const rows = markdown.split('\n').filter((line) => line.startsWith('| gateway') || line.startsWith('| kv'));
    assert.equal(rows.length, 2);
    assert.match(
      rows[0]!,
      /\| 29,000 req\/s \| 1\.5 \/ 4 \| nginx\/1\.22\.1 \| 32,000 req\/s \| 1\.4 \/ 3\.9 \| 0\.91 \| ≥ 0\.9× nginx \| yes \|$/,
    );
    // A pipe in a cell is escaped, so the row keeps its columns.
    assert.match(
      rows[1]!,
      /^\| kv \| set \\\| put \| 15,000 req\/s \| {2}\| skipped: etcd-server could not be installed \|/,
    );
    assert.match(rows[1]!, /\| \*\*no\*\* \|$/);
    assert.match(markdown, /- Commit: abc1234/);
    assert.match(markdown, /## Notes\n\n- \*\*kv, set \| put:\*\* no peer in this run/);
    assert.match(markdown, /## Peers skipped\n\n- kv: etcd-server could not be installed/);
    assert.match(markdown, /## Benches that failed\n\n- files exited with 1/);
    assert.equal(ratioOf({ figure: 5, peer: { name: 'x', figure: 0 } }), undefined);
  });
});
