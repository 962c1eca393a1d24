/**
 * Waits for `work` at most `ms`: resolves `'done'` once it resolves, `'late'` once `ms` passed
 * first (the work goes on, unwatched), and rejects as it rejects. For the steps of a shutdown
 * that wait on a peer (a collector, a store), which must not hold the exit for good.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<'done' | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    return await Promise.race([work.then(() => 'done' as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
