// `stratus` (src/cli.ts, unchanged) with one more config migration than this build has, as the next
// version of Stratus would start during a rolling upgrade. The platform applies it with every other
// service's migrations at start (src/platform.ts → migrateStore, under the PostgreSQL advisory
// lock). Run as an entry script: `node --import tsx test/cluster/newer-schema.ts serve …`
// (test/helpers/serve.ts, with an entry of its own); test/cluster/faults.test.ts starts two at once beside older instances.
import type { ServiceName } from '../../src/config.ts';
import type { ServiceDefinition } from '../../src/services/context.ts';
import { AVAILABLE_SERVICES } from '../../src/services/index.ts';
import { NEWER_MIGRATION } from './newer-migration.ts';

const config = AVAILABLE_SERVICES.get('config');
if (!config) throw new Error('this build has no config service');
// The map is read when the platform starts (selectServices), after this module has run.
(AVAILABLE_SERVICES as Map<ServiceName, ServiceDefinition>).set('config', {
  ...config,
  migrations: { ...config.migrations, migrations: [...config.migrations.migrations, NEWER_MIGRATION] },
});

await import('../../src/cli.ts');
