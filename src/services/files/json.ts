/**
 * JSON writing for objects that carry nanosecond timestamps. `JSON.stringify` cannot write a
 * bigint and a number above 2^53 is rounded, so these objects are written field by field: every
 * bigint as its exact decimal digits, everything else through `JSON.stringify`. Nothing user
 * supplied is spliced in unescaped, so no field value can forge another field.
 */
export type JsonField = string | number | boolean | null | bigint | readonly string[];

export function jsonObject(fields: Readonly<Record<string, JsonField>>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(fields)) {
    parts.push(`${JSON.stringify(key)}:${typeof value === 'bigint' ? value.toString() : JSON.stringify(value)}`);
  }
  return `{${parts.join(',')}}`;
}

export function jsonArray(items: readonly string[]): string {
  return `[${items.join(',')}]`;
}
