/**
 * The error the official `openai` client raised for a call: its typed class (NotFoundError,
 * BadRequestError, ...), status, `param` and message, as an application would see them.
 */
import OpenAI from 'openai';

/** The APIError `p` rejects with; throws when it resolves or fails with anything else. */
export async function raised(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (e) {
    if (e instanceof OpenAI.APIError) return e;
    throw e;
  }
  throw new Error('expected the openai client to raise');
}
