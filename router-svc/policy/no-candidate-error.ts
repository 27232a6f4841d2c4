/**
 * routing.md "Candidates": with no candidate the answer is 503 with a clear reason. The HTTP layer
 * maps `httpStatus` and `reason`; callers match on `class`, never on the message.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
export class NoCandidateError extends DomainError {
  readonly class = 'no_candidate' as const;
  readonly httpStatus = 503 as const;
  constructor(
    /** What the client sees: why no instance could take the request. */
    readonly reason: string,
  ) {
    super(reason);
  }
}
