// routing.md token id range [0, 2^31), shared by the router's HTTP, the directory's gRPC, kvctl and the simulator.
import { expect } from 'chai';
import { firstInvalidTokenId, isTokenId } from '../../../shared/keys/token-ids.js';

describe('routing.md token ids in [0, 2^31)', () => {
  it('accepts the bounds of the range and nothing outside it or of another type', () => {
    for (const t of [0, 1, 151643, 2 ** 31 - 1]) expect(isTokenId(t), String(t)).to.equal(true);
    for (const t of [-1, 2 ** 31, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1', null, undefined, 1n]) expect(isTokenId(t), String(t)).to.equal(false);
  });

  it('names the first bad index of an array, -1 when every element is a token id', () => {
    expect(firstInvalidTokenId([])).to.equal(-1);
    expect(firstInvalidTokenId([0, 1, 2 ** 31 - 1])).to.equal(-1);
    expect(firstInvalidTokenId([1, 2, 2 ** 31, -1])).to.equal(2);
    expect(firstInvalidTokenId(['0'])).to.equal(0);
  });
});
