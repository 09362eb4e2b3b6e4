import { MAX_LOG_CHARS, MAX_MESSAGE_CHARS, type InvokeResult } from './runtime/sandbox.ts';

// Secret values out of a run's output (README: Examples, Secrets in output); invoke.ts applies it to every result.

/** Secret values shorter than this are not masked in output (they would mask ordinary words). */
const MIN_MASKED_SECRET = 4;

/**
 * The invocation's console lines and error message with every secret value replaced by `***`, so
 * a secret printed or thrown by mistake reaches no log, history or answer but the handler's own.
 * A value is masked as written and as JSON escapes it (an error may quote it), and a line cut
 * short in the middle of one (the output caps) loses the part it shows.
 */
export function maskSecrets(result: InvokeResult, secrets: Record<string, string>): InvokeResult {
  const forms = new Set<string>();
  for (const value of Object.values(secrets)) {
    if (value.length < MIN_MASKED_SECRET) continue;
    forms.add(value);
    forms.add(JSON.stringify(value).slice(1, -1));
  }
  if (forms.size === 0) return result;
  const values = [...forms].sort((a, b) => b.length - a.length);
  const mask = (text: string) => values.reduce((masked, value) => masked.split(value).join('***'), text);
  // Text cut short at a cap (the message's, or the last line at the lines' total) may end inside
  // a value: that part goes too.
  const maskTail = (text: string) => {
    let cut = 0;
    for (const value of values) cut = Math.max(cut, sharedEnd(text, value));
    return cut >= MIN_MASKED_SECRET ? `${text.slice(0, text.length - cut)}***` : text;
  };
  const logs = result.logs.map((line) => ({ level: line.level, message: mask(line.message) }));
  const last = logs.at(-1);
  if (last && result.logs.reduce((n, line) => n + line.message.length, 0) >= MAX_LOG_CHARS)
    last.message = maskTail(last.message);
  if (result.kind !== 'error') return { ...result, logs };
  const message = mask(result.message);
  return { ...result, message: result.message.length >= MAX_MESSAGE_CHARS ? maskTail(message) : message, logs };
}

/**
 * The length of the longest end of `text` that is a start of `value` (and shorter than it), by
 * the prefix function of `value` + a separator + the end of `text`: linear in their lengths.
 */
export function sharedEnd(text: string, value: string): number {
  const tail = text.slice(-Math.max(0, value.length - 1));
  const joined = `${value}\u0000${tail}`;
  const prefix = new Array<number>(joined.length).fill(0);
  for (let i = 1; i < joined.length; i++) {
    let k = prefix[i - 1]!;
    while (k > 0 && joined[i] !== joined[k]) k = prefix[k - 1]!;
    if (joined[i] === joined[k]) k++;
    prefix[i] = k;
  }
  return tail.length === 0 ? 0 : prefix[joined.length - 1]!;
}
