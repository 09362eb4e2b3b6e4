import type { ServiceName } from '../config.ts';
import type { ServiceDefinition } from './context.ts';
import { apikeysService } from './apikeys/index.ts';
import { authService } from './auth/index.ts';
import { configService } from './config/index.ts';
import { consoleService } from './console/index.ts';
import { docdbService } from './docdb/index.ts';
import { filesService } from './files/index.ts';
import { kvService } from './kv/index.ts';
import { lambdaService } from './lambda/index.ts';
import { logsService } from './logs/index.ts';
import { runService } from './run/index.ts';
import { schedulerService } from './scheduler/index.ts';

/** The services this build provides, in the platform's host order. */
export const AVAILABLE_SERVICES: ReadonlyMap<ServiceName, ServiceDefinition> = new Map<ServiceName, ServiceDefinition>([
  ['auth', authService],
  ['apikeys', apikeysService],
  ['lambda', lambdaService],
  ['scheduler', schedulerService],
  ['docdb', docdbService],
  ['logs', logsService],
  ['files', filesService],
  ['config', configService],
  ['run', runService],
  ['kv', kvService],
  ['console', consoleService],
]);
