import pg from 'pg';
import type { ArchiveValue } from './format.ts';
import {
  groupMigrations,
  quoteIdentifier,
  type AppliedMigrations,
  type LoadTarget,
  type Loader,
  type Snapshot,
  type TableShape,
} from './database.ts';

/**
 * The archive's PostgreSQL adapter, on a client of its own. Values of the types this schema uses
 * come back as node-postgres parses them (bytea as Buffer, integers and floats as numbers); `int8`
 * comes back as bigint (the platform's pool parses it as a double, which rounds past 2^53), and
 * every other type as its text, which PostgreSQL reads back as the same value.
 */

const INT8 = 20;
// bool, bytea, char, name, int2, int4, text, oid, float4, float8, bpchar, varchar
const PARSED = new Set([16, 17, 18, 19, 21, 23, 25, 26, 700, 701, 1042, 1043]);
const asText = (value: string) => value;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (format === 'binary' || PARSED.has(oid)) return pg.types.getTypeParser(oid, format);
    return asText;
  },
} as pg.CustomTypesConfig;

/** Rows of the archive's own queries, with `types` above. */
async function query<R extends pg.QueryResultRow>(client: pg.ClientBase, text: string, values: unknown[] = []) {
  return client.query<R>({ text, values, types });
}

async function catalog(client: pg.ClientBase): Promise<TableShape[]> {
  const tables = await query<{ name: string }>(
    client,
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind in ('r', 'p') order by c.relname`,
  );
  const columns = await query<{ table: string; name: string; type: string; sequence: string | null }>(
    client,
    `select c.relname as table, a.attname as name, format_type(a.atttypid, a.atttypmod) as type,
            pg_get_serial_sequence(quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname) as sequence
     from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind in ('r', 'p') and a.attnum > 0 and not a.attisdropped
     order by c.relname, a.attnum`,
  );
  const keys = await query<{ table: string; name: string }>(
    client,
    `select c.relname as table, a.attname as name
     from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
     cross join lateral unnest(i.indkey) with ordinality as k (attnum, position)
     join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum
     where i.indisprimary and n.nspname = current_schema() order by c.relname, k.position`,
  );
  const references = await query<{ table: string; parent: string }>(
    client,
    `select distinct c.relname as table, p.relname as parent
     from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
     join pg_namespace n on n.oid = c.relnamespace where k.contype = 'f' and n.nspname = current_schema()`,
  );
  return tables.rows.map(({ name }) => {
    const own = columns.rows.filter((column) => column.table === name);
    return {
      name,
      columns: own.map((column) => ({ name: column.name, type: column.type })),
      primaryKey: keys.rows.filter((key) => key.table === name).map((key) => key.name),
      serialColumn: own.find((column) => column.sequence !== null)?.name ?? null,
      references: references.rows.filter((reference) => reference.table === name).map((r) => r.parent),
    };
  });
}

async function migrations(client: pg.ClientBase): Promise<AppliedMigrations> {
  const exists = await query<{ found: string | null }>(client, "select to_regclass('stratus_migrations') as found");
  if (exists.rows[0]?.found == null) return {};
  const rows = await query<{ owner: string; name: string }>(client, 'select owner, name from stratus_migrations');
  return groupMigrations(rows.rows);
}

function selectAll(table: TableShape): string {
  const columns = table.columns.map((column) => quoteIdentifier(column.name)).join(', ');
  const order = table.primaryKey.length > 0 ? ` order by ${table.primaryKey.map(quoteIdentifier).join(', ')}` : '';
  return `select ${columns} from ${quoteIdentifier(table.name)}${order}`;
}

const FETCH_BYTES = 8 * 1024 * 1024;
const MAX_FETCH_ROWS = 1_000;

/** About how many bytes a row holds. */
function rowBytes(row: Record<string, unknown>): number {
  let bytes = 0;
  for (const value of Object.values(row))
    bytes += value instanceof Uint8Array ? value.byteLength : typeof value === 'string' ? value.length : 8;
  return bytes;
}

/** int8 columns (text here) as bigint, the type the SQLite adapter gives integers too. */
function withBigints(result: pg.QueryResult): Record<string, unknown>[] {
  const int8 = result.fields.filter((field) => field.dataTypeID === INT8).map((field) => field.name);
  if (int8.length === 0) return result.rows as Record<string, unknown>[];
  for (const row of result.rows as Record<string, unknown>[])
    for (const name of int8) if (row[name] !== null) row[name] = BigInt(row[name] as string);
  return result.rows as Record<string, unknown>[];
}

/** The table's serial counter's next number: past both the sequence and the largest number present. */
async function nextSerial(client: pg.ClientBase, table: TableShape, column: string): Promise<number> {
  const largest = await query<{ n: string | null }>(
    client,
    `select max(${quoteIdentifier(column)}) as n from ${quoteIdentifier(table.name)}`,
  );
  const sequence = await query<{ name: string | null }>(
    client,
    `select pg_get_serial_sequence(quote_ident(current_schema()) || '.' || quote_ident($1), $2) as name`,
    [table.name, column],
  );
  const name = sequence.rows[0]?.name;
  let sequenceNext = 1;
  if (name) {
    // The name comes quoted as PostgreSQL's sequence functions take it, so it is fit for `from`.
    const state = await query<{ last_value: string; is_called: boolean }>(
      client,
      `select last_value, is_called from ${name}`,
    );
    const row = state.rows[0];
    if (row) sequenceNext = Number(row.last_value) + (row.is_called ? 1 : 0);
  }
  return Math.max(sequenceNext, Number(largest.rows[0]?.n ?? 0) + 1);
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  // A connection the server ends must fail the statement in flight, not the process.
  client.on('error', () => {});
  await client.connect();
  return client;
}

/**
 * A repeatable-read, read-only transaction: every statement sees the database as of its first one
 * (taken before this returns), whatever the platform commits meanwhile. Rows are read through a
 * cursor, 1,000 at a time.
 */
export async function openPostgresSnapshot(url: string): Promise<Snapshot> {
  const client = await connect(url);
  try {
    await client.query('begin isolation level repeatable read read only');
    await client.query('select 1');
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return {
    dialect: 'postgres',
    migrations: () => migrations(client),
    tables: () => catalog(client),
    async *rows(table) {
      await client.query(`declare archive_rows no scroll cursor for ${selectAll(table)}`);
      try {
        // Rows per fetch, adjusted to about FETCH_BYTES a batch: a logs chunk can weigh megabytes.
        let batch = 100;
        for (;;) {
          const result = await query(client, `fetch forward ${batch} from archive_rows`);
          if (result.rows.length === 0) return;
          const rows = withBigints(result);
          const bytes = rows.reduce((sum, row) => sum + rowBytes(row), 0);
          batch = Math.max(1, Math.min(MAX_FETCH_ROWS, Math.floor((batch * FETCH_BYTES) / Math.max(bytes, 1))));
          yield* rows;
        }
      } finally {
        await client.query('close archive_rows').catch(() => {});
      }
    },
    nextSerial: async (table) => (table.serialColumn ? nextSerial(client, table, table.serialColumn) : 1),
    async close() {
      await client.query('commit').catch(() => {});
      await client.end();
    },
  };
}

/** node-postgres sends bigint as its decimal text, which PostgreSQL reads into any integer column. */
function bind(value: ArchiveValue): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

// PostgreSQL takes at most 65,535 parameters per statement.
const MAX_PARAMETERS = 60_000;
const MAX_ROWS_PER_INSERT = 1_000;

/** A client on the store's database, for an import: one transaction around the whole load. */
export async function openPostgresTarget(url: string): Promise<LoadTarget> {
  const client = await connect(url);
  const loader: Loader = {
    async clear(table) {
      await client.query(`delete from ${quoteIdentifier(table.name)}`);
    },
    async insert(table, columns, rows) {
      const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMETERS / columns.length)));
      const head = `insert into ${quoteIdentifier(table.name)} (${columns.map(quoteIdentifier).join(', ')}) values `;
      for (let at = 0; at < rows.length; at += perStatement) {
        const slice = rows.slice(at, at + perStatement);
        let n = 0;
        const tuples = slice.map(() => `(${columns.map(() => `$${++n}`).join(', ')})`).join(', ');
        await client.query(
          head + tuples,
          slice.flatMap((row) => row.map(bind)),
        );
      }
    },
    async setNextSerial(table, next) {
      if (!table.serialColumn) return;
      const counter = Math.max(next, await nextSerial(client, table, table.serialColumn));
      await client.query(
        `select setval(pg_get_serial_sequence(quote_ident(current_schema()) || '.' || quote_ident($1), $2), cast($3 as bigint), false)`,
        [table.name, table.serialColumn, counter],
      );
    },
  };
  return {
    dialect: 'postgres',
    migrations: () => migrations(client),
    tables: () => catalog(client),
    rows: async (table, limit) => withBigints(await query(client, `${selectAll(table)} limit $1`, [limit])),
    count: async (table) =>
      Number(
        (await query<{ n: string }>(client, `select count(*) as n from ${quoteIdentifier(table.name)}`)).rows[0]!.n,
      ),
    async transaction(load) {
      await client.query('begin');
      try {
        await load(loader);
        await client.query('commit');
      } catch (error) {
        await client.query('rollback').catch(() => {});
        throw error;
      }
    },
    close: () => client.end(),
  };
}
