import { expect } from 'vitest';
import { EngineHttpError } from '../../activities/engines/adapter.js';

/** The EngineHttpError a call fails with (the test fails if it succeeds or throws anything else). */
export async function rejection(p: Promise<unknown>): Promise<EngineHttpError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(EngineHttpError);
    return err as EngineHttpError;
  }
  throw new Error('expected the call to fail');
}
