// ContainerLogs with a stand-in for `podman logs --follow --timestamps`: lines split and
// unstamped, both streams kept, and a follower that ends while its container still runs follows
// again from the last line seen without repeating it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContainerLogs } from '../../../src/services/run/podman/logs.ts';

describe('container output followers', () => {
  let dir: string;
  let binary: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'stratus-logs-'));
    binary = join(dir, 'podman');
    // The first follow prints two lines (one on stderr, one split across writes) and ends, as
    // when the engine restarts the container; the second, from --since, repeats the last one.
    writeFileSync(
      binary,
      `#!/bin/sh
echo "$@" >> "${dir}/calls"
case "$*" in
  *--since*)
    echo "2026-01-01T00:00:02.000000002Z second"
    echo "2026-01-01T00:00:03.000000003Z third"
    sleep 5 ;;
  *)
    printf '2026-01-01T00:00:01.000000001Z fir'
    printf 'st\\n'
    sleep 0.2
    echo "2026-01-01T00:00:02.000000002Z second" >&2 ;;
esac
`,
    );
    chmodSync(binary, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('hands whole lines to the sink once each, following again while the container runs', async () => {
    const got: string[] = [];
    let asked = 0;
    const logs = new ContainerLogs({
      binary,
      sink: (repository, text) => got.push(`${repository}: ${text}`),
      stillRunning: async (id) => {
        asked++;
        assert.equal(id, 'container-1');
        return true;
      },
      retryMs: 50,
    });
    logs.follow('team/app', 'container-1');
    const deadline = Date.now() + 5000;
    while (!got.join('').includes('third')) {
      assert.ok(Date.now() < deadline, JSON.stringify(got));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(got.join('').replaceAll('team/app: ', ''), 'first\nsecond\nthird\n');
    assert.equal(asked, 1);
    assert.equal(logs.following('team/app'), 'container-1');
    logs.close();
    assert.equal(logs.following('team/app'), undefined);
  });

  it('stops following a container that no longer runs', async () => {
    const logs = new ContainerLogs({ binary, sink: () => undefined, stillRunning: async () => false, retryMs: 10 });
    logs.follow('team/gone', 'container-2');
    const deadline = Date.now() + 5000;
    while (logs.following('team/gone') !== undefined) {
      assert.ok(Date.now() < deadline, 'the follower is dropped');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
});
