import { networkInterfaces } from 'node:os';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';

type AllCallback = (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void;

/**
 * Where a lambda's `fetch` may connect (issue 22, item 1; README: Egress). By default only public
 * unicast addresses: loopback, private (RFC 1918), shared address space (CGNAT, RFC 6598), unique
 * local (fc00::/7), link-local (169.254.0.0/16 with the cloud metadata address, fe80::/10),
 * multicast, and the reserved, documentation and benchmarking blocks are refused, and so are the
 * platform's own ports on a local address. `LAMBDA_EGRESS_ALLOW` (host names, `*.suffix`, and CIDRs)
 * opens more; the platform's own ports stay closed whatever it says: its internal port trusts the
 * identity headers a caller sends.
 *
 * The check is made on the address a name resolves to, and the connection is made to that
 * address (`lookup` below hands net.connect the checked address), so a DNS answer that changes
 * between the check and the connection cannot move it.
 */

/** Why an address is not public, for the lambda's error message. */
export type AddressKind =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared (CGNAT)'
  | 'link-local'
  | 'unique local'
  | 'multicast'
  | 'reserved';

const RANGES: readonly [AddressKind, 'ipv4' | 'ipv6', string, number][] = [
  ['unspecified', 'ipv4', '0.0.0.0', 8],
  ['private', 'ipv4', '10.0.0.0', 8],
  ['shared (CGNAT)', 'ipv4', '100.64.0.0', 10],
  ['loopback', 'ipv4', '127.0.0.0', 8],
  ['link-local', 'ipv4', '169.254.0.0', 16],
  ['private', 'ipv4', '172.16.0.0', 12],
  ['reserved', 'ipv4', '192.0.0.0', 24], // IETF protocol assignments
  ['reserved', 'ipv4', '192.0.2.0', 24], // documentation (TEST-NET-1)
  ['reserved', 'ipv4', '192.88.99.0', 24], // 6to4 relay anycast
  ['private', 'ipv4', '192.168.0.0', 16],
  ['reserved', 'ipv4', '198.18.0.0', 15], // benchmarking
  ['reserved', 'ipv4', '198.51.100.0', 24], // TEST-NET-2
  ['reserved', 'ipv4', '203.0.113.0', 24], // TEST-NET-3
  ['multicast', 'ipv4', '224.0.0.0', 4],
  ['reserved', 'ipv4', '240.0.0.0', 4], // future use and the broadcast address
  ['unspecified', 'ipv6', '::', 128],
  ['loopback', 'ipv6', '::1', 128],
  ['reserved', 'ipv6', '100::', 64], // discard-only
  ['reserved', 'ipv6', '2001:db8::', 32], // documentation
  ['unique local', 'ipv6', 'fc00::', 7],
  ['link-local', 'ipv6', 'fe80::', 10],
  ['private', 'ipv6', 'fec0::', 10], // the deprecated site-local block
  ['multicast', 'ipv6', 'ff00::', 8],
];

const BLOCKS = new Map<AddressKind, BlockList>();
for (const [kind, family, network, prefix] of RANGES) {
  let list = BLOCKS.get(kind);
  if (!list) BLOCKS.set(kind, (list = new BlockList()));
  list.addSubnet(network, prefix, family);
}

/** Expands an IPv6 literal to its eight 16-bit groups. */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  // A dotted IPv4 tail (`::ffff:1.2.3.4`) as two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((group) => parseInt(group, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const v4 = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/**
 * The IPv4 address an IPv6 one carries and reaches: IPv4-mapped (`::ffff:a.b.c.d`), NAT64
 * (`64:ff9b::a.b.c.d`), 6to4 (`2002:aabb:ccdd::`) and the old IPv4-compatible form (`::a.b.c.d`).
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  const zeros = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  if (zeros(0, 6) && (g[6]! !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!);
  return null;
}

/** What kind of address `address` (an IPv4 or IPv6 literal) is; `public` when none of the blocks holds it. */
export function classifyAddress(address: string): AddressKind {
  const family = isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 6) {
    const carried = embeddedIpv4(address);
    if (carried !== null) return classifyAddress(carried);
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [kind, list] of BLOCKS) if (list.check(address, type)) return kind;
  return 'public';
}

/** A refused destination, answered inside the lambda as a `TypeError` with this message. */
export class EgressRefused extends Error {
  override readonly name = 'EgressRefused';
  readonly code = 'EGRESS_REFUSED';
}

interface AllowRules {
  hosts: Set<string>;
  suffixes: string[];
  networks: BlockList;
}

/** `LAMBDA_EGRESS_ALLOW`: comma- or space-separated host names, `*.suffix` wildcards and CIDRs. */
export function parseEgressAllow(text: string): AllowRules {
  const rules: AllowRules = { hosts: new Set(), suffixes: [], networks: new BlockList() };
  for (const item of text.split(/[\s,]+/).filter(Boolean)) {
    const entry = item.toLowerCase();
    const slash = entry.indexOf('/');
    if (slash >= 0) {
      const network = entry.slice(0, slash).replace(/^\[|\]$/g, '');
      const prefix = Number(entry.slice(slash + 1));
      const family = isIP(network);
      if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128))
        throw new TypeError(`LAMBDA_EGRESS_ALLOW: "${item}" is not a CIDR`);
      rules.networks.addSubnet(network, prefix, family === 4 ? 'ipv4' : 'ipv6');
    } else if (isIP(entry.replace(/^\[|\]$/g, '')) !== 0) {
      const address = entry.replace(/^\[|\]$/g, '');
      rules.networks.addAddress(address, isIP(address) === 4 ? 'ipv4' : 'ipv6');
    } else if (entry.startsWith('*.') && entry.length > 2) {
      rules.suffixes.push(entry.slice(1));
    } else if (/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(entry)) {
      rules.hosts.add(entry.replace(/\.$/, ''));
    } else {
      throw new TypeError(`LAMBDA_EGRESS_ALLOW: "${item}" is neither a host name nor a CIDR`);
    }
  }
  return rules;
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );

export interface EgressPolicyOptions {
  /** `LAMBDA_EGRESS_ALLOW`. */
  allow?: string;
  /**
   * The platform's own ports (its public and internal ports, and its remote upstreams'): never a
   * destination on a local address. Read at each check, so the platform may fill the list once its
   * listeners have their ports.
   */
  ownPorts: readonly number[] | (() => readonly number[]);
  resolver?: Resolver;
}

/** This machine's own addresses (every interface's), read once. */
let machineAddresses: ReadonlySet<string> | undefined;

/** Whether `address` is this machine or a network that is not the public internet. */
function isLocal(address: string): boolean {
  machineAddresses ??= new Set(
    Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .map((info) => info.address),
  );
  return classifyAddress(address) !== 'public' || machineAddresses.has(address);
}

/** Decides destinations and resolves names to the address a connection may use. */
export class EgressPolicy {
  private readonly rules: AllowRules;
  private readonly ownPorts: () => readonly number[];
  private readonly resolver: Resolver;

  constructor(options: EgressPolicyOptions) {
    this.rules = parseEgressAllow(options.allow ?? '');
    const own = options.ownPorts;
    this.ownPorts = typeof own === 'function' ? own : () => own;
    this.resolver = options.resolver ?? systemResolver;
  }

  private hostAllowed(hostname: string): boolean {
    const host = hostname.toLowerCase().replace(/\.$/, '');
    return this.rules.hosts.has(host) || this.rules.suffixes.some((suffix) => host.endsWith(suffix));
  }

  /**
   * Throws EgressRefused unless `hostname` (as asked) may reach `address`, and, with a `port`,
   * unless that is one of the platform's own ports on a local address (loopback, private,
   * link-local…, or one of this machine's): whatever the allow list says, since an internal port
   * trusts the identity a caller names. The same port on a public address is someone else's.
   */
  checkAddress(hostname: string, address: string, port?: number): void {
    if (port !== undefined && this.ownPorts().includes(port) && isLocal(address))
      throw new EgressRefused(
        `fetch to ${hostname}${hostname === address ? '' : ` (${address})`}:${port} refused: that is this platform's own port`,
      );
    if (this.hostAllowed(hostname)) return;
    const family = isIP(address) === 4 ? 'ipv4' : 'ipv6';
    if (this.rules.networks.check(address, family)) return;
    const kind = classifyAddress(address);
    if (kind !== 'public')
      throw new EgressRefused(
        `fetch to ${hostname}${hostname === address ? '' : ` (${address})`} refused: a ${kind} address (LAMBDA_EGRESS_ALLOW opens more)`,
      );
  }

  /** Throws EgressRefused unless `hostname` (as asked) may reach `address`:`port`. */
  check(hostname: string, address: string, port: number): void {
    this.checkAddress(hostname, address, port);
  }

  /**
   * The address a connection to `hostname` may use, whatever the port (checked apart, before the
   * request): a literal as it is, a name resolved, the first address that passes.
   */
  async resolveAddress(hostname: string, port?: number): Promise<LookupAddress> {
    const literal = hostname.replace(/^\[|\]$/g, '');
    const family = isIP(literal);
    if (family !== 0) {
      this.checkAddress(literal, literal, port);
      return { address: literal, family };
    }
    const addresses = await this.resolver(hostname);
    let refusal: unknown;
    for (const candidate of addresses) {
      try {
        this.checkAddress(hostname, candidate.address, port);
        return candidate;
      } catch (error) {
        refusal ??= error;
      }
    }
    throw refusal ?? new EgressRefused(`fetch to ${hostname} refused: the name resolves to no address`);
  }

  /**
   * A \`lookup\` for net.connect (undici's connector passes it on): the connection goes to the
   * address this policy checked, so a DNS answer that changes afterwards cannot move it.
   */
  lookup(port?: number): LookupFunction {
    return (hostname, options, callback) => {
      this.resolveAddress(hostname, port).then(
        ({ address, family }) => {
          if ((options as { all?: boolean }).all) (callback as AllCallback)(null, [{ address, family }]);
          else callback(null, address, family);
        },
        (error: NodeJS.ErrnoException) => callback(error, '', 0),
      );
    };
  }

  /** The address to connect to for \`hostname\`:\`port\`. */
  resolve(hostname: string, port: number): Promise<LookupAddress> {
    return this.resolveAddress(hostname, port);
  }
}

/**
 * The dispatcher the platform's outbound requests (a lambda's fetch, a scheduler's webhook) go through: connections go to the address the policy checked (its
 * `lookup`); a literal address never reaches `lookup`, so callers check it first (`resolve`).
 */
export function egressAgent(policy: EgressPolicy): Agent {
  // One connector per port, so the lookup that checks the address also knows the port (the
  // platform's own ports are refused on local addresses only; net.connect's lookup gets no port).
  const connectors = new Map<number, buildConnector.connector>();
  const connect: buildConnector.connector = (options, callback) => {
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
    let connector = connectors.get(port);
    if (connector === undefined) {
      connector = buildConnector({ lookup: policy.lookup(port) } as buildConnector.BuildOptions);
      connectors.set(port, connector);
    }
    return connector(options, callback);
  };
  return new Agent({ connect, connections: 64 });
}
