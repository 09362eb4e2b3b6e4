import { once } from 'node:events';
import type { FileHandle } from 'node:fs/promises';
import type { Writable } from 'node:stream';

/**
 * The tar form of an archive: POSIX ustar, regular files only, which `tar` on any system lists and
 * extracts (an extracted archive is a directory archive, and `tar cf` of one is read back too).
 * Written as a stream (stdout works); read through an index of where each file's bytes lie, so the
 * import can check every file and then read them again in the order it needs.
 */

const BLOCK = 512;
const ZERO_BLOCK = Buffer.alloc(BLOCK);
/** The largest size a ustar header's 11 octal digits hold; beyond it the GNU base-256 form. */
const MAX_OCTAL_SIZE = 0o77777777777;

function writeOctal(header: Buffer, value: number, offset: number, length: number): void {
  header.write(value.toString(8).padStart(length - 1, '0') + '\0', offset, length, 'ascii');
}

function ustarHeader(name: string, size: number, mtime: number): Buffer {
  const header = Buffer.alloc(BLOCK);
  if (Buffer.byteLength(name) > 100) throw new RangeError(`tar entry name longer than 100 bytes: ${name}`);
  header.write(name, 0, 100, 'utf8');
  // Owner-only: an archive holds password hashes and sealed secrets.
  writeOctal(header, 0o600, 100, 8); // mode
  writeOctal(header, 0, 108, 8); // uid
  writeOctal(header, 0, 116, 8); // gid
  if (size <= MAX_OCTAL_SIZE) writeOctal(header, size, 124, 12);
  else {
    // GNU base-256: the high bit of the first byte set, the size big-endian in the rest.
    header[124] = 0x80;
    header.writeBigUInt64BE(BigInt(size), 124 + 4);
  }
  writeOctal(header, Math.floor(mtime / 1000), 136, 12);
  header.write('        ', 148, 8, 'ascii'); // the checksum counts its own field as spaces
  header.write('0', 156, 1, 'ascii'); // a regular file
  header.write('ustar\u000000', 257, 8, 'ascii');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
  return header;
}

/** Writes a tar stream to `out`, file by file, waiting whenever `out` asks it to. */
export class TarWriter {
  private readonly mtime = Date.now();

  constructor(private readonly out: Writable) {}

  private async write(chunk: Uint8Array): Promise<void> {
    if (this.out.destroyed) throw new Error('the archive output was closed');
    if (!this.out.write(chunk)) await once(this.out, 'drain');
  }

  /** One file of exactly `size` bytes from `content`; anything else fails (the entry would lie). */
  async add(name: string, size: number, content: AsyncIterable<Uint8Array> | Uint8Array): Promise<void> {
    await this.write(ustarHeader(name, size, this.mtime));
    let written = 0;
    const chunks = content instanceof Uint8Array ? [content] : content;
    for await (const chunk of chunks) {
      written += chunk.byteLength;
      if (written > size) throw new Error(`${name} grew past its ${size} bytes while it was archived`);
      await this.write(chunk);
    }
    if (written !== size) throw new Error(`${name} gave ${written} bytes where ${size} were expected`);
    const padding = (BLOCK - (size % BLOCK)) % BLOCK;
    if (padding > 0) await this.write(ZERO_BLOCK.subarray(0, padding));
  }

  /** The end-of-archive marker (two zero blocks). Ending `out` is the caller's (stdout stays open). */
  async end(): Promise<void> {
    await this.write(Buffer.alloc(BLOCK * 2));
  }
}

export interface TarEntry {
  readonly name: string;
  /** Where its content starts in the file. */
  readonly offset: number;
  readonly size: number;
}

function readString(header: Buffer, offset: number, length: number): string {
  const field = header.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
}

function readSize(header: Buffer, offset: number, length: number): number {
  if (header[offset]! & 0x80) {
    let size = 0n;
    for (let i = offset + 1; i < offset + length; i++) size = (size << 8n) | BigInt(header[i]!);
    return Number(size);
  }
  const text = readString(header, offset, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new Error('a size field is not octal');
  return text === '' ? 0 : parseInt(text, 8);
}

function checksumOk(header: Buffer): boolean {
  const stored = parseInt(readString(header, 148, 8).trim(), 8);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  return stored === sum;
}

/** `key=value` records of a pax extended header. */
function paxRecords(content: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  const text = content.toString('utf8');
  for (let at = 0; at < text.length;) {
    const space = text.indexOf(' ', at);
    const length = parseInt(text.slice(at, space), 10);
    if (space === -1 || !Number.isSafeInteger(length) || length <= 0) break;
    const record = text.slice(space + 1, at + length - 1);
    const equals = record.indexOf('=');
    if (equals > 0) records.set(record.slice(0, equals), record.slice(equals + 1));
    at += length;
  }
  return records;
}

async function readAt(file: FileHandle, offset: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await file.read(buffer, filled, length - filled, offset + filled);
    if (bytesRead === 0) throw new Error('the tar file ends inside an entry');
    filled += bytesRead;
  }
  return buffer;
}

/**
 * The regular files of a tar file and where their bytes are, reading only the headers. Names lose
 * a leading `./` (as `tar cf x.tar -C dir .` writes them); directories are skipped; GNU long names
 * and pax `path`/`size` records are honoured.
 */
export async function indexTar(file: FileHandle): Promise<TarEntry[]> {
  const { size: fileSize } = await file.stat();
  const entries: TarEntry[] = [];
  let longName: string | undefined;
  let pax = new Map<string, string>();
  for (let at = 0; ;) {
    if (at + BLOCK > fileSize) throw new Error('the tar file ends without its end-of-archive marker');
    const header = await readAt(file, at, BLOCK);
    if (header.equals(ZERO_BLOCK)) return entries;
    if (!checksumOk(header)) throw new Error(`the tar header at byte ${at} is damaged (checksum)`);
    const type = String.fromCharCode(header[156]!);
    let size = readSize(header, 124, 12);
    const content = at + BLOCK;
    if (type === 'L' || type === 'x') {
      const data = await readAt(file, content, size);
      if (type === 'L') longName = readString(data, 0, data.length);
      else pax = paxRecords(data);
    } else {
      const prefix = readString(header, 345, 155);
      let name =
        longName ??
        pax.get('path') ??
        (prefix ? `${prefix}/${readString(header, 0, 100)}` : readString(header, 0, 100));
      if (pax.has('size')) size = Number(pax.get('size'));
      longName = undefined;
      pax = new Map();
      name = name.replace(/^(\.\/)+/, '');
      if ((type === '0' || type === '\0') && name !== '') entries.push({ name, offset: content, size });
      else if (type !== '5' && type !== 'g')
        throw new Error(`the tar entry ${name} is not a regular file (type ${type})`);
    }
    at = content + Math.ceil(size / BLOCK) * BLOCK;
    if (at > fileSize) throw new Error('the tar file ends inside an entry');
  }
}
