// Reading a logger's lines into a page: search (stored matches, then the stream ends) or follow
// (stored matches, then each new one live). Shared by the logger page and the container page.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { RefObject } from 'preact';
import { messageOf, platform } from '../session.ts';

/** Lines kept on the page: the newest, so a long follow does not grow without bound. */
const MAX_LINES = 2000;

export type LogStreamState = 'idle' | 'following' | 'searching';

export interface LogStream {
  lines: string[];
  state: LogStreamState;
  error: string | null;
  /** Starts reading (stopping any read in progress); `patterns` are RE2 expressions a line must all match. */
  start: (follow: boolean, patterns?: string[]) => void;
  stop: () => void;
  /** The element that shows the lines: kept scrolled to the newest. */
  output: RefObject<HTMLPreElement | null>;
}

/** Reads logger `id`; the read stops when `id` changes and when the page goes away. */
export function useLogStream(id: string | null): LogStream {
  const [lines, setLines] = useState<string[]>([]);
  const [state, setState] = useState<LogStreamState>('idle');
  const [error, setError] = useState<string | null>(null);
  const controller = useRef<AbortController | null>(null);
  const output = useRef<HTMLPreElement>(null);

  const stop = () => {
    controller.current?.abort();
    controller.current = null;
    setState('idle');
  };
  useEffect(() => stop, [id]);
  useEffect(() => {
    const el = output.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines]);

  const start = (follow: boolean, patterns: string[] = []) => {
    stop();
    setLines([]);
    setError(null);
    if (id === null) return;
    const abort = new AbortController();
    controller.current = abort;
    setState(follow ? 'following' : 'searching');
    const handle = platform().logs.logger(id);
    const options = { regex: patterns, signal: abort.signal };
    (async () => {
      for await (const line of follow ? handle.follow(options) : handle.lines(options))
        setLines((prev) => [...prev, line].slice(-MAX_LINES));
    })()
      .catch((err: unknown) => {
        if (!abort.signal.aborted) setError(messageOf(err));
      })
      .finally(() => {
        if (controller.current === abort) {
          controller.current = null;
          setState('idle');
        }
      });
  };

  return { lines, state, error, start, stop, output };
}
