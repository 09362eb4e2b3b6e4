import { createReadStream } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { ArchiveError } from './format.ts';
import { indexTar } from './tar.ts';

/** An archive's files by name (`tables/x.ndjson`), whether it is a directory or a tar file. */
export interface ArchiveReader {
  /** Every regular file, by its name in the archive. */
  readonly files: ReadonlyMap<string, { readonly size: number }>;
  open(name: string): Readable;
  text(name: string): Promise<string>;
}

async function walk(root: string, dir: string, files: Map<string, { size: number }>): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await walk(root, path, files);
    else if (entry.isFile()) files.set(relative(root, path).split(sep).join('/'), { size: (await stat(path)).size });
  }
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A directory (as `export --to DIR` writes it) or a tar file (as `--to FILE.tar` does). */
export async function openArchiveReader(from: string): Promise<ArchiveReader> {
  const info = await stat(from).catch(() => null);
  if (!info) throw new ArchiveError(`${from} does not exist`);
  if (info.isDirectory()) {
    const files = new Map<string, { size: number }>();
    await walk(from, from, files);
    const reader: ArchiveReader = {
      files,
      open(name) {
        if (!files.has(name)) throw new ArchiveError(`the archive has no ${name}`);
        return createReadStream(join(from, ...name.split('/')));
      },
      text: (name) => readAll(reader.open(name)),
    };
    return reader;
  }
  const handle = await open(from, 'r');
  const files = new Map<string, { size: number; offset: number }>();
  try {
    for (const entry of await indexTar(handle)) {
      if (files.has(entry.name)) throw new Error(`${entry.name} is in it twice`);
      files.set(entry.name, { size: entry.size, offset: entry.offset });
    }
  } catch (error) {
    throw new ArchiveError(`${from} is not a readable tar archive: ${(error as Error).message}`);
  } finally {
    await handle.close();
  }
  const reader: ArchiveReader = {
    files,
    open(name) {
      const entry = files.get(name);
      if (!entry) throw new ArchiveError(`the archive has no ${name}`);
      if (entry.size === 0) return Readable.from([]);
      return createReadStream(from, { start: entry.offset, end: entry.offset + entry.size - 1 });
    },
    text: (name) => readAll(reader.open(name)),
  };
  return reader;
}
