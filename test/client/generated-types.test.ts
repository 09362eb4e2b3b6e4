import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GENERATED_TYPES_PATH, generateClientTypes } from '../../scripts/generate-client-types.ts';

// The SDK's types come from the platform's merged OpenAPI document; a route change that is not
// regenerated would leave the client describing routes that no longer exist.
it('the committed client types match the platform document (run npm run generate:client)', async () => {
  const committed = readFileSync(GENERATED_TYPES_PATH, 'utf8');
  const generated = await generateClientTypes();
  assert.ok(
    committed === generated,
    'packages/client/src/generated/platform.ts is out of date with the routes: run `npm run generate:client` and commit the result',
  );
});
