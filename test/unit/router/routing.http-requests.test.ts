// routing.md "HTTP API" and "OpenAI-compatible proxy": the pure request checks behind the router's
// endpoints (400 naming the field), the query JSON writer (exact u64 sequence, kv-events §8) and
// the constant-time internal token check.
import { expect } from 'chai';
import { InternalTokenCheck } from '../../../shared/security/internal-token.js';
import { queryResultJson } from '../../../router-svc/http/query-json.js';
import { parseKvQueryRequest, parseRouteRequest } from '../../../router-svc/http/route-request.js';
import { isRouterHttpError } from '../../../router-svc/http/router-http-errors.js';
import { chatRouteInput, completionRouteInput, routeEndpointInput } from '../../../router-svc/proxy/prompt-route-input.js';

/** The 400 reason `fn` throws (fails when it does not throw a bad_request). */
function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isRouterHttpError(e) && e.class === 'bad_request') {
      expect(e.httpStatus).to.equal(400);
      return e.reason;
    }
    throw e;
  }
  throw new Error('expected a bad_request');
}

describe('routing.md HTTP API request checks', () => {
  it('query: token_ids must be an array of integers in [0, 2^31), an empty one is state only', () => {
    expect(parseKvQueryRequest({ token_ids: [0, 1, 2 ** 31 - 1] }).tokenIds).to.deep.equal([0, 1, 2 ** 31 - 1]);
    expect(parseKvQueryRequest({ token_ids: [] }).tokenIds).to.deep.equal([]);
    expect(reasonOf(() => parseKvQueryRequest({}))).to.match(/^token_ids is required/);
    expect(reasonOf(() => parseKvQueryRequest({ token_ids: null }))).to.match(/^token_ids must be an array/);
    expect(reasonOf(() => parseKvQueryRequest({ token_ids: [1, 2, 2 ** 31] }))).to.match(/^token_ids\[2\]/);
    expect(reasonOf(() => parseKvQueryRequest({ token_ids: [1, '2'] }))).to.match(/^token_ids\[1\]/);
    expect(reasonOf(() => parseKvQueryRequest({ token_ids: [NaN] }))).to.match(/^token_ids\[0\]/);
    expect(reasonOf(() => parseKvQueryRequest([1, 2]))).to.equal('body must be a JSON object');
    expect(reasonOf(() => parseKvQueryRequest('x'))).to.equal('body must be a JSON object');
  });

  it('route: token_ids or prompt_tokens (dry_run false unless given); prompt_tokens alone gives no token ids', () => {
    expect(parseRouteRequest({ token_ids: [5, 6, 7] })).to.deep.equal({ tokenIds: [5, 6, 7], promptTokens: 3, dryRun: false });
    expect(parseRouteRequest({ prompt_tokens: 42 })).to.deep.equal({ tokenIds: null, promptTokens: 42, dryRun: false });
    expect(parseRouteRequest({ token_ids: [1], prompt_tokens: 9, dry_run: true })).to.deep.equal({ tokenIds: [1], promptTokens: 9, dryRun: true });
    expect(reasonOf(() => parseRouteRequest({}))).to.equal('token_ids, prompt, messages or prompt_tokens is required');
    expect(reasonOf(() => parseRouteRequest({ prompt_tokens: 1.5 }))).to.match(/^prompt_tokens/);
    expect(reasonOf(() => parseRouteRequest({ prompt_tokens: -1 }))).to.match(/^prompt_tokens/);
  });

  it('T4 proxy: a token-id prompt is used as it is; text and chat go to the tokenizer with a ceil(chars/4) estimate', () => {
    expect(completionRouteInput({ prompt: [3, 4, 5] })).to.deep.equal({ kind: 'token_ids', request: { tokenIds: [3, 4, 5], promptTokens: 3 } });
    expect(completionRouteInput({ prompt: 'abcdefgh' })).to.deep.equal({ kind: 'text', text: 'abcdefgh', addSpecialTokens: true, estimate: 2 });
    expect(completionRouteInput({ prompt: 'abcd', add_special_tokens: false })).to.deep.equal({ kind: 'text', text: 'abcd', addSpecialTokens: false, estimate: 1 });
    expect(reasonOf(() => completionRouteInput({ prompt: 'abcd', add_special_tokens: 1 }))).to.equal('add_special_tokens must be a boolean');
    // An array of strings is one request per string, routed by the first (tokenization.md §2).
    expect(completionRouteInput({ prompt: ['abcd', 'efghijkl'] })).to.deep.equal({ kind: 'text', text: 'abcd', addSpecialTokens: true, estimate: 1 });
    expect(completionRouteInput({ prompt: [[1, 2], [3, 4, 5]] })).to.deep.equal({ kind: 'token_ids', request: { tokenIds: null, promptTokens: 5 } });
    expect(completionRouteInput({ prompt: [] })).to.deep.equal({ kind: 'token_ids', request: { tokenIds: null, promptTokens: 0 } });
    expect(reasonOf(() => completionRouteInput({ prompt: [1, -2] }))).to.match(/^prompt\[1\] must be an integer in \[0, 2\^31\)/);
    expect(reasonOf(() => completionRouteInput({ prompt: ['a', 5] }))).to.match(/^prompt\[1\]/);
    expect(reasonOf(() => completionRouteInput({}))).to.match(/^prompt is required/);
    expect(reasonOf(() => completionRouteInput({ prompt: 7 }))).to.match(/^prompt must be/);
    const chat = chatRouteInput({ messages: [{ role: 'user', content: 'abcd' }, { role: 'user', content: [{ type: 'text', text: 'efgh' }] }] });
    expect(chat.kind).to.equal('chat');
    expect(chat.kind === 'chat' && chat.estimate).to.equal(2);
    expect(reasonOf(() => chatRouteInput({ messages: 'hi' }))).to.match(/^messages must be a non-empty array/);
    expect(reasonOf(() => chatRouteInput({ messages: ['hi'] }))).to.match(/^messages\[0\]/);
    expect(reasonOf(() => chatRouteInput({ messages: [{ content: 'x' }] }))).to.equal('messages[0].role must be a non-empty string');
  });

  it('T8 /v1/route: token_ids, prompt or messages, exactly one of them', () => {
    expect(routeEndpointInput({ token_ids: [1, 2] })).to.deep.equal({ kind: 'token_ids', request: { tokenIds: [1, 2], promptTokens: 2, dryRun: false } });
    expect(routeEndpointInput({ prompt: 'abcd' })).to.deep.equal({ kind: 'text', text: 'abcd', addSpecialTokens: true, estimate: 1 });
    expect(routeEndpointInput({ messages: [{ role: 'user', content: 'hi' }] }).kind).to.equal('chat');
    expect(reasonOf(() => routeEndpointInput({ token_ids: [1], prompt: 'x' }))).to.equal('give one of token_ids, prompt or messages');
  });

  it('query JSON: the spec field order, and a sequence above 2^53 written exactly', () => {
    const json = queryResultJson({
      input_tokens: 4,
      block_size: 128,
      matches: [
        {
          instance_name: '127.0.0.1:8000',
          dp_rank: 0,
          synchronized: true,
          sequence: 2n ** 63n - 1n,
          device_hit_tokens: 0,
          host_only_hit_tokens: 0,
          reusable_prefix_tokens: 0,
          device_blocks: 12,
          host_blocks: 3,
          error: 'gap: "x"',
          engine_kind: 'vllm',
        },
      ],
    });
    expect(json).to.equal(
      '{"input_tokens":4,"block_size":128,"matches":[{"instance_name":"127.0.0.1:8000","dp_rank":0,"synchronized":true,' +
        '"sequence":9223372036854775807,"device_hit_tokens":0,"host_only_hit_tokens":0,"reusable_prefix_tokens":0,' +
        '"device_blocks":12,"host_blocks":3,"error":"gap: \\"x\\"","engine_kind":"vllm"}]}',
    );
    expect(JSON.parse(queryResultJson({ input_tokens: 0, block_size: 0, matches: [] }))).to.deep.equal({ input_tokens: 0, block_size: 0, matches: [] });
  });

  it('internal token: required only when configured; missing, empty or different is refused', () => {
    const open = new InternalTokenCheck('');
    expect(open.required).to.equal(false);
    expect(open.accepts(undefined)).to.equal(true);
    const check = new InternalTokenCheck('s3cret');
    expect(check.accepts('s3cret')).to.equal(true);
    for (const sent of [undefined, '', 's3cre', 's3crett', ['s3cret']]) expect(check.accepts(sent), String(sent)).to.equal(false);
  });
});
