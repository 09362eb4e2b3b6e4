// The filter language's example table (src/services/docdb/README.md, "Filter language"): three
// documents and, for each filter, the ids it selects from them in insertion order (limit 10).
// Shared by the endpoint tests (query.test.ts) and the compiler's and the reference
// implementation's tests (query/filter.test.ts).
import type { JsonObject, JsonValue } from '../../../../src/core/json.ts';

export const EXAMPLE_DOCUMENTS: [JsonObject, JsonObject, JsonObject] = [
  { id: 'a', n: 1, name: 'Alice', tags: ['red', 'blue'], address: { city: 'Madrid', zip: '28001' } },
  { id: 'b', n: 2, name: 'Bob', tags: ['green'], address: { city: 'Paris' } },
  { id: 'c', n: 3, name: 'Carol' },
];

/** The table itself. */
export const FILTER_EXAMPLES: [JsonValue, string[]][] = [
  [{ n: { $gt: 1 } }, ['b', 'c']],
  [{ n: { $gte: 2 } }, ['b', 'c']],
  [{ n: { $le: 2 } }, ['a', 'b']],
  [{ n: { $ne: 2 } }, ['a', 'c']],
  [{ n: { $in: [1, 3] } }, ['a', 'c']],
  [{ n: { $nin: [1, 3] } }, ['b']],
  [{ name: { $contains: 'ar' } }, ['c']],
  [{ $and: [{ n: { $gt: 1 } }, { n: { $lt: 3 } }] }, ['b']],
  [{ tags: 'red' }, ['a']],
  [{ 'address.city': 'Paris' }, ['b']],
  [{ address: { city: 'Madrid' } }, ['a']],
  [{ address: null }, ['c']],
];

/** The table's one invalid filter: 400 `invalid_filter` naming `$regex`. */
export const INVALID_FILTER_EXAMPLE: JsonValue = { n: { $regex: 'x' } };

/** The comparison operators the table leaves out (`$ge`, `$lte`, `$lt`), on the same documents. */
export const COMPARISON_EXAMPLES: [JsonValue, string[]][] = [
  [{ n: { $ge: 2 } }, ['b', 'c']],
  [{ n: { $lte: 2 } }, ['a', 'b']],
  [{ n: { $lt: 2 } }, ['a']],
];

/** More of the language on the same documents: `$or`, an operator on a field, arrays, `{}`. */
export const FURTHER_EXAMPLES: [JsonValue, string[]][] = [
  [{ $or: [{ n: 1 }, { name: 'Bob' }] }, ['a', 'b']],
  [{ n: { $and: [{ $gt: 1 }, { $lt: 3 }] } }, ['b']],
  [{ tags: ['red', 'blue'] }, ['a']],
  [{ tags: { $ne: 'red' } }, ['b', 'c']],
  [{}, ['a', 'b', 'c']],
];
