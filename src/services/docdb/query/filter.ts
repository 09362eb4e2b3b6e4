// The filter language (README: Filter language). A filter is validated and compiled once into
// closures; the predicate then runs over every candidate document without re-reading the filter and
// without allocating, and never throws: a value of an unexpected type simply does not match.
//
// Filters come from request bodies, so their size is bounded (MAX_FILTER_VALUES values in all,
// MAX_OPERATOR_ELEMENTS per operator array) and each compiled filter reports its `weight`: the
// number of conditions that may each walk the value they test. A document's evaluation costs at
// most about weight × its JSON size; callers use that to decide where it may run.

import { isJsonObject, type JsonObject, type JsonValue } from '../../../core/json.ts';
import { compareStrings } from './order.ts';
import { compilePath, valueAtCompiledPath, type CompiledPath } from './paths.ts';

export class InvalidFilterError extends Error {
  override readonly name = 'InvalidFilterError';
}

export type Predicate = (document: JsonValue) => boolean;

type Condition = (value: JsonValue) => boolean;

// Filters come from request bodies; a limit on nesting keeps compilation and evaluation far from
// the call stack's limit, so a hostile filter is a 400 rather than a crash.
const MAX_DEPTH = 256;
/** Most elements in the array of one `$in`, `$nin`, `$and` or `$or`. */
export const MAX_OPERATOR_ELEMENTS = 10_000;
/** Most JSON values (objects, arrays, strings, numbers, booleans, nulls) in a whole filter. */
export const MAX_FILTER_VALUES = 20_000;

const always: Condition = () => true;

/** A compiled filter and the number of its conditions that may walk a value (see above). */
export interface CompiledFilter {
  predicate: Predicate;
  weight: number;
}

export function compileFilter(filter: unknown): Predicate {
  return compileFilterPlan(filter).predicate;
}

export function compileFilterPlan(filter: unknown): CompiledFilter {
  if (!isPlainObject(filter)) throw new InvalidFilterError('filter must be an object');
  checkSize(filter);
  weight = 0;
  const predicate = compileObject(filter, 0);
  return { predicate, weight: Math.max(1, weight) };
}

/** Conditions compiled so far by the current compileFilterPlan (compiling is synchronous). */
let weight = 0;

/**
 * Refuses filters over the size caps before anything is compiled, counting at most
 * MAX_FILTER_VALUES + 1 values: an operator array over MAX_OPERATOR_ELEMENTS is named when its
 * object is reached, and more than MAX_FILTER_VALUES values in all is refused.
 */
function checkSize(filter: Record<string, unknown>): void {
  let values = 0;
  const stack: unknown[] = [filter];
  while (stack.length > 0) {
    const value = stack.pop();
    if (++values > MAX_FILTER_VALUES)
      throw new InvalidFilterError(
        `filter is too large: at most ${MAX_FILTER_VALUES} values (objects, arrays, strings, numbers…) are allowed`,
      );
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && stack.length <= MAX_FILTER_VALUES; i++) stack.push(value[i]);
      continue;
    }
    for (const key of Object.keys(value)) {
      const member = (value as Record<string, unknown>)[key];
      if (key.startsWith('$') && Array.isArray(member) && member.length > MAX_OPERATOR_ELEMENTS) {
        throw new InvalidFilterError(
          `operator '${key}' has ${member.length} elements; at most ${MAX_OPERATOR_ELEMENTS} are allowed`,
        );
      }
      stack.push(member);
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkDepth(depth: number): void {
  if (depth > MAX_DEPTH) throw new InvalidFilterError(`filter is nested more than ${MAX_DEPTH} levels deep`);
}

/** Any JSON value as a condition: objects are conditions, everything else implicit equality. */
function compileCondition(condition: unknown, depth: number): Condition {
  checkDepth(depth);
  weight++;
  if (isPlainObject(condition)) return compileObject(condition, depth);
  return compileEquality(condition, depth);
}

function compileObject(condition: Record<string, unknown>, depth: number): Condition {
  const parts: Condition[] = [];
  for (const key of Object.keys(condition)) {
    const operand = condition[key];
    parts.push(key.startsWith('$') ? compileOperator(key, operand, depth + 1) : compileField(key, operand, depth + 1));
  }
  return allOf(parts);
}

function allOf(parts: Condition[]): Condition {
  switch (parts.length) {
    case 0:
      return always;
    case 1:
      return parts[0] as Condition;
    case 2: {
      const [first, second] = parts as [Condition, Condition];
      return (value) => first(value) && second(value);
    }
    default:
      return (value) => {
        for (let i = 0; i < parts.length; i++) if (!(parts[i] as Condition)(value)) return false;
        return true;
      };
  }
}

function anyOf(parts: Condition[]): Condition {
  if (parts.length === 1) return parts[0] as Condition;
  return (value) => {
    for (let i = 0; i < parts.length; i++) if ((parts[i] as Condition)(value)) return true;
    return false;
  };
}

/** `path: sub` — on an object, sub holds at the path (missing → null); on an array, for some object element. */
function compileField(path: string, sub: unknown, depth: number): Condition {
  weight++;
  const compiled = compilePath(path);
  const inner = compileCondition(sub, depth);
  const holdsIn = (object: JsonObject): boolean => inner(lookup(object, compiled));
  return (value) => {
    if (typeof value !== 'object' || value === null) return false;
    if (!Array.isArray(value)) return holdsIn(value);
    for (let i = 0; i < value.length; i++) {
      const element = value[i] as JsonValue;
      if (isJsonObject(element) && holdsIn(element)) return true;
    }
    return false;
  };
}

function lookup(object: JsonObject, path: CompiledPath): JsonValue {
  const found = valueAtCompiledPath(object, path);
  return found === undefined ? null : found;
}

function compileOperator(operator: string, operand: unknown, depth: number): Condition {
  weight++;
  switch (operator) {
    case '$eq':
      return compileCondition(operand, depth);
    case '$ne': {
      const equal = compileCondition(operand, depth);
      return (value) => !equal(value);
    }
    case '$gt':
    case '$lt':
    case '$ge':
    case '$gte':
    case '$le':
    case '$lte':
      return compileComparison(operator, operand);
    case '$in':
    case '$nin': {
      const elements = expectArray(operator, operand);
      // Scalar elements are looked up in sets (one lookup per value, however many there are);
      // objects (conditions) and arrays (literals) are tested one by one.
      const scalars = new ScalarSet();
      const parts: Condition[] = [];
      for (const element of elements) {
        if (!scalars.add(element)) parts.push(compileCondition(element, depth + 1));
      }
      if (scalars.size > 0) parts.unshift(equalityWith(scalars.has));
      const any = parts.length === 0 ? () => false : anyOf(parts);
      return operator === '$in' ? any : (value) => !any(value);
    }
    case '$contains': {
      if (typeof operand !== 'string') throw new InvalidFilterError(`operator '${operator}' expects a string`);
      return someElement((value) => typeof value === 'string' && value.includes(operand));
    }
    case '$and':
      return allOf(expectArray(operator, operand).map((element) => compileCondition(element, depth + 1)));
    case '$or': {
      const elements = expectArray(operator, operand);
      return elements.length === 0
        ? () => false
        : anyOf(elements.map((element) => compileCondition(element, depth + 1)));
    }
    default:
      throw new InvalidFilterError(`unknown operator '${operator}'`);
  }
}

function expectArray(operator: string, operand: unknown): unknown[] {
  if (!Array.isArray(operand)) throw new InvalidFilterError(`operator '${operator}' expects an array`);
  return operand;
}

/** A scalar test that also holds for an array value when it holds for some element. */
function someElement(test: Condition): Condition {
  return (value) => {
    if (!Array.isArray(value)) return test(value);
    for (let i = 0; i < value.length; i++) if (test(value[i] as JsonValue)) return true;
    return false;
  };
}

function compileComparison(operator: string, operand: unknown): Condition {
  const upward = operator === '$gt' || operator === '$ge' || operator === '$gte';
  const orEqual = operator !== '$gt' && operator !== '$lt';
  if (typeof operand === 'string') {
    // Same kind only: a string operand never matches a number, null, boolean or object.
    return someElement((value) => {
      if (typeof value !== 'string') return false;
      const c = compareStrings(value, operand);
      return upward ? (orEqual ? c >= 0 : c > 0) : orEqual ? c <= 0 : c < 0;
    });
  }
  if (typeof operand === 'number' || typeof operand === 'bigint') {
    return someElement(compileNumbers(operand, upward, orEqual));
  }
  throw new InvalidFilterError(`operator '${operator}' expects a string or a number`);
}

/** Same kind only: a number operand matches numbers (bigint included, compared exactly). */
function compileNumbers(operand: number | bigint, upward: boolean, orEqual: boolean): Condition {
  const isNumber = (value: JsonValue): value is number | bigint =>
    typeof value === 'number' || typeof value === 'bigint';
  if (upward)
    return orEqual ? (value) => isNumber(value) && value >= operand : (value) => isNumber(value) && value > operand;
  return orEqual ? (value) => isNumber(value) && value <= operand : (value) => isNumber(value) && value < operand;
}

/**
 * Scalars of an `$in`/`$nin` operand, by kind. A number and a bigint are equal when they are the
 * same integer (as in compileExact): every integer number is also kept as a bigint, and every
 * bigint that a double holds exactly also as a number.
 */
class ScalarSet {
  private readonly strings = new Set<string>();
  private readonly numbers = new Set<number>();
  private readonly bigints = new Set<bigint>();
  private readonly others = new Set<boolean | null>();
  size = 0;

  /** False when `value` is not a scalar (an object or an array). */
  add(value: unknown): boolean {
    switch (typeof value) {
      case 'string':
        this.strings.add(value);
        break;
      case 'number':
        this.numbers.add(value);
        if (Number.isInteger(value)) this.bigints.add(BigInt(value));
        break;
      case 'bigint': {
        this.bigints.add(value);
        const number = Number(value);
        if (Number.isFinite(number) && BigInt(number) === value) this.numbers.add(number);
        break;
      }
      case 'boolean':
        this.others.add(value);
        break;
      default:
        if (value !== null) return false;
        this.others.add(null);
    }
    this.size++;
    return true;
  }

  readonly has = (value: JsonValue): boolean => {
    switch (typeof value) {
      case 'string':
        return this.strings.has(value);
      case 'number':
        return this.numbers.has(value);
      case 'bigint':
        return this.bigints.has(value);
      case 'boolean':
        return this.others.has(value);
      default:
        return value === null && this.others.has(null);
    }
  };
}

/** eq(c, v): v equals c, or v is an array with an element equal to c. */
function compileEquality(condition: unknown, depth: number): Condition {
  return equalityWith(compileExact(condition, depth));
}

/** `equals` holds for the value, or the value is an array with an element for which it holds. */
function equalityWith(equals: Condition): Condition {
  return (value) => {
    if (equals(value)) return true;
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (equals(value[i] as JsonValue)) return true;
    return false;
  };
}

/**
 * Deep equality with a literal. Inside a literal (the elements of an array condition), objects are
 * values compared member by member, not conditions, so their keys are not operators.
 */
function compileExact(literal: unknown, depth: number): Condition {
  checkDepth(depth);
  weight++;
  if (literal === null) return (value) => value === null;
  switch (typeof literal) {
    case 'boolean':
    case 'string':
      return (value) => value === literal;
    case 'number':
      return (value) =>
        typeof value === 'number' ? value === literal : typeof value === 'bigint' && isSameNumber(value, literal);
    case 'bigint':
      return (value) =>
        typeof value === 'bigint' ? value === literal : typeof value === 'number' && isSameNumber(literal, value);
    case 'object': {
      if (Array.isArray(literal)) {
        const elements = literal.map((element) => compileExact(element, depth + 1));
        const count = elements.length;
        return (value) => {
          if (!Array.isArray(value) || value.length !== count) return false;
          for (let i = 0; i < count; i++) if (!(elements[i] as Condition)(value[i] as JsonValue)) return false;
          return true;
        };
      }
      const record = literal as Record<string, unknown>;
      const names = Object.keys(record);
      const members = names.map((name) => compileExact(record[name], depth + 1));
      const count = names.length;
      return (value) => {
        if (!isJsonObject(value) || countMembers(value) !== count) return false;
        for (let i = 0; i < count; i++) {
          const name = names[i] as string;
          if (!Object.hasOwn(value, name) || !(members[i] as Condition)(value[name] as JsonValue)) return false;
        }
        return true;
      };
    }
    default:
      throw new InvalidFilterError('filter must be JSON');
  }
}

/** Exact: JS compares a bigint and a number by mathematical value. */
function isSameNumber(big: bigint, number: number): boolean {
  return !(big < number) && !(big > number) && Number.isFinite(number);
}

// Counting with for-in avoids allocating a key array for every candidate document.
function countMembers(object: JsonObject): number {
  let count = 0;
  for (const key in object) if (Object.hasOwn(object, key)) count++;
  return count;
}
