// A service app listening on its own, without the gateway: the baseline of the gateway
// benchmark. Usage: tsx bench/standalone-service.ts <service> <dataDir>; the store is SQLite in
// <dataDir>, or PostgreSQL when DATABASE_URL is set, as for `stratus serve`.
import pino from 'pino';
import { loadSettings, type ServiceName } from '../src/config.ts';
import { VERSION } from '../src/core/version.ts';
import { AVAILABLE_SERVICES } from '../src/services/index.ts';
import { migrateStore, openStore } from '../src/store/index.ts';

const [name, dataDir] = process.argv.slice(2) as [ServiceName, string];
const definition = AVAILABLE_SERVICES.get(name);
if (!definition || !dataDir) throw new Error('usage: standalone-service.ts <service> <dataDir>');
const settings = {
  ...loadSettings({}, { DATABASE_URL: process.env.DATABASE_URL }),
  dataDir,
  logLevel: 'warn' as const,
};
const store = await openStore(settings);
await migrateStore(store, [definition.migrations]);
const app = await definition.build({ settings, store, logger: pino({ level: 'warn' }), version: VERSION });
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
console.log(
  `standalone port ${typeof address === 'object' && address ? address.port : 0}; store ${settings.databaseUrl ? 'PostgreSQL' : 'SQLite'}`,
);
process.on('SIGTERM', () => {
  void app
    .close()
    .then(() => store.close())
    .then(() => process.exit(0));
});
