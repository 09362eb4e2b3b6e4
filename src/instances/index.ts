export { instancesMigrations } from './migrations.ts';
export {
  InstanceRegistry,
  type CounterSource,
  type InstanceRecord,
  type InstanceRegistryOptions,
  type PlatformInstance,
  type PublishedCounter,
} from './registry.ts';
