// Shared by the discovery unit suites.
import { isDiscoveryError } from '../../../directory-svc/discovery/discovery-errors.js';

/** The `class` of the DiscoveryError `fn` throws, or 'none' when it returns; other errors propagate. */
export function errorClass(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isDiscoveryError(e)) return e.class;
    throw e;
  }
  return 'none';
}
