/**
 * vLLM's `GET /v1/models` answer (cache-identity §1) as its `show_available_models` serializes it:
 * a `ModelList` of `ModelCard`s with the `ModelPermission` defaults. Base models have `parent`
 * null; LoRA adapters name their base. Fixtures for the served-models suites.
 */

/** One ModelCard: `root` is the model path (the adapter's local path for a LoRA). */
export function vllmModelCard(id: string, root: string, parent: string | null, maxModelLen: number | null, createdS = 1733398000): Record<string, unknown> {
  return {
    id,
    object: 'model',
    created: createdS,
    owned_by: 'vllm',
    root,
    parent,
    max_model_len: maxModelLen,
    permission: [
      {
        id: 'modelperm-3c1f1d2b9f0e4a4c8e5a6b7c8d9e0f1a',
        object: 'model_permission',
        created: createdS,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: '*',
        group: null,
        is_blocking: false,
      },
    ],
  };
}

/** The list a vLLM serving `base` (max_model_len `maxModelLen`) with `adapters` loaded answers. */
export function vllmModelList(base: string, adapters: readonly string[] = [], maxModelLen = 131072): Record<string, unknown> {
  return { object: 'list', data: [vllmModelCard(base, `/models/${base}`, null, maxModelLen), ...adapters.map((a) => vllmModelCard(a, `/adapters/${a}`, base, null))] };
}
