import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the key-value node answers, with its status and message (the README's
 * decisions name the rules behind them). Written out in full so the table reads as the contract;
 * the few answered for every service alike (a body that is not JSON, one over the size limit, an
 * unknown route) come from the shared app, and the public port's refusal of `/v1/replicate` from
 * the gateway.
 */
export const KvErrors = {
  // 400
  invalidProject: () =>
    new HttpError(400, 'invalid_project', 'project id must be 1–64 characters from A–Z a–z 0–9 _ -'),
  keyNotPercentEncoded: () => new HttpError(400, 'invalid_key', 'the key is not valid percent-encoding'),
  emptyKey: () => new HttpError(400, 'invalid_key', 'the key must not be empty'),
  collectionNameRequired: () => new HttpError(400, 'missing_collection', 'a collection name is required: {"name":"…"}'),
  bodyNotObject: () => new HttpError(400, 'invalid_json', 'the body must be a JSON object'),
  valueRequired: () => new HttpError(400, 'invalid_json', 'the body must be a JSON object with a "value" member'),
  collectionNameNotString: () => new HttpError(400, 'validation_error', 'the collection name must be a string'),
  invalidCollectionName: (maxLength: number) =>
    new HttpError(
      400,
      'validation_error',
      `collection names are 1–${maxLength} characters without "/" or control characters`,
    ),
  invalidLimit: (max: number) => new HttpError(400, 'validation_error', `limit must be an integer from 1 to ${max}`),
  // 403
  credentialsRequired: () =>
    new HttpError(
      403,
      'forbidden',
      'credentials required: X-Gateway-Authentication, apikey + secret, or Api-Key + Api-Secret',
    ),
  // 404: a missing collection is `not_found` when the collection itself is addressed or listed, and
  // `missing_collection` when a key is written or deleted in it.
  collectionNotFound: () => new HttpError(404, 'not_found', 'collection does not exist'),
  keyNotFound: () => new HttpError(404, 'not_found', 'key not found'),
  missingCollection: () => new HttpError(404, 'missing_collection', 'collection does not exist'),
  // 500
  storageUnreadable: () => new HttpError(500, 'internal_error', 'the node cannot read its storage'),
  // 502: a replica's forwarded write found no usable parent (nothing is applied).
  parentUnreachable: () => new HttpError(502, 'parent_unavailable', 'the parent node cannot be reached'),
  parentFailed: (status: number) => new HttpError(502, 'parent_unavailable', `the parent node failed (${status})`),
  parentUnreadable: () => new HttpError(502, 'parent_unavailable', 'the parent node answered something unreadable'),
} as const;
