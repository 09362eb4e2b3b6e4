import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostName } from '../../src/core/host.ts';

describe('host name', () => {
  it('strips the port and lower-cases the host, IPv6 literals included', () => {
    assert.equal(hostName('Config.LocalHost:8080'), 'config.localhost');
    assert.equal(hostName('[::1]:8080'), '::1');
    assert.equal(hostName('127.0.0.1'), '127.0.0.1');
    assert.equal(hostName(undefined), '');
    assert.equal(hostName(''), '');
    assert.equal(hostName('App.Example.com.:443'), 'app.example.com');
  });
});
