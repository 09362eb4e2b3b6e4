#!/usr/bin/env node
import { runUserCommand } from './index.ts';

process.exitCode = await runUserCommand(process.argv.slice(2));
