// routing.md "HTTP API" and "OpenAI-compatible proxy": the pure request checks behind the router's
// endpoints (400 naming the field), the query JSON writer (exact u64 sequence, kv-events §8) and
// the constant-time internal token check.
import { expect } from 'chai';
import { InternalTokenCheck } from '../../../shared/security/internal-token.js';
import { queryResultJson } from '../../../router-svc/http/query-json.js';
import { parseKvQueryRequest, parseRouteRequest } from '../../../router-svc/http/route-request.js';
import { isRouterHttpError } from '../../../router-svc/http/router-http-errors.js';
import { chatRouteInput, completionRouteInput } from '../../../router-svc/proxy/prompt-route-input.js';

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
    expect(reasonOf(() => parseRouteRequest({}))).to.equal('token_ids or prompt_tokens is required');
    expect(reasonOf(() => parseRouteRequest({ prompt_tokens: 1.5 }))).to.match(/^prompt_tokens/);
    expect(reasonOf(() => parseRouteRequest({ prompt_tokens: -1 }))).to.match(/^prompt_tokens/);
  });

  it('proxy: a token-id prompt is used for CAR; text, batches and chat go by queue cost with an estimate', () => {
    expect(completionRouteInput({ prompt: [3, 4, 5] })).to.deep.equal({ tokenIds: [3, 4, 5], promptTokens: 3 });
    expect(completionRouteInput({ prompt: 'abcdefgh' })).to.deep.equal({ tokenIds: null, promptTokens: 2 });
    expect(completionRouteInput({ prompt: ['abcd', [1, 2, 3]] })).to.deep.equal({ tokenIds: null, promptTokens: 4 });
    expect(completionRouteInput({ prompt: [] })).to.deep.equal({ tokenIds: null, promptTokens: 0 });
    expect(reasonOf(() => completionRouteInput({ prompt: [1, -2] }))).to.match(/^prompt\[1\] must be an integer in \[0, 2\^31\)/);
    expect(reasonOf(() => completionRouteInput({ prompt: ['a', 5] }))).to.match(/^prompt\[1\]/);
    expect(reasonOf(() => completionRouteInput({}))).to.match(/^prompt is required/);
    expect(reasonOf(() => completionRouteInput({ prompt: 7 }))).to.match(/^prompt must be/);
    expect(chatRouteInput({ messages: [{ role: 'user', content: 'abcd' }, { role: 'user', content: [{ type: 'text', text: 'efgh' }] }] })).to.deep.equal({
      tokenIds: null,
      promptTokens: 2,
    });
    expect(reasonOf(() => chatRouteInput({ messages: 'hi' }))).to.match(/^messages must be an array/);
    expect(reasonOf(() => chatRouteInput({ messages: ['hi'] }))).to.match(/^messages\[0\]/);
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
        },
      ],
    });
    expect(json).to.equal(
      '{"input_tokens":4,"block_size":128,"matches":[{"instance_name":"127.0.0.1:8000","dp_rank":0,"synchronized":true,' +
        '"sequence":9223372036854775807,"device_hit_tokens":0,"host_only_hit_tokens":0,"reusable_prefix_tokens":0,' +
        '"device_blocks":12,"host_blocks":3,"error":"gap: \\"x\\""}]}',
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
