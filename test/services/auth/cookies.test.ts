import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  SESSION_COOKIE,
  clearSessionCookie,
  cookieDomain,
  readSessionCookie,
  sessionCookie,
} from '../../../src/services/auth/cookies.ts';

const TOKEN = 'pB3v9Yk0cQ2m7xN4s8TzW1eR6uJ5hL0a_-AbCdEfGhI';

describe('sessionCookie', () => {
  test('has exactly the spec attributes on localhost (host-only, Secure by default)', () => {
    assert.equal(SESSION_COOKIE, 'stratus_session');
    assert.equal(
      sessionCookie(TOKEN, { domain: 'localhost', cookieSecure: true }),
      `stratus_session=${TOKEN}; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=604800`,
    );
  });

  test('drops Secure when cookieSecure is false', () => {
    assert.equal(
      sessionCookie(TOKEN, { domain: 'localhost', cookieSecure: false }),
      `stratus_session=${TOKEN}; Path=/; HttpOnly; SameSite=Lax; Max-Age=604800`,
    );
  });

  test('is host-only for a dotted domain too: it never reaches the hosts that serve user code', () => {
    assert.equal(
      sessionCookie(TOKEN, { domain: 'example.com', cookieSecure: true }),
      `stratus_session=${TOKEN}; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=604800`,
    );
    assert.doesNotMatch(sessionCookie(TOKEN, { domain: 'stratus.internal.example', cookieSecure: false }), /Domain=/i);
  });

  test('is host-only for IP addresses', () => {
    assert.doesNotMatch(sessionCookie(TOKEN, { domain: '127.0.0.1', cookieSecure: true }), /Domain=/);
    assert.doesNotMatch(sessionCookie(TOKEN, { domain: '10.1.2.3', cookieSecure: true }), /Domain=/);
  });

  test('refuses a value that would inject attributes', () => {
    assert.throws(() => sessionCookie('abc; Domain=evil.com', { domain: 'localhost', cookieSecure: true }));
    assert.throws(() => sessionCookie('', { domain: 'localhost', cookieSecure: true }));
  });
});

describe('clearSessionCookie', () => {
  test('same attributes, empty value, Max-Age=0; a dotted domain also clears an old domain-wide cookie', () => {
    assert.equal(
      clearSessionCookie({ domain: 'localhost', cookieSecure: true }),
      'stratus_session=; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=0',
    );
    assert.deepEqual(clearSessionCookie({ domain: 'example.com', cookieSecure: false }), [
      'stratus_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0',
      'stratus_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0; Domain=example.com',
    ]);
  });
});

describe('cookieDomain', () => {
  test('dotted names only, never localhost or IPs', () => {
    assert.equal(cookieDomain('example.com'), 'example.com');
    assert.equal(cookieDomain('Example.COM'), 'example.com');
    assert.equal(cookieDomain('localhost'), null);
    assert.equal(cookieDomain('127.0.0.2'), null);
    assert.equal(cookieDomain('::1'), null);
    assert.equal(cookieDomain(''), null);
  });
});

describe('readSessionCookie', () => {
  test('finds the cookie among others, whatever the spacing', () => {
    assert.equal(readSessionCookie(`stratus_session=${TOKEN}`), TOKEN);
    assert.equal(readSessionCookie(`a=1; stratus_session=${TOKEN}; b=2`), TOKEN);
    assert.equal(readSessionCookie(`a=1;stratus_session=${TOKEN};b=2`), TOKEN);
    assert.equal(readSessionCookie(`  a=1 ;   stratus_session =  ${TOKEN}  ; b`), TOKEN);
  });

  test('null when missing, empty or undefined', () => {
    assert.equal(readSessionCookie(undefined), null);
    assert.equal(readSessionCookie(''), null);
    assert.equal(readSessionCookie('a=1; b=2'), null);
    assert.equal(readSessionCookie('stratus_session='), null);
    assert.equal(readSessionCookie('stratus_session'), null);
    assert.equal(readSessionCookie(';;;'), null);
  });

  test('the first well-formed stratus_session wins', () => {
    assert.equal(readSessionCookie('stratus_session=first; stratus_session=second'), 'first');
    assert.equal(readSessionCookie('stratus_session=; stratus_session=second'), 'second');
    assert.equal(readSessionCookie('stratus_session=bad%20value; stratus_session=good'), 'good');
  });

  test('does not match other names that contain it', () => {
    assert.equal(readSessionCookie('xstratus_session=abc; stratus_session_old=def'), null);
    assert.equal(readSessionCookie(`my_stratus_session=abc; stratus_session=${TOKEN}`), TOKEN);
  });

  test('unquotes a quoted value and keeps = inside values of other cookies harmless', () => {
    assert.equal(readSessionCookie(`stratus_session="${TOKEN}"`), TOKEN);
    assert.equal(readSessionCookie(`x=a=b=c; stratus_session=${TOKEN}`), TOKEN);
  });

  test('rejects values no session token could have', () => {
    assert.equal(readSessionCookie('stratus_session=a b'), null);
    assert.equal(readSessionCookie('stratus_session=abc,def'), null);
    assert.equal(readSessionCookie(`stratus_session=${'a'.repeat(513)}`), null);
  });
});
