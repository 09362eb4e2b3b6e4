import { segment, type CallOptions, type Transport } from './transport.ts';
import type { BodyOf, ResultOf } from './types.ts';

export type CreatedApiKey = ResultOf<'apikeysCreateApiKey', 201>;
export type ApiKeySummary = ResultOf<'apikeysListApiKeys', 200>['api_keys'][number];
export type Project = ResultOf<'apikeysGetProject', 200>;
export type NewProject = BodyOf<'apikeysCreateProject'>;
export type ProjectChange = BodyOf<'apikeysUpdateProject'>;

/** The caller's API keys and projects (`/services/apikeys`). */
export class ApiKeysApi {
  readonly keys: ApiKeyCalls;
  readonly projects: ProjectCalls;
  constructor(transport: Transport) {
    this.keys = new ApiKeyCalls(transport);
    this.projects = new ProjectCalls(transport);
  }
}

export class ApiKeyCalls {
  constructor(private readonly transport: Transport) {}

  /** A new key; its secret is in this answer only. */
  create(body: BodyOf<'apikeysCreateApiKey'>, options: CallOptions = {}): Promise<CreatedApiKey> {
    return this.transport.json({ method: 'POST', service: 'apikeys', path: '/v0/apikeys', json: body, ...options });
  }

  /** The caller's keys in creation order, without secrets. */
  async list(options: CallOptions = {}): Promise<ApiKeySummary[]> {
    const result = await this.transport.json<ResultOf<'apikeysListApiKeys', 200>>({
      method: 'GET',
      service: 'apikeys',
      path: '/v0/apikeys',
      ...options,
    });
    return result.api_keys;
  }

  /** Revokes a key on every instance at once. */
  revoke(key: string, options: CallOptions = {}): Promise<ResultOf<'apikeysRevokeApiKey', 200>> {
    return this.transport.json({
      method: 'DELETE',
      service: 'apikeys',
      path: `/v0/apikeys/${segment(key)}`,
      ...options,
    });
  }
}

export class ProjectCalls {
  constructor(private readonly transport: Transport) {}

  create(body: NewProject, options: CallOptions = {}): Promise<Project> {
    return this.transport.json({ method: 'POST', service: 'apikeys', path: '/v0/projects', json: body, ...options });
  }

  list(options: CallOptions = {}): Promise<Project[]> {
    return this.transport.json({ method: 'GET', service: 'apikeys', path: '/v0/projects', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<Project> {
    return this.transport.json({ method: 'GET', service: 'apikeys', path: `/v0/projects/${segment(id)}`, ...options });
  }

  /** Renames a project or sets the origins whose pages may call it (CORS without credentials). */
  update(id: string, change: ProjectChange, options: CallOptions = {}): Promise<Project> {
    return this.transport.json({
      method: 'PATCH',
      service: 'apikeys',
      path: `/v0/projects/${segment(id)}`,
      json: change,
      ...options,
    });
  }

  delete(id: string, options: CallOptions = {}): Promise<Project> {
    return this.transport.json({
      method: 'DELETE',
      service: 'apikeys',
      path: `/v0/projects/${segment(id)}`,
      ...options,
    });
  }
}
