import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { parseProxyEntry } from '../core/addresses.ts';

/** `::ffff:10.0.0.1` (an IPv4 client on a dual-stack socket) → `10.0.0.1`. */
function plain(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * The load balancers and reverse proxies in front of the public port (`TRUSTED_PROXIES`, README:
 * Deployment). A request whose connection comes from one of them is taken to be on behalf of the
 * client its `X-Forwarded-For` names: the last address in that list that is not itself a trusted
 * proxy. Everything that limits or records a client (the failed-key throttle, the access log, the
 * `X-Forwarded-For` services receive) uses that address, and a trusted proxy's connections are not
 * held to the per-address connection cap, which it would otherwise hit for all its clients at once.
 * A connection from anywhere else is its own client, whatever headers it sends.
 */
export class TrustedProxies {
  private readonly list = new BlockList();
  private readonly empty: boolean;

  constructor(entries: readonly string[] = []) {
    for (const entry of entries) {
      const parsed = parseProxyEntry(entry);
      if (!parsed) throw new Error(`not an IP address or CIDR block: ${entry}`);
      if (parsed.prefix === null) this.list.addAddress(parsed.address, parsed.family);
      else this.list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
    this.empty = entries.length === 0;
  }

  trusts(address: string | undefined): boolean {
    if (this.empty || !address) return false;
    const ip = plain(address);
    const version = isIP(ip);
    return version !== 0 && this.list.check(ip, version === 6 ? 'ipv6' : 'ipv4');
  }

  /** The address of the client a request is for (see the class comment). */
  clientAddress(req: IncomingMessage): string {
    const socket = req.socket.remoteAddress ?? '';
    if (!this.trusts(socket)) return socket;
    const hops = forwardedHops(req.headers['x-forwarded-for']);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      // A malformed hop ends what can be believed: the proxy that wrote it is the client.
      if (isIP(plain(hop)) === 0) return i === hops.length - 1 ? socket : hops[i + 1]!;
      if (!this.trusts(hop)) return plain(hop);
    }
    return hops.length > 0 ? plain(hops[0]!) : socket;
  }

  /** The `X-Forwarded-For` a service receives: a trusted proxy's list with the proxy appended, else the socket's address. */
  forwardedFor(req: IncomingMessage): string {
    const socket = req.socket.remoteAddress ?? '';
    const header = req.headers['x-forwarded-for'];
    if (!this.trusts(socket) || forwardedHops(header).length === 0) return socket;
    return `${forwardedHops(header).join(', ')}, ${socket}`;
  }

  /** `X-Forwarded-Proto`: what a trusted proxy says (it may terminate TLS), else `http`. */
  forwardedProto(req: IncomingMessage): string {
    const proto = req.headers['x-forwarded-proto'];
    return this.trusts(req.socket.remoteAddress) && (proto === 'https' || proto === 'http') ? proto : 'http';
  }
}

function forwardedHops(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((hop) => hop.trim())
    .filter((hop) => hop !== '');
}
