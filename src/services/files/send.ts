import type { ServerResponse } from 'node:http';
import type { BlobFile } from '../../store/blob/types.ts';

/** Bytes read from the file per write to the socket: few reads and few writes. */
const PIECE_BYTES = 1024 * 1024;
/** Pieces in flight at most (one being read, the others being written): bounds the memory. */
const PIECES = 4;

/**
 * Sends `[file.start, file.end]` of a blob file as the body of `res`, whose head the caller set
 * (status, Content-Length): each piece is read into one of a few buffers reused for the whole
 * download and written to the response, the next read overlapping the socket's write. A buffer is
 * reused once the response's write callback says the socket is done with it, so a large download
 * allocates a few MiB, not one new buffer per 64 KiB chunk (garbage that made the platform's heap
 * run a full collection every 64 MiB or so, most of a download's time).
 *
 * `first` is the first piece (`readFirstPiece`), read before the response is committed so that a
 * file that cannot be read still gets an error answer. Resolves once the body is handed to the
 * socket (`res.end()`), or at once without ending it when the client goes away. A later read
 * failure rejects: the caller destroys the response, which tells the client the body is cut (its
 * head was sent with the full length).
 */
export async function sendBlobFile(res: ServerResponse, file: BlobFile, first: FirstPiece): Promise<void> {
  const free: Buffer[] = [];
  let allocated = 1;
  let waiting: (() => void) | null = null;
  let gone = false;
  const wake = () => {
    const resume = waiting;
    waiting = null;
    resume?.();
  };
  const onClose = () => {
    gone = true;
    wake();
  };
  res.once('close', onClose);
  try {
    let position = file.start + first.bytesRead;
    let remaining = file.end - position + 1;
    res.write(first.buffer.subarray(0, first.bytesRead), () => {
      free.push(first.buffer);
      wake();
    });
    while (remaining > 0) {
      if (gone || res.destroyed) return;
      let buffer = free.pop();
      if (buffer === undefined && allocated < PIECES) {
        buffer = Buffer.allocUnsafeSlow(Math.min(PIECE_BYTES, remaining));
        allocated++;
      }
      if (buffer === undefined) {
        await new Promise<void>((resolve) => (waiting = resolve));
        continue;
      }
      const bytesRead = await readPiece(file, buffer, position, remaining);
      position += bytesRead;
      remaining -= bytesRead;
      if (gone || res.destroyed) return;
      const piece = buffer;
      // The callback runs once the socket has written the piece (or failed to): only then is the
      // buffer free. Back-pressure is the pool itself: at most PIECES pieces are ever in flight.
      res.write(piece.subarray(0, bytesRead), () => {
        free.push(piece);
        wake();
      });
    }
    res.end();
  } finally {
    res.off('close', onClose);
  }
}

export interface FirstPiece {
  buffer: Buffer;
  bytesRead: number;
}

/** Reads the first piece of `file` into a buffer of the pool `sendBlobFile` then reuses. */
export async function readFirstPiece(file: BlobFile): Promise<FirstPiece> {
  const remaining = file.end - file.start + 1;
  const buffer = Buffer.allocUnsafeSlow(Math.min(PIECE_BYTES, remaining));
  return { buffer, bytesRead: await readPiece(file, buffer, file.start, remaining) };
}

async function readPiece(file: BlobFile, buffer: Buffer, position: number, remaining: number): Promise<number> {
  const { bytesRead } = await file.handle.read(buffer, 0, Math.min(buffer.byteLength, remaining), position);
  // A blob file never shrinks (content-addressed, replaced by rename): fewer bytes is a fault.
  if (bytesRead === 0) throw new Error(`blob file ended ${remaining} bytes early`);
  return bytesRead;
}
