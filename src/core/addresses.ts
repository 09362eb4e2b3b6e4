import { isIP } from 'node:net';

/** One `TRUSTED_PROXIES` entry: an IP address or a CIDR block; null when it is neither. */
export function parseProxyEntry(
  entry: string,
): { address: string; prefix: number | null; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', prefixText, extra] = entry.trim().split('/');
  const version = isIP(address);
  if (version === 0 || extra !== undefined) return null;
  const family = version === 6 ? 'ipv6' : 'ipv4';
  if (prefixText === undefined) return { address, prefix: null, family };
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > (version === 6 ? 128 : 32)) return null;
  return { address, prefix, family };
}
