import { createHash, randomUUID } from 'node:crypto';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError } from '../../../core/errors.ts';
import { identityOf } from '../../../core/identity.ts';
import { isUuidV4 } from '../../../core/ids.ts';
import { BlobGoneError, type BlobPin, type BlobRefs } from '../../../store/blob/refs.ts';
import { BlobDigestMismatchError, BlobTooLargeError, readSource, type BlobInfo, type BlobStore } from '../../../store/blob/types.ts';
import { digestHex, digestProblem, isRepositoryName, isTag, toDigest } from '../names.ts';
import type { RunRepository, Upload } from '../repository.ts';
import { bodyChunks, coalesce, declaredLength, disconnectSignal, hasBody, parseContentRange, readLimited } from './body.ts';
import { readAhead } from '../../../core/read-ahead.ts';
import {
  RegistryError,
  denied,
  digestInvalid,
  manifestInvalid,
  nameInvalid,
  registryErrorBody,
  sizeInvalid,
  unauthorizedRegistry,
  unavailable,
  unsupported,
  uploadUnknown,
} from './errors.ts';
import type { UploadFollowers } from './follower.ts';
import { MAX_MANIFEST_BYTES, parseManifest } from './manifest.ts';
import { parseRegistryPath, registryPathOf } from './paths.ts';

export interface RegistryDeps {
  repository: RunRepository;
  blobs: BlobStore;
  refs: BlobRefs;
  /** Largest blob accepted (`RUN_MAX_BLOB_BYTES`). */
  maxBlobBytes: number;
  /** An upload idle this long is unknown (and swept). */
  uploadExpiryMs: number;
  now: () => number;
  /** This instance's followers of chunked uploads (see follower.ts). */
  followers: UploadFollowers;
}

const API_VERSION = 'registry/2.0';

/**
 * The push-only registry (run.md §6) under `/v2/`. One wildcard route per method: names contain
 * `/` and digests `:`, so the path is parsed here from its end. The scope has no body parser:
 * blob bodies stream from the socket into the blob store, manifests are read (≤ 4 MiB) here.
 */
export async function registerRegistry(app: ServiceApp, deps: RegistryDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    scope.addHook('onRequest', async (_request, reply) => {
      reply.header('docker-distribution-api-version', API_VERSION);
    });
    scope.setErrorHandler((error: FastifyError | RegistryError | HttpError, request: FastifyRequest, reply: FastifyReply) => {
      if (error instanceof RegistryError) return sendError(request, reply, error.status, error.code, error.message, error.detail, error.headers);
      if (error instanceof HttpError) return sendError(request, reply, error.status, error.status === 405 ? 'UNSUPPORTED' : 'UNKNOWN', error.message, null, error.headers);
      if ((error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendError(request, reply, 413, 'SIZE_INVALID', 'request body is too large', null, {});
      request.log.error({ err: error, reqId: request.id, method: request.method, url: request.url.split('?')[0] }, 'unhandled registry error');
      return sendError(request, reply, 500, 'UNKNOWN', 'internal error', null, {});
    });

    const registry = new Registry(deps);
    const handler = (request: FastifyRequest, reply: FastifyReply) => registry.handle(request, reply);
    for (const method of ['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE'] as const) {
      scope.route({ method, url: '/v2/*', exposeHeadRoute: false, schema: { hide: true }, handler });
    }
  });
}

function sendError(request: FastifyRequest, reply: FastifyReply, status: number, code: string, message: string, detail: unknown, headers: Readonly<Record<string, string>>): FastifyReply {
  // A body left half read (too large, wrong digest) is discarded so the connection can carry the
  // next request; Node only does that itself for bodies nobody started reading.
  drain(request);
  void reply.code(status).headers(headers);
  // HEAD errors carry the status only (run.md §6.2).
  if (request.method === 'HEAD') return reply.send();
  return reply.type('application/json').send(registryErrorBody(code, message, detail));
}

/** Maps blob store failures to registry errors. */
function storeError(error: unknown): unknown {
  if (error instanceof BlobTooLargeError) return sizeInvalid(`blob exceeds the limit of ${error.maxBytes} bytes`);
  if (error instanceof BlobDigestMismatchError) return digestInvalid('the uploaded content does not match the digest', { expected: `sha256:${error.expected}`, actual: `sha256:${error.actual}` });
  if (error instanceof BlobGoneError) return unavailable('storage changed during the upload; retry');
  return error;
}

const rangeHeader = (size: number) => `0-${size > 0 ? size - 1 : 0}`;

class Registry {
  constructor(private readonly deps: RegistryDeps) {}

  async handle(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const identity = identityOf(request);
    if (!identity) {
      drain(request);
      throw unauthorizedRegistry();
    }
    const user = identity.user.id;
    const path = registryPathOf(request.url);
    if (path === null) throw new RegistryError(404, 'NAME_UNKNOWN', 'the path is not valid percent-encoding');
    const target = parseRegistryPath(request.method, path);
    const method = request.method;
    switch (target.kind) {
      case 'base':
        if (method === 'GET') return reply.code(200).type('application/json').send({});
        if (method === 'HEAD') return reply.code(200).send();
        break;
      case 'catalog':
        throw unsupported('listing the catalog');
      case 'tags':
        throw unsupported('listing tags');
      case 'uploads':
        return this.startUpload(request, reply, user, target.name);
      case 'upload':
        if (method === 'GET') return this.uploadStatus(reply, user, target.name, target.uuid);
        if (method === 'PATCH') return this.appendChunk(request, reply, user, target.name, target.uuid);
        if (method === 'PUT') return this.finishUpload(request, reply, user, target.name, target.uuid);
        if (method === 'DELETE') return this.cancelUpload(reply, user, target.name, target.uuid);
        break;
      case 'blob':
        if (method === 'HEAD') return this.headBlob(reply, user, target.name, target.digest);
        if (method === 'GET') throw unsupported('pulling blobs');
        if (method === 'DELETE') throw unsupported('deleting blobs');
        break;
      case 'manifest':
        if (method === 'HEAD') return this.headManifest(reply, user, target.name, target.reference);
        if (method === 'PUT') return this.putManifest(request, reply, user, target.name, target.reference);
        if (method === 'GET') throw unsupported('pulling manifests');
        if (method === 'DELETE') throw unsupported('deleting manifests');
        break;
      case 'unknown':
        break;
    }
    drain(request);
    throw new RegistryError(404, 'NAME_UNKNOWN', `no registry endpoint for ${method} /v2/${path}`);
  }

  /** Checks the name and that the caller may push to it; returns the owner (null: unused name). */
  private async access(name: string, user: string): Promise<string | null> {
    if (!isRepositoryName(name)) throw nameInvalid(name);
    const owner = await this.deps.repository.ownerOf(name);
    if (owner !== null && owner !== user) throw denied(name);
    return owner;
  }

  private async liveUpload(name: string, uuid: string): Promise<Upload> {
    if (!isUuidV4(uuid)) throw uploadUnknown();
    const upload = await this.deps.repository.upload(uuid);
    // An upload is addressed under the name it was started with; an idle one has expired even
    // before the sweeper removes it.
    if (!upload || upload.repository !== name || upload.updatedAt < this.deps.now() - this.deps.uploadExpiryMs) throw uploadUnknown();
    return upload;
  }

  private async headBlob(reply: FastifyReply, user: string, name: string, digest: string): Promise<FastifyReply> {
    const problem = digestProblem(digest);
    if (problem) throw digestInvalid(problem);
    const owner = await this.access(name, user);
    const size = owner === null ? null : await this.deps.repository.linkedBlob(name, digest);
    if (size === null) throw new RegistryError(404, 'BLOB_UNKNOWN', 'blob unknown to registry', { digest });
    return reply.code(200).headers({ 'content-length': String(size), 'docker-content-digest': digest, 'content-type': 'application/octet-stream' }).send();
  }

  private async resolveReference(name: string, reference: string): Promise<string | null> {
    if (reference.includes(':')) {
      const problem = digestProblem(reference);
      if (problem) throw digestInvalid(problem);
      return reference;
    }
    if (!isTag(reference)) throw manifestInvalid(`invalid tag '${reference.slice(0, 200)}'`);
    return this.deps.repository.tagDigest(name, reference);
  }

  private async headManifest(reply: FastifyReply, user: string, name: string, reference: string): Promise<FastifyReply> {
    const owner = await this.access(name, user);
    const digest = await this.resolveReference(name, reference);
    const manifest = owner === null || digest === null ? null : await this.deps.repository.manifest(name, digest);
    if (!manifest || digest === null) throw new RegistryError(404, 'MANIFEST_UNKNOWN', 'manifest unknown to registry', { reference });
    return reply.code(200).headers({ 'content-length': String(manifest.size), 'content-type': manifest.mediaType, 'docker-content-digest': digest }).send();
  }

  /** Streams `source` into the blob store under the size limit, verifying `digest` when given. */
  private async store(source: AsyncIterable<Uint8Array>, request: FastifyRequest, reply: FastifyReply, digest?: string): Promise<BlobInfo> {
    const disconnect = disconnectSignal(request.raw, reply.raw);
    try {
      return await this.deps.blobs.put(source, {
        maxBytes: this.deps.maxBlobBytes,
        ...(digest !== undefined ? { expectedSha256: digestHex(digest) } : {}),
        signal: disconnect.signal,
      });
    } catch (error) {
      throw storeError(error);
    } finally {
      disconnect.dispose();
    }
  }

  private checkDeclaredSize(request: FastifyRequest, already: number): void {
    const declared = declaredLength(request.raw);
    if (declared !== undefined && already + declared > this.deps.maxBlobBytes) {
      drain(request);
      throw sizeInvalid(`blob exceeds the limit of ${this.deps.maxBlobBytes} bytes`);
    }
  }

  private async pin(sha256: string): Promise<BlobPin> {
    try {
      return await this.deps.refs.pin(sha256);
    } catch (error) {
      throw storeError(error);
    }
  }

  private async startUpload(request: FastifyRequest, reply: FastifyReply, user: string, name: string): Promise<FastifyReply> {
    const query = request.query as Record<string, unknown>;
    const digest = typeof query.digest === 'string' ? query.digest : undefined;
    await this.access(name, user).catch((error: unknown) => {
      drain(request);
      throw error;
    });
    if (digest !== undefined) {
      // Monolithic upload: the whole blob in this request.
      const problem = digestProblem(digest);
      if (problem) {
        drain(request);
        throw digestInvalid(problem);
      }
      this.checkDeclaredSize(request, 0);
      const info = await this.store(coalesce(bodyChunks(request.raw)), request, reply, digest);
      const pin = await this.pin(info.sha256);
      const linked = await this.deps.repository.linkBlob(name, user, digest, info.size, pin).catch((error: unknown) => {
        throw storeError(error);
      });
      if (linked === 'denied') throw denied(name);
      return reply.code(201).headers({ location: `/v2/${name}/blobs/${digest}`, 'docker-content-digest': digest, 'content-length': '0' }).send();
    }
    // `mount`/`from` are ignored: a normal upload starts. A body without a digest has nowhere to go.
    drain(request);
    const uuid = randomUUID();
    if ((await this.deps.repository.startUpload(uuid, name, user, this.deps.now())) === 'denied') throw denied(name);
    return reply
      .code(202)
      .headers({ location: `/v2/${name}/blobs/uploads/${uuid}`, 'docker-upload-uuid': uuid, range: '0-0', 'content-length': '0' })
      .send();
  }

  private uploadHeaders(name: string, uuid: string, size: number): Record<string, string> {
    return { location: `/v2/${name}/blobs/uploads/${uuid}`, 'docker-upload-uuid': uuid, range: rangeHeader(size) };
  }

  private outOfOrder(name: string, upload: Upload, message: string): RegistryError {
    return new RegistryError(416, 'BLOB_UPLOAD_INVALID', message, { size: upload.size }, this.uploadHeaders(name, upload.id, upload.size));
  }

  private async uploadStatus(reply: FastifyReply, user: string, name: string, uuid: string): Promise<FastifyReply> {
    await this.access(name, user);
    const upload = await this.liveUpload(name, uuid);
    return reply.code(204).headers(this.uploadHeaders(name, uuid, upload.size)).send();
  }

  private async cancelUpload(reply: FastifyReply, user: string, name: string, uuid: string): Promise<FastifyReply> {
    await this.access(name, user);
    await this.liveUpload(name, uuid);
    this.deps.followers.drop(uuid);
    if (!(await this.deps.repository.discardUpload(uuid))) throw uploadUnknown();
    return reply.code(204).send();
  }

  /** The `Content-Range` of a chunk, checked against the upload before a byte is read. */
  private checkRange(request: FastifyRequest, name: string, upload: Upload): { start: number; end: number } | null {
    const header = request.headers['content-range'];
    if (header === undefined) return null;
    const range = parseContentRange(header);
    if (!range) throw this.outOfOrder(name, upload, `malformed Content-Range '${header}'`);
    if (range.start !== upload.size) throw this.outOfOrder(name, upload, `chunk starts at ${range.start} but the upload has ${upload.size} bytes`);
    return range;
  }

  private async appendChunk(request: FastifyRequest, reply: FastifyReply, user: string, name: string, uuid: string): Promise<FastifyReply> {
    let upload: Upload;
    let range: { start: number; end: number } | null;
    try {
      await this.access(name, user);
      upload = await this.liveUpload(name, uuid);
      range = this.checkRange(request, name, upload);
      this.checkDeclaredSize(request, upload.size);
    } catch (error) {
      drain(request);
      throw error;
    }
    const { repository, blobs, refs } = this.deps;
    let part = { sha256: '', size: 0 };
    let pin: BlobPin | null = null;
    if (hasBody(request.raw)) {
      const disconnect = disconnectSignal(request.raw, reply.raw);
      try {
        const remaining = this.deps.maxBlobBytes - upload.size;
        const sizeHint = declaredLength(request.raw);
        part = await blobs.put(coalesce(bodyChunks(request.raw)), { maxBytes: remaining, signal: disconnect.signal, ...(sizeHint === undefined ? {} : { sizeHint }) });
      } catch (error) {
        throw storeError(error);
      } finally {
        disconnect.dispose();
      }
      if (part.size === 0) {
        // An empty chunk adds nothing; its (empty) blob is left to the sweeper unless held elsewhere.
        await refs.markCandidate(part.sha256);
      } else {
        pin = await this.pin(part.sha256);
      }
    }
    if (range && part.size !== range.end - range.start + 1) {
      // The pin stays behind as a deletion candidate: the chunk's blob goes with the sweeper.
      throw this.outOfOrder(name, upload, `Content-Range announces ${range.end - range.start + 1} bytes but the chunk has ${part.size}`);
    }
    const outcome = await repository.appendPart(uuid, upload.size, part, pin, this.deps.now()).catch((error: unknown) => {
      throw storeError(error);
    });
    if (outcome === 'gone') throw uploadUnknown();
    if (outcome === 'conflict') {
      this.deps.followers.drop(uuid);
      const current = await this.liveUpload(name, uuid);
      throw this.outOfOrder(name, current, 'another chunk was appended to this upload meanwhile');
    }
    this.deps.followers.appended(upload, part);
    return reply.code(202).headers({ ...this.uploadHeaders(name, uuid, upload.size + part.size), 'content-length': '0' }).send();
  }

  private async finishUpload(request: FastifyRequest, reply: FastifyReply, user: string, name: string, uuid: string): Promise<FastifyReply> {
    const query = request.query as Record<string, unknown>;
    const digest = typeof query.digest === 'string' ? query.digest : undefined;
    let upload: Upload;
    try {
      await this.access(name, user);
      upload = await this.liveUpload(name, uuid);
      const problem = digestProblem(digest);
      if (problem) throw digestInvalid(problem);
      this.checkRange(request, name, upload);
      this.checkDeclaredSize(request, upload.size);
    } catch (error) {
      drain(request);
      throw error;
    }
    const verified = digest!;
    const { repository, blobs } = this.deps;
    const finalChunk = hasBody(request.raw);
    const follower = this.deps.followers.take(uuid);
    let info: BlobInfo | null = null;
    const only = upload.parts[0];
    if (!finalChunk && upload.parts.length === 1 && only && toDigest(only.sha256) === verified) {
      // One chunk that already hashes to the digest (what `docker push` sends): nothing to re-read.
      follower?.abort();
      info = only;
    } else if (follower?.matches(upload)) {
      // This instance has been writing the blob while the chunks arrived: close it.
      try {
        info = await follower.finish(finalChunk ? bodyChunks(request.raw) : null);
      } catch (error) {
        // With a final chunk the body is spent: answer. Without one, fall back to the re-read.
        if (finalChunk) throw storeError(error);
      }
      if (info && info.sha256 !== digestHex(verified)) {
        // Stored under the hash the bytes have; nothing refers to it, so the sweeper removes it.
        await this.deps.refs.markCandidate(info.sha256);
        await repository.discardUpload(uuid);
        throw digestInvalid('the uploaded content does not match the digest', { expected: verified, actual: toDigest(info.sha256) });
      }
    } else {
      follower?.abort();
    }
    if (!info) {
      // The chunks, then the final chunk, are streamed in order through one put that verifies the digest.
      async function* content(): AsyncGenerator<Uint8Array, void, undefined> {
        for (const part of upload.parts) {
          const stream = await blobs.get(part.sha256);
          if (!stream) throw unavailable('a chunk of this upload is missing from storage; restart the upload');
          yield* readSource(stream);
        }
        if (finalChunk) yield* bodyChunks(request.raw);
      }
      try {
        info = await this.store(readAhead(coalesce(content())), request, reply, verified);
      } catch (error) {
        if (error instanceof RegistryError && error.code === 'DIGEST_INVALID') await repository.discardUpload(uuid);
        throw error;
      }
    }
    const pin = await this.pin(info.sha256);
    const outcome = await repository.finishUpload(upload, verified, info.size, pin).catch((error: unknown) => {
      throw storeError(error);
    });
    if (outcome === 'gone') throw uploadUnknown();
    if (outcome === 'conflict') {
      const current = await this.liveUpload(name, uuid);
      throw this.outOfOrder(name, current, 'a chunk was appended to this upload while it was being finished');
    }
    return reply.code(201).headers({ location: `/v2/${name}/blobs/${verified}`, 'docker-content-digest': verified, 'content-length': '0' }).send();
  }

  private async putManifest(request: FastifyRequest, reply: FastifyReply, user: string, name: string, reference: string): Promise<FastifyReply> {
    let tag: string | null = null;
    try {
      await this.access(name, user);
      if (reference.includes(':')) {
        const problem = digestProblem(reference);
        if (problem) throw digestInvalid(problem);
      } else if (isTag(reference)) {
        tag = reference;
      } else {
        throw manifestInvalid(`invalid tag '${reference.slice(0, 200)}'`);
      }
      const declared = declaredLength(request.raw);
      if (declared !== undefined && declared > MAX_MANIFEST_BYTES) throw sizeInvalid(`manifest exceeds ${MAX_MANIFEST_BYTES} bytes`);
    } catch (error) {
      drain(request);
      throw error;
    }
    const disconnect = disconnectSignal(request.raw, reply.raw);
    let body: Buffer;
    try {
      body = await readLimited(request.raw, MAX_MANIFEST_BYTES, disconnect.signal);
    } finally {
      disconnect.dispose();
    }
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (tag === null && reference !== digest) throw digestInvalid(`the manifest's digest is ${digest}, not ${reference}`, { expected: reference, actual: digest });
    const contentType = request.headers['content-type'];
    const manifest = parseManifest(body, contentType);
    const outcome = await this.deps.repository.putManifest({ repository: name, owner: user, digest, mediaType: manifest.mediaType, body, tag, blobs: manifest.blobs, manifests: manifest.manifests });
    if (outcome.kind === 'denied') throw denied(name);
    if (outcome.kind === 'unknown') {
      throw new RegistryError(400, 'MANIFEST_BLOB_UNKNOWN', `the manifest references ${outcome.what === 'blob' ? 'a blob' : 'a manifest'} not in the repository: ${outcome.digest}`, { digest: outcome.digest });
    }
    return reply.code(201).headers({ location: `/v2/${name}/manifests/${digest}`, 'docker-content-digest': digest, 'content-length': '0' }).send();
  }
}

/** Lets an unread request body flow to nowhere, so an early answer does not stall the connection. */
function drain(request: FastifyRequest): void {
  if (!request.raw.readableEnded) request.raw.resume();
}
