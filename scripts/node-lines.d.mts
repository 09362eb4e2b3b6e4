// Types for node-lines.mjs, which stays JavaScript because npm's postinstall runs it before any
// TypeScript loader is certain to be installed.
export declare const PACKAGE_ROOT: string;
export declare const ENGINES: string;
export declare const SUPPORTED_MAJORS: readonly number[];
export declare function isSupported(version: string): boolean;
export declare function projectNode(): string | undefined;
