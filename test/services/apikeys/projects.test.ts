import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apikeysService } from '../../../src/services/apikeys/index.ts';
import { all } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { assertError, countRows, nextMessage, UUID_V4 } from './helpers.ts';

let service: TestService;

before(async () => {
  service = await startTestService(apikeysService);
});

after(async () => {
  await service.close();
});

interface ProjectJson {
  id: string;
  name: string;
  slug: string;
  host: string;
  owners: string[];
  allowed_origins: string[];
  created_at: string;
}

const SLUG = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const RESERVED = [
  'api',
  'gateway',
  'auth',
  'apikeys',
  'lambda',
  'scheduler',
  'docdb',
  'logs',
  'files',
  'config',
  'run',
  'kv',
  'console',
];

function post(user: string, body: unknown) {
  return service.app.inject({
    method: 'POST',
    url: '/v0/projects',
    headers: { ...asUser(user), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
}

async function createProject(user: string, body: unknown): Promise<ProjectJson> {
  const response = await post(user, body);
  assert.equal(response.statusCode, 201, response.body);
  return response.json() as ProjectJson;
}

async function listProjects(user: string): Promise<ProjectJson[]> {
  const response = await service.app.inject({ method: 'GET', url: '/v0/projects', headers: asUser(user) });
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as ProjectJson[];
}

async function projectCount(): Promise<number> {
  return countRows(service, 'apikeys_projects');
}

describe('POST /v0/projects', () => {
  test('creates the reference example', async () => {
    const before = Date.now();
    const response = await post('user-5f0c', { name: 'My Project', slug: 'my-project' });
    assert.equal(response.statusCode, 201);
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    const project = response.json() as ProjectJson;
    assert.deepEqual(Object.keys(project), ['id', 'name', 'slug', 'host', 'owners', 'allowed_origins', 'created_at']);
    assert.match(project.id, /^project-/);
    assert.match(project.id.slice('project-'.length), UUID_V4);
    assert.equal(project.name, 'My Project');
    assert.equal(project.slug, 'my-project');
    assert.equal(project.host, 'my-project.localhost');
    assert.deepEqual(project.owners, ['user-5f0c']);
    assert.match(project.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    const at = Date.parse(project.created_at);
    assert.ok(at >= Math.floor(before / 1000) * 1000 && at <= Date.now(), 'created now');
  });

  test('accepts names of 1 and 200 characters and slugs of 1 and 63 characters', async () => {
    assert.equal((await createProject('user-lengths', { name: 'x', slug: 'q' })).slug, 'q');
    const long = `a${'-b'.repeat(31)}`;
    assert.equal(long.length, 63);
    const project = await createProject('user-lengths', { name: 'n'.repeat(200), slug: long });
    assert.equal(project.slug, long);
    assert.equal(project.name.length, 200);
    assert.equal(project.host, `${long}.localhost`);
  });

  describe('invalid input → 400 and nothing stored', () => {
    const invalid: Array<[string, unknown]> = [
      ['missing name', { slug: 'no-name' }],
      ['empty name', { name: '' }],
      ['201-character name', { name: 'n'.repeat(201) }],
      ['name not a string', { name: ['x'] }],
      ['unknown field', { name: 'x', owners: ['someone'] }],
      ['upper-case slug', { name: 'x', slug: 'My-Project' }],
      ['slug with dots', { name: 'x', slug: 'my.project' }],
      ['64-character slug', { name: 'x', slug: 'a'.repeat(64) }],
      ['slug with a leading hyphen', { name: 'x', slug: '-abc' }],
      ['slug with a trailing hyphen', { name: 'x', slug: 'abc-' }],
      ['slug with an underscore', { name: 'x', slug: 'a_b' }],
      ['slug with a space', { name: 'x', slug: 'a b' }],
      ['empty slug', { name: 'x', slug: '' }],
      ['slug not a string', { name: 'x', slug: 5 }],
      ['body an array', [{ name: 'x' }]],
    ];
    for (const [label, body] of invalid) {
      test(`${label} → 400 validation_error`, async () => {
        const count = await projectCount();
        assertError(await post('user-invalid', body), 400, 'validation_error');
        assert.equal(await projectCount(), count);
      });
    }

    test('malformed JSON → 400 invalid_json', async () => {
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/projects',
        headers: asUser('user-invalid'),
        payload: '{"name": "x",}',
      });
      assertError(response, 400, 'invalid_json');
    });

    test('the caller ends up with no projects', async () => {
      assert.deepEqual(await listProjects('user-invalid'), []);
    });
  });

  test('every platform host name is reserved → 409 conflict', async () => {
    const count = await projectCount();
    for (const slug of RESERVED) {
      const message = assertError(await post('user-reserved', { name: slug, slug }), 409, 'conflict');
      assert.match(message, new RegExp(slug));
    }
    assert.equal(await projectCount(), count);
  });

  test('a slug taken by anyone → 409 conflict, nothing stored for the second caller', async () => {
    await createProject('user-first', { name: 'Shared', slug: 'shared-name' });
    assertError(await post('user-second', { name: 'Shared too', slug: 'shared-name' }), 409, 'conflict');
    assertError(await post('user-first', { name: 'Again', slug: 'shared-name' }), 409, 'conflict');
    assert.deepEqual(await listProjects('user-second'), []);
    assert.equal((await listProjects('user-first')).length, 1);
  });

  test('concurrent creates of one slug: exactly one wins, the rest get 409', async () => {
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) => post(`user-race-${i}`, { name: 'Race', slug: 'race-slug' })),
    );
    const statuses = responses.map((r) => r.statusCode).sort();
    assert.deepEqual(statuses, [201, 409, 409, 409, 409, 409]);
    const rows = await service.store.sql.database.read(() =>
      all("select id from apikeys_projects where slug = 'race-slug'"),
    );
    assert.equal(rows.length, 1);
  });

  describe('generated slugs', () => {
    test('from the name: lower case, single hyphens, no hyphen at the ends, accents dropped', async () => {
      assert.equal((await createProject('user-gen', { name: '  My Cool   Project!! ' })).slug, 'my-cool-project');
      assert.equal((await createProject('user-gen', { name: 'Café Déjà Vu' })).slug, 'cafe-deja-vu');
      assert.equal((await createProject('user-gen', { name: 'a_b.c/d' })).slug, 'a-b-c-d');
      const project = await createProject('user-gen', { name: 'Host Check' });
      assert.equal(project.host, 'host-check.localhost');
    });

    test('a taken name gets a short random suffix', async () => {
      const first = await createProject('user-gen-taken', { name: 'Taken Name' });
      assert.equal(first.slug, 'taken-name');
      const second = await createProject('user-gen-taken', { name: 'Taken Name' });
      const third = await createProject('user-other', { name: 'Taken Name' });
      assert.match(second.slug, /^taken-name-[a-z0-9]{4}$/);
      assert.match(third.slug, /^taken-name-[a-z0-9]{4}$/);
      assert.notEqual(second.slug, third.slug);
    });

    test('a name with no letters or digits gets a generated label', async () => {
      const project = await createProject('user-gen-empty', { name: '!!! ???' });
      assert.match(project.slug, /^project-[a-z0-9]{4}$/);
      assert.equal(project.name, '!!! ???');
    });

    test('a reserved name gets a suffix', async () => {
      for (const name of ['API', 'Console', 'kv']) {
        const project = await createProject('user-gen-reserved', { name });
        assert.match(project.slug, new RegExp(`^${name.toLowerCase()}-[a-z0-9]{4}$`));
      }
    });

    test('a long name is cut to a valid 63-character label, with room for the suffix when taken', async () => {
      // 'abcdef-' is 7 characters, so the cut at 63 ends on a hyphen, which is trimmed.
      const name = `${'Abcdef '.repeat(20)}end`;
      const first = await createProject('user-gen-long', { name });
      assert.match(first.slug, SLUG);
      assert.equal(first.slug, 'abcdef-'.repeat(9).slice(0, 62));
      const second = await createProject('user-gen-long', { name });
      assert.match(second.slug, SLUG);
      assert.equal(second.slug.length, 63);
      assert.match(second.slug, /^(abcdef-){8}ab-[a-z0-9]{4}$/);
    });
  });

  test('publishes projects.changed with op created', async () => {
    const message = nextMessage(
      service.store,
      'projects.changed',
      (m) => (m as { slug?: string }).slug === 'evented-create',
    );
    const project = await createProject('user-events', { name: 'Evented', slug: 'evented-create' });
    assert.deepEqual(await message, { id: project.id, slug: 'evented-create', op: 'created' });
  });
});

describe('GET /v0/projects and /v0/projects/{id}', () => {
  test('a caller without projects gets a bare empty array', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/v0/projects', headers: asUser('user-none') });
    assert.equal(response.statusCode, 200);
    assert.equal(response.body, '[]');
  });

  test("lists the caller's projects only, in creation order", async () => {
    const created: ProjectJson[] = [];
    for (const name of ['Zeta', 'Alpha', 'Mid'])
      created.push(await createProject('user-lister', { name, slug: `lister-${name.toLowerCase()}` }));
    await createProject('user-lister-other', { name: 'Other', slug: 'lister-other' });
    assert.deepEqual(await listProjects('user-lister'), created);
  });

  test('gets an owned project; unknown or foreign → 404', async () => {
    const project = await createProject('user-getter', { name: 'Mine', slug: 'getter-mine' });
    const own = await service.app.inject({
      method: 'GET',
      url: `/v0/projects/${project.id}`,
      headers: asUser('user-getter'),
    });
    assert.equal(own.statusCode, 200);
    assert.deepEqual(own.json(), project);
    assertError(
      await service.app.inject({ method: 'GET', url: `/v0/projects/${project.id}`, headers: asUser('user-stranger') }),
      404,
      'not_found',
    );
    assertError(
      await service.app.inject({
        method: 'GET',
        url: '/v0/projects/project-00000000-0000-4000-8000-000000000000',
        headers: asUser('user-getter'),
      }),
      404,
      'not_found',
    );
  });
});

describe('DELETE /v0/projects/{id}', () => {
  test('returns the deleted project, which is then gone, and frees its slug', async () => {
    const project = await createProject('user-deleter', { name: 'Doomed', slug: 'doomed' });
    const response = await service.app.inject({
      method: 'DELETE',
      url: `/v0/projects/${project.id}`,
      headers: asUser('user-deleter'),
    });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), project);
    assertError(
      await service.app.inject({ method: 'GET', url: `/v0/projects/${project.id}`, headers: asUser('user-deleter') }),
      404,
      'not_found',
    );
    assert.deepEqual(await listProjects('user-deleter'), []);
    const owners = await service.store.sql.database.read(() =>
      all('select user_id from apikeys_project_owners where project_id = ?', project.id),
    );
    assert.equal(owners.length, 0, 'owner rows removed');
    assertError(
      await service.app.inject({
        method: 'DELETE',
        url: `/v0/projects/${project.id}`,
        headers: asUser('user-deleter'),
      }),
      404,
      'not_found',
    );

    const reused = await createProject('user-someone-else', { name: 'Reborn', slug: 'doomed' });
    assert.equal(reused.slug, 'doomed');
    assert.notEqual(reused.id, project.id);
  });

  test("another user's project → 404 and it survives", async () => {
    const project = await createProject('user-keeper', { name: 'Kept', slug: 'kept' });
    assertError(
      await service.app.inject({ method: 'DELETE', url: `/v0/projects/${project.id}`, headers: asUser('user-thief') }),
      404,
      'not_found',
    );
    assert.deepEqual(await listProjects('user-keeper'), [project]);
  });

  test('unknown id → 404', async () => {
    assertError(
      await service.app.inject({ method: 'DELETE', url: '/v0/projects/project-nope', headers: asUser('user-keeper') }),
      404,
      'not_found',
    );
  });

  test('publishes projects.changed with op deleted', async () => {
    const project = await createProject('user-events', { name: 'Evented', slug: 'evented-delete' });
    const message = nextMessage(
      service.store,
      'projects.changed',
      (m) => (m as { op?: string; id?: string }).op === 'deleted' && (m as { id?: string }).id === project.id,
    );
    const response = await service.app.inject({
      method: 'DELETE',
      url: `/v0/projects/${project.id}`,
      headers: asUser('user-events'),
    });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await message, { id: project.id, slug: 'evented-delete', op: 'deleted' });
  });

  for (const method of ['PUT'] as const) {
    test(`${method} on a project → 405 and the project is unchanged`, async () => {
      const project = await createProject('user-immutable', { name: 'Fixed', slug: `fixed-${method.toLowerCase()}` });
      const response = await service.app.inject({
        method,
        url: `/v0/projects/${project.id}`,
        headers: asUser('user-immutable'),
        payload: { name: 'Changed' },
      });
      assertError(response, 405, 'method_not_allowed');
      assert.match(String(response.headers.allow), /DELETE/);
      assert.match(String(response.headers.allow), /GET/);
      const current = await service.app.inject({
        method: 'GET',
        url: `/v0/projects/${project.id}`,
        headers: asUser('user-immutable'),
      });
      assert.deepEqual(current.json(), project);
    });
  }
});

describe('project host uses the configured domain', () => {
  let other: TestService;
  before(async () => {
    other = await startTestService(apikeysService, { domain: 'stratus.example' });
  });
  after(async () => {
    await other.close();
  });

  test('host is <slug>.<DOMAIN>', async () => {
    const response = await other.app.inject({
      method: 'POST',
      url: '/v0/projects',
      headers: asUser('user-domain'),
      payload: { name: 'Dom', slug: 'dom' },
    });
    assert.equal(response.statusCode, 201);
    assert.equal((response.json() as ProjectJson).host, 'dom.stratus.example');
  });
});

describe('PATCH /v0/projects/{id}', () => {
  function patch(user: string, id: string, body: unknown) {
    return service.app.inject({
      method: 'PATCH',
      url: `/v0/projects/${id}`,
      headers: { ...asUser(user), 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  }
  const originRows = async (id: string) =>
    (
      await service.store.sql.database.read(() =>
        all<{ origin: string }>('select origin from apikeys_project_origins where project_id = ? order by origin', id),
      )
    ).map((row) => row.origin);

  test('sets the allowed origins, normalised and in order, and renames; publishes op updated', async () => {
    const project = await createProject('user-cors', { name: 'Cors', slug: 'cors-app' });
    assert.deepEqual(project.allowed_origins, []);
    const message = nextMessage(
      service.store,
      'projects.changed',
      (m) => (m as { op?: string; id?: string }).op === 'updated' && (m as { id?: string }).id === project.id,
    );
    const response = await patch('user-cors', project.id, {
      name: 'Cors app',
      allowed_origins: ['https://App.Example.com', 'http://localhost:5173', 'https://app.example.com:443'],
    });
    assert.equal(response.statusCode, 200, response.body);
    const changed = response.json() as ProjectJson;
    assert.equal(changed.name, 'Cors app');
    assert.equal(changed.slug, 'cors-app');
    assert.deepEqual(changed.allowed_origins, ['https://app.example.com', 'http://localhost:5173']);
    assert.deepEqual(await message, { id: project.id, slug: 'cors-app', op: 'updated' });
    assert.deepEqual(await originRows(project.id), ['http://localhost:5173', 'https://app.example.com']);
    const read = await service.app.inject({
      method: 'GET',
      url: `/v0/projects/${project.id}`,
      headers: asUser('user-cors'),
    });
    assert.deepEqual(read.json(), changed);

    // A rename alone keeps the origins; an empty list clears them.
    const renamed = (await patch('user-cors', project.id, { name: 'Renamed' })).json() as ProjectJson;
    assert.deepEqual(renamed.allowed_origins, changed.allowed_origins);
    const cleared = (await patch('user-cors', project.id, { allowed_origins: [] })).json() as ProjectJson;
    assert.deepEqual(cleared.allowed_origins, []);
    assert.deepEqual(await originRows(project.id), []);
  });

  test('takes origins at creation too', async () => {
    const project = await createProject('user-cors', { name: 'Born', allowed_origins: ['https://born.example'] });
    assert.deepEqual(project.allowed_origins, ['https://born.example']);
    assert.deepEqual(await originRows(project.id), ['https://born.example']);
  });

  test('refuses what is not an origin, an empty body and unknown fields with 400, changing nothing', async () => {
    const project = await createProject('user-cors', {
      name: 'Strict',
      slug: 'strict-cors',
      allowed_origins: ['https://ok.example'],
    });
    for (const body of [
      { allowed_origins: ['https://app.example.com/path'] },
      { allowed_origins: ['ftp://app.example.com'] },
      { allowed_origins: ['*'] },
      { allowed_origins: ['https://*.example.com'] },
      { allowed_origins: ['https://user:pw@example.com'] },
      { allowed_origins: ['https://example.com?x=1'] },
      { allowed_origins: 'https://example.com' },
      { allowed_origins: Array.from({ length: 51 }, (_, i) => `https://a${i}.example`) },
      {},
      { slug: 'other' },
      { name: '' },
    ]) {
      assertError(await patch('user-cors', project.id, body), 400, 'validation_error');
    }
    const read = await service.app.inject({
      method: 'GET',
      url: `/v0/projects/${project.id}`,
      headers: asUser('user-cors'),
    });
    assert.deepEqual(read.json(), project);
    assert.deepEqual(await originRows(project.id), ['https://ok.example']);
  });

  test("another user's project and an unknown id → 404; anonymous → 401", async () => {
    const project = await createProject('user-cors', { name: 'Mine', slug: 'mine-cors' });
    assertError(await patch('user-other', project.id, { name: 'Theirs' }), 404, 'not_found');
    assertError(await patch('user-cors', 'project-nope', { name: 'x' }), 404, 'not_found');
    const anonymous = await service.app.inject({
      method: 'PATCH',
      url: `/v0/projects/${project.id}`,
      headers: { 'content-type': 'application/json' },
      payload: '{"name":"x"}',
    });
    assertError(anonymous, 401, 'unauthorized');
  });

  test('deleting a project drops its origins', async () => {
    const project = await createProject('user-cors', { name: 'Gone', allowed_origins: ['https://gone.example'] });
    await service.app.inject({ method: 'DELETE', url: `/v0/projects/${project.id}`, headers: asUser('user-cors') });
    assert.deepEqual(await originRows(project.id), []);
  });
});
