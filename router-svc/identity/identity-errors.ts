/**
 * Why a request's identity cannot be resolved (cache-identity §2). Domain errors: the HTTP edge
 * turns them into the 404 and 400 the client sees (http/request-identity-fields.ts); tests match
 * on `class`.
 */
import { DomainError } from '../../shared/errors/domain-error.js';

/** A model no instance lists, while every instance's list is known: vLLM's 404. */
export class UnknownModelError extends DomainError {
  readonly class = 'unknown_model' as const;
  constructor(readonly model: string) {
    super(`no instance serves model ${JSON.stringify(model)}`);
  }
}

/** No `model`, while the known lists name several base models: the router cannot choose. */
export class ModelRequiredError extends DomainError {
  readonly class = 'model_required' as const;
  constructor(
    /** The base models the known lists name, sorted. */
    readonly baseModels: readonly string[],
  ) {
    super(`model is required: the instances serve several base models (${listed(baseModels)})`);
  }
}

/** At most 20 names, then how many more: a fleet of hundreds of adapters keeps the line short. */
function listed(names: readonly string[]): string {
  const shown = names.slice(0, 20).join(', ');
  return names.length > 20 ? `${shown}, and ${names.length - 20} more` : shown;
}
