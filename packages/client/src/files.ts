import { StratusError, errorFromEnvelope } from './errors.ts';
import { segment, slashPath, type CallOptions, type Transport } from './transport.ts';
import type { BodyOf, Schemas } from './types.ts';

export type Bucket = Schemas['Bucket'];
export type BucketSummary = Schemas['BucketListItem'];
export type StoredFile = Schemas['File'];
export type FileSummary = Schemas['FileListItem'];

/** What an upload may send. */
export type UploadData = Blob | ArrayBuffer | Uint8Array | string;

export interface UploadProgress {
  /** Bytes sent so far. */
  loaded: number;
  /** Bytes in all. */
  total: number;
}

export interface UploadOptions extends CallOptions {
  /** The file's `Content-Type` (default: the Blob's type, else sniffed by the service). */
  contentType?: string;
  /** Called as the body goes out: XMLHttpRequest upload events in browsers, a counting stream in Node. */
  onProgress?: (progress: UploadProgress) => void;
}

/** File buckets (`/services/files`). */
export class FilesApi {
  readonly buckets: BucketCalls;
  constructor(private readonly transport: Transport) {
    this.buckets = new BucketCalls(transport);
  }

  /** One bucket's files. */
  bucket(id: string): BucketHandle {
    return new BucketHandle(this.transport, id);
  }
}

export class BucketCalls {
  constructor(private readonly transport: Transport) {}

  create(body: BodyOf<'filesCreateBucket'>, options: CallOptions = {}): Promise<Bucket> {
    return this.transport.json({ method: 'POST', service: 'files', path: '/v1/buckets', json: body, ...options });
  }

  list(options: CallOptions = {}): Promise<BucketSummary[]> {
    return this.transport.json({ method: 'GET', service: 'files', path: '/v1/buckets', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<Bucket> {
    return this.transport.json({ method: 'GET', service: 'files', path: `/v1/buckets/${segment(id)}`, ...options });
  }

  /** Deletes a bucket and its files. */
  delete(id: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({ method: 'DELETE', service: 'files', path: `/v1/buckets/${segment(id)}`, ...options });
  }
}

interface XhrLike {
  open(method: string, url: string): void;
  setRequestHeader(name: string, value: string): void;
  getResponseHeader(name: string): string | null;
  send(body: unknown): void;
  abort(): void;
  readonly status: number;
  readonly responseText: string;
  readonly upload: { onprogress: ((event: { loaded: number; total: number }) => void) | null };
  onload: (() => void) | null;
  onerror: (() => void) | null;
  onabort: (() => void) | null;
}

export class BucketHandle {
  constructor(
    private readonly transport: Transport,
    readonly id: string,
  ) {}

  private filePath(path: string): string {
    // Each segment encoded, the slashes kept: `a b/c.txt` → `a%20b/c.txt`.
    return `/v1/buckets/${segment(this.id)}/files/${slashPath(path)}`;
  }

  /** Stores `data` at `path`, replacing what was there, and answers the file's record. */
  async upload(path: string, data: UploadData, options: UploadOptions = {}): Promise<StoredFile> {
    const blob = data instanceof Blob ? data : new Blob([data] as ConstructorParameters<typeof Blob>[0]);
    const contentType = options.contentType ?? (blob.type || undefined);
    const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {};
    const Xhr = (globalThis as { XMLHttpRequest?: new () => XhrLike }).XMLHttpRequest;
    if (options.onProgress && Xhr) return this.uploadWithXhr(Xhr, path, blob, headers, options);
    if (options.onProgress) {
      return this.transport.json<StoredFile>({
        method: 'PUT',
        service: 'files',
        path: this.filePath(path),
        body: countingStream(blob, options.onProgress),
        headers,
        signal: options.signal,
      });
    }
    return this.transport.json<StoredFile>({
      method: 'PUT',
      service: 'files',
      path: this.filePath(path),
      body: blob,
      headers,
      signal: options.signal,
    });
  }

  /** A file's content. */
  async download(path: string, options: CallOptions = {}): Promise<Blob> {
    const response = await this.transport.send({
      method: 'GET',
      service: 'files',
      path: this.filePath(path),
      ...options,
    });
    return response.blob();
  }

  /** A file's content as a stream, for files too large to hold; cancel it to stop reading. */
  async open(path: string, options: CallOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.fetch(path, options);
    return response.body ?? new Blob([]).stream();
  }

  /** The download's answer itself: its headers (`Content-Length`, `Content-Type`, `ETag`) and its body unread. */
  fetch(path: string, options: CallOptions = {}): Promise<Response> {
    return this.transport.send({ method: 'GET', service: 'files', path: this.filePath(path), ...options });
  }

  /** The files whose name starts with `prefix` (all without one), in first-upload order. */
  list(prefix = '', options: CallOptions = {}): Promise<FileSummary[]> {
    const base = `/v1/buckets/${segment(this.id)}/list`;
    return this.transport.json({
      method: 'GET',
      service: 'files',
      path: prefix ? `${base}/${slashPath(prefix)}` : base,
      ...options,
    });
  }

  delete(path: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({ method: 'DELETE', service: 'files', path: this.filePath(path), ...options });
  }

  /** Browsers: fetch reports no upload progress, XMLHttpRequest does. */
  private uploadWithXhr(
    Xhr: new () => XhrLike,
    path: string,
    blob: Blob,
    headers: Record<string, string>,
    options: UploadOptions,
  ): Promise<StoredFile> {
    return new Promise((resolve, reject) => {
      const signal = options.signal;
      if (signal?.aborted) return reject(signal.reason);
      const xhr = new Xhr();
      xhr.open('PUT', this.transport.url('files', this.filePath(path)));
      for (const [name, value] of Object.entries({ ...this.transport.credentialHeaders(), ...headers }))
        xhr.setRequestHeader(name, value);
      let lastLoaded = -1;
      xhr.upload.onprogress = (event) => {
        lastLoaded = event.loaded;
        options.onProgress?.({ loaded: event.loaded, total: event.total || blob.size });
      };
      const onAbort = () => xhr.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      xhr.onload = () => {
        signal?.removeEventListener('abort', onAbort);
        const requestId = xhr.getResponseHeader('x-request-id') ?? undefined;
        let parsed: unknown;
        try {
          parsed = JSON.parse(xhr.responseText);
        } catch {
          parsed = undefined;
        }
        if (xhr.status >= 200 && xhr.status < 300) {
          // Browsers may skip the last progress event (or every one, for a small body): the whole
          // upload is reported once it is stored, as the counted stream does in Node.
          if (lastLoaded < blob.size) options.onProgress?.({ loaded: blob.size, total: blob.size });
          return resolve(parsed as StoredFile);
        }
        reject(
          errorFromEnvelope(parsed, xhr.status, requestId) ??
            new StratusError(xhr.status, 'error', xhr.responseText.slice(0, 500), { requestId }),
        );
      };
      xhr.onerror = () => {
        signal?.removeEventListener('abort', onAbort);
        reject(new StratusError(0, 'network_error', `PUT ${path}: network error`));
      };
      xhr.onabort = () => reject(signal?.reason ?? new StratusError(0, 'network_error', `PUT ${path}: aborted`));
      xhr.send(blob);
    });
  }
}

/** Bytes read per step of a counted upload, so progress moves in steps of at most this. */
const PROGRESS_CHUNK_BYTES = 64 * 1024;

/** The Blob's bytes as a stream, read in slices, that reports how much of it has been read (sent). */
function countingStream(blob: Blob, onProgress: (progress: UploadProgress) => void): ReadableStream<Uint8Array> {
  let loaded = 0;
  return new ReadableStream<Uint8Array>({
    start() {
      onProgress({ loaded: 0, total: blob.size });
    },
    async pull(controller) {
      if (loaded >= blob.size) return controller.close();
      const chunk = new Uint8Array(await blob.slice(loaded, loaded + PROGRESS_CHUNK_BYTES).arrayBuffer());
      loaded += chunk.byteLength;
      controller.enqueue(chunk);
      onProgress({ loaded, total: blob.size });
    },
  });
}
