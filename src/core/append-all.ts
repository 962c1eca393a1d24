/**
 * Appends every item of `items` to `target`, however many there are. `target.push(...items)`
 * passes each item as an argument on the stack, and a list of some 125,000 items (the objects
 * of one large kind, the errors of a hostile response) overflows it.
 */
export function appendAll<T>(target: T[], items: readonly T[]): void {
  for (let i = 0; i < items.length; i++) target.push(items[i] as T);
}
