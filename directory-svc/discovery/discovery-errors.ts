/**
 * The closed set of discovery failures (discovery.md). `class` is stable; the message is
 * `<class>: <detail>`. Each is about one key or one report, never the whole watch: the caller logs
 * it, counts it by class and carries on.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
export type DiscoveryErrorClass =
  /** An etcd key under the prefix that is not `XLLM:<TYPE>:<name>` or `XLLM:LOADMETRICS:<name>`. */
  | 'bad_key'
  /** An instance value that is not JSON, lacks a required field or has a bad type. */
  | 'invalid_instance'
  /** A load report (heartbeat body or LOADMETRICS value) that breaks the rules of "Heartbeats". */
  | 'invalid_load';

export class DiscoveryError extends DomainError {
  readonly class: DiscoveryErrorClass;
  constructor(cls: DiscoveryErrorClass, detail: string) {
    super(detail);
    this.class = cls;
  }
}

export function isDiscoveryError(e: unknown): e is DiscoveryError {
  return e instanceof DiscoveryError;
}
