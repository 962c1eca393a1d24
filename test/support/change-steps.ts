import fc from 'fast-check';

/**
 * Rounds of changes for model tests of a kind's views: each round one to twelve edits drawn from
 * `edit`, and which of three views look at the result (bit i of `looks` for view i).
 */
export function changeSteps<T>(
  edit: fc.Arbitrary<T>,
): fc.Arbitrary<Array<{ readonly edits: T[]; readonly looks: number }>> {
  return fc.array(
    fc.record({ edits: fc.array(edit, { minLength: 1, maxLength: 12 }), looks: fc.nat({ max: 7 }) }),
    { minLength: 1, maxLength: 6 },
  );
}
