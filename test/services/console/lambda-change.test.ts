import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Lambda } from '../../../packages/client/src/index.ts';
import {
  DraftError,
  draftOf,
  envChange,
  lambdaChange,
  rowKey,
  scheduleChange,
  secretsChange,
  type LambdaDraft,
  type SecretRow,
} from '../../../src/services/console/ui/src/lambda-change.ts';

const LAMBDA: Lambda = {
  id: 'l-1',
  name: 'hello',
  language: 'javascript',
  method: 'ANY',
  path: '/hello',
  code: 'export default () => 1',
  owner: 'user-1',
  project_id: '',
  created_timestamp: 1,
  env: { A: '1', B: '2' },
  secrets: ['S', 'T'],
  logger_id: null,
  schedule: null,
  schedule_tz: null,
  next_run_at: null,
};

const row = (name: string, value: string) => ({ key: rowKey(), name, value });
const stored = (name: string, action: 'keep' | 'replace' | 'remove', value = ''): SecretRow => ({
  key: rowKey(),
  stored: true,
  name,
  action,
  value,
});
const added = (name: string, value: string): SecretRow => ({ key: rowKey(), stored: false, name, value });

/** The console's lambda editor: what a save sends (only what changed; env and secrets as merge patches). */
describe('console lambda editor: the PATCH a save sends', () => {
  it('sends nothing for an untouched draft, and the draft shows no secret value', () => {
    const draft = draftOf(LAMBDA);
    assert.equal(lambdaChange(draft), null);
    assert.deepEqual(
      draft.secrets.map((s) => (s.stored ? [s.name, s.action, s.value] : null)),
      [
        ['S', 'keep', ''],
        ['T', 'keep', ''],
      ],
    );
    assert.equal(draft.logger, '');
    assert.equal(draft.schedule, '');
    assert.equal(draft.scheduleTz, '');
  });

  it('env: changed and new names with values, removed names null, blank rows ignored, renames both', () => {
    assert.equal(envChange({ A: '1' }, [row('A', '1'), row('', '')]), undefined);
    assert.deepEqual(envChange({ A: '1', B: '2', C: '3' }, [row('A', 'one'), row(' C2 ', '3'), row('D', '')]), {
      B: null,
      C: null,
      A: 'one',
      C2: '3',
      D: '',
    });
    assert.throws(() => envChange({}, [row('', 'x')]), DraftError);
    assert.throws(() => envChange({}, [row('X', '1'), row('X', '2')]), /listed twice/);
  });

  it('secrets: new and replaced values, removed null, kept ones left out; an empty value is refused', () => {
    assert.equal(secretsChange([stored('S', 'keep'), added('', '')]), undefined);
    assert.deepEqual(secretsChange([stored('S', 'remove'), stored('T', 'replace', 'new-t'), added('U', 'u')]), {
      S: null,
      T: 'new-t',
      U: 'u',
    });
    assert.throws(() => secretsChange([stored('S', 'replace')]), /new value of the secret S/);
    assert.throws(() => secretsChange([added('U', '')]), /value for the secret U/);
    assert.throws(() => secretsChange([added('', 'v')]), DraftError);
    assert.throws(() => secretsChange([stored('S', 'remove'), added('S', 'v'), added('S', 'w')]), /listed twice/);
    // A name moved from secrets to env goes out as one change; the platform checks the result.
    const draft: LambdaDraft = {
      ...draftOf(LAMBDA),
      env: [row('A', '1'), row('B', '2'), row('S', 'plain')],
      secrets: [stored('S', 'remove'), stored('T', 'keep')],
    };
    assert.deepEqual(lambdaChange(draft), { env: { S: 'plain' }, secrets: { S: null } });
  });

  it('other fields only when changed; an emptied path is no change; the logger set and cleared', () => {
    const base = draftOf(LAMBDA);
    assert.deepEqual(lambdaChange({ ...base, code: 'x', path: '' }), { code: 'x' });
    assert.deepEqual(lambdaChange({ ...base, name: 'n', method: 'GET', path: '/p', language: 'static-html' }), {
      name: 'n',
      method: 'GET',
      path: '/p',
      language: 'static-html',
    });
    assert.deepEqual(lambdaChange({ ...base, logger: 'log-1' }), { logger_id: 'log-1' });
    const withLogger = draftOf({ ...LAMBDA, logger_id: 'log-1' });
    assert.equal(withLogger.logger, 'log-1');
    assert.deepEqual(lambdaChange({ ...withLogger, logger: '' }), { logger_id: null });
  });

  it('schedule: set with or without a zone, changed, zone alone, cleared (null, the zone goes with it)', () => {
    const none = { schedule: null, schedule_tz: null };
    const paris = { schedule: '0 9 * * MON-FRI', schedule_tz: 'Europe/Paris' };
    assert.equal(scheduleChange(none, '', ''), undefined);
    assert.equal(scheduleChange(none, '  ', ' '), undefined);
    assert.deepEqual(scheduleChange(none, ' */5 * * * * * ', ''), { schedule: '*/5 * * * * *' });
    assert.deepEqual(scheduleChange(none, '@daily', 'Europe/Paris'), {
      schedule: '@daily',
      schedule_tz: 'Europe/Paris',
    });
    assert.throws(() => scheduleChange(none, '', 'Europe/Paris'), /time zone needs a schedule/);
    // Untouched, or only one of the two changed: the other is left out (the platform keeps it).
    assert.equal(scheduleChange(paris, '0 9 * * MON-FRI', 'Europe/Paris'), undefined);
    assert.deepEqual(scheduleChange(paris, '@hourly', 'Europe/Paris'), { schedule: '@hourly' });
    assert.deepEqual(scheduleChange(paris, '0 9 * * MON-FRI', 'Asia/Tokyo'), { schedule_tz: 'Asia/Tokyo' });
    assert.deepEqual(scheduleChange(paris, '0 9 * * MON-FRI', ''), { schedule_tz: null });
    assert.deepEqual(scheduleChange(paris, '@hourly', ''), { schedule: '@hourly', schedule_tz: null });
    // Removing: schedule null alone, whatever is left in the zone field.
    assert.deepEqual(scheduleChange(paris, '', ''), { schedule: null });
    assert.deepEqual(scheduleChange(paris, '', 'Europe/Paris'), { schedule: null });
    // A bad expression is the platform's to refuse (its 400 message is shown): it is sent as typed.
    assert.deepEqual(scheduleChange(none, '61 * * * *', ''), { schedule: '61 * * * *' });

    // In the whole PATCH, next to the other fields, and from a draft of a scheduled lambda.
    assert.deepEqual(lambdaChange({ ...draftOf(LAMBDA), code: 'x', schedule: '@weekly', scheduleTz: 'UTC' }), {
      code: 'x',
      schedule: '@weekly',
      schedule_tz: 'UTC',
    });
    const scheduled = draftOf({ ...LAMBDA, ...paris, next_run_at: '2030-01-01T08:00:00Z' });
    assert.deepEqual([scheduled.schedule, scheduled.scheduleTz], ['0 9 * * MON-FRI', 'Europe/Paris']);
    assert.equal(lambdaChange(scheduled), null);
    assert.deepEqual(lambdaChange({ ...scheduled, schedule: '', scheduleTz: '' }), { schedule: null });
  });
});
