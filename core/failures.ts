/** The innermost cause's message: Temporal wraps the error that explains a failure
 *  (an activity's, a child's) in failures that only say where it happened. */
export function rootMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  let msg = String(err);
  while (e) {
    if (e.message) msg = e.message;
    e = e.cause as typeof e;
  }
  return msg;
}
