// Style guide "Typed errors with a stable class": one base, message `<class>: <detail>` (kv-events §10).
import { expect } from 'chai';
import { ConfigError } from '../../../shared/config/config-error.js';
import { DomainError } from '../../../shared/errors/domain-error.js';
import { GapError, StreamError } from '../../../directory-svc/errors/stream-errors.js';
import { DiscoveryError } from '../../../directory-svc/discovery/discovery-errors.js';
import { RouterHttpError } from '../../../router-svc/http/router-http-errors.js';
import { PromptShapeError } from '../../../shared/tokenize/chat-request.js';

describe('one base error with a stable class', () => {
  it('a class set as a field or in the constructor gives `<class>: <detail>` and the subclass name', () => {
    const gap = new GapError('expected seq 5, got 7');
    expect(gap).to.be.instanceOf(StreamError).and.instanceOf(DomainError).and.instanceOf(Error);
    expect([gap.class, gap.detail, gap.message, gap.name]).to.deep.equal(['gap', 'expected seq 5, got 7', 'gap: expected seq 5, got 7', 'GapError']);
    expect(Object.keys(gap)).to.not.include('message');
    const bad = new DiscoveryError('bad_key', 'XLLM:FOO:a');
    expect([bad.class, bad.message, bad.name]).to.deep.equal(['bad_key', 'bad_key: XLLM:FOO:a', 'DiscoveryError']);
    const http = new RouterHttpError('bad_request', 400, 'token_ids[2] must be an integer in [0, 2^31)');
    expect([http.class, http.reason, http.message]).to.deep.equal(['bad_request', http.detail, 'bad_request: token_ids[2] must be an integer in [0, 2^31)']);
  });

  it('keeps the derived message when something assigns one, and lets an error print its own line', () => {
    const gap = new GapError('x');
    gap.message = 'overwritten';
    expect(gap.message).to.equal('gap: x');
    const config = new ConfigError('--grpc_port', 'expected an integer');
    expect([config.class, config.message]).to.deep.equal(['config', '--grpc_port: expected an integer']);
    const shape = new PromptShapeError('messages[0].role must be a string', 'messages');
    expect([shape.class, shape.message, shape.name, shape.param]).to.deep.equal(['prompt_shape', 'messages[0].role must be a string', 'PromptShapeError', 'messages']);
  });
});
